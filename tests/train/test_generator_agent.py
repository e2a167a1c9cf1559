"""apexrl's agent through the generator: real trials (local bubblewrap sandbox, the
example worlds, host-side grading) against a scripted TITO engine, each trial in its
own spawned process. Checks what the trainer gets for complete, errored, timed-out
and context-exceeded trials."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from apexrl.train.generator import GeneratorSettings, TrialGenerator
from tests.scripted_engine import FIXED_LOGPROB, Fault, ScriptedEngine, tool_call_text

pytestmark = pytest.mark.integration
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> tuple[Path, Path, str]:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    root = tmp_path_factory.mktemp("gen-agent")
    write_example(root / "ex")
    assert all(
        o.record for o in convert_all(load_source(root / "ex"), root / "tasks", {}, strict=True)
    )
    for t in sorted((root / "tasks").iterdir()):
        gold = json.loads((t / "tests" / "golden_responses.json").read_text())
        if gold["gold_response_type"] == "text":
            return root, t, gold["gold_response"]
    raise AssertionError("no text task")


def run(root: Path, task: Path, script, name: str, **kw) -> tuple[dict, Path]:
    logs = root / "logs" / name
    with ScriptedEngine(script) as eng:
        gen = TrialGenerator(
            GeneratorSettings(
                tasks_dir=str(root / "tasks"),
                logs_dir=str(logs),
                worlds_dir=str(root / "ex" / "world_files_zipped"),
                executor=kw.pop("executor", "process"),
                concurrency=1,
                endpoints=[eng.url],
                model="scripted",
                tokenizer="qwen3",
                max_tokens_per_turn=512,
                **kw,
            )
        )
        try:
            out = asyncio.run(
                gen.generate(
                    {
                        "prompts": [[{"role": "user", "content": "task"}]],
                        "env_extras": [{"task_path": task.name}],
                        "trajectory_ids": ["t_0"],
                        "batch_metadata": {"global_step": 0, "training_phase": "train"},
                    }
                )
            )
        finally:
            gen.close()
    return out, logs / "train" / "step-0" / "t_0"


@pytest.fixture
def sandbox_dirs(data, monkeypatch):
    root = data[0]
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(root / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(root / "cache"))


def aligned(out: dict) -> tuple[list, list, list]:
    r, m, lp = out["response_ids"][0], out["loss_masks"][0], out["rollout_logprobs"][0]
    assert len(r) == len(m) == len(lp) > 0
    return r, m, lp


def test_complete_trial(data, sandbox_dirs):
    root, task, gold = data
    out, trial = run(
        root, task, [tool_call_text("filesystem_list_files", {"path": "/"}), gold], "complete"
    )
    assert out["rewards"] == [1.0] and out["stop_reasons"] == ["stop"]
    r, m, lp = aligned(out)
    steps = json.loads((trial / "agent" / "apexrl_agent.json").read_text())["step_records"]
    sampled = sum(s["completion_tokens"] for s in steps)
    observed = sum(s["observation_tokens"] for s in steps)
    assert sum(m) == sampled and len(r) == sampled + observed
    assert m[0] == 1 and 0 in m and m[-1] == 1  # sampled, tool result, final answer
    assert all(x == FIXED_LOGPROB for x, k in zip(lp, m, strict=True) if k)
    assert all(x == 0.0 for x, k in zip(lp, m, strict=True) if not k)
    tito = json.loads((trial / "agent" / "tito.json").read_text())
    assert out["prompt_token_ids"][0] == tito["prompt_ids"]
    assert r == [t for turn in tito["turns"] for t in turn["token_ids"]]


def test_sharded_executor_gives_the_same_sample_and_records(data, sandbox_dirs):
    """executor "shards": the trial runs in a shard worker's event loop (arun_trial),
    and the trainer gets what one process per trial gives."""
    root, task, gold = data
    script = [tool_call_text("filesystem_list_files", {"path": "/"}), gold]
    a, ta = run(root, task, list(script), "same-process")
    b, tb = run(root, task, list(script), "same-shards", executor="shards", shards=1)
    for k in ("prompt_token_ids", "response_ids", "loss_masks", "rollout_logprobs", "rewards"):
        assert a[k] == b[k], k
    assert a["stop_reasons"] == b["stop_reasons"] == ["stop"]
    assert (ta / "agent" / "tito.json").read_text() == (tb / "agent" / "tito.json").read_text()


def _prompt_len(root: Path, task: Path, gold: str) -> int:
    """Tokens of the task's initial prompt (system, instruction, the world's tool list)."""
    done = root / "logs" / "complete" / "train" / "step-0" / "t_0" / "agent" / "tito.json"
    if not done.is_file():
        _, trial = run(root, task, [gold], "probe")
        done = trial / "agent" / "tito.json"
    return len(json.loads(done.read_text())["prompt_ids"])


def test_context_exceeded_trial_trains_with_reward_zero(data, sandbox_dirs):
    root, task, gold = data
    # room for the prompt and the first turn, not for the tool result that follows
    window = _prompt_len(root, task, gold) + 40
    call = tool_call_text("filesystem_list_files", {"path": "/"})
    out, trial = run(root, task, [call, gold], "ctx", max_seq_len=window)
    rec = json.loads((trial / "agent" / "apexrl_agent.json").read_text())
    assert rec["status"] == "context_length"
    assert out["rewards"] == [0.0] and out["stop_reasons"] == ["context_length"]
    r, m, _ = aligned(out)
    assert m == [1] * len(r)  # the sampled turn trains; the overflowing observation is dropped
    assert len(out["prompt_token_ids"][0]) + len(r) <= window


def test_errored_trial_is_masked(data, sandbox_dirs):
    root, task, _ = data
    out, _ = run(root, task, [Fault("status", status=400, message="bad request")], "err")
    assert out["rewards"] == [0.0] and out["stop_reasons"] == ["error"]
    _, m, _ = aligned(out)
    assert not any(m)


def test_timed_out_trial_is_masked_with_reward_zero(data, sandbox_dirs):
    from apexrl.trial.config import AgentBudgets

    root, task, _ = data
    out, trial = run(
        root,
        task,
        [tool_call_text("filesystem_list_files", {"path": "/"}), Fault("hang", seconds=60)],
        "timeout",
        # room for setup and the first turn (archipelago's tool list is ~17k prompt tokens)
        budgets=AgentBudgets(agent_timeout_s=20),
    )
    assert out["stop_reasons"] == ["agent_timeout"] and out["rewards"] == [0.0]
    r, m, _ = aligned(out)
    assert r and not any(m)  # the recipe's outcome policy masks agent timeouts
