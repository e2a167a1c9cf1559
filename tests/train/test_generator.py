"""The trial generator: failure semantics, alignment, process isolation, concurrency."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from apexrl.train.generator import (
    OUTCOME_POLICY,
    GeneratorSettings,
    TrialGenerator,
    pick_endpoint,
)
from apexrl.trial.executors import InlineExecutor
from tests.train.fake_trials import L1, L2, OBS, PROMPT, S1, S2

RUNNER = "tests.train.fake_trials:run_trial"
RESPONSE = S1 + OBS + S2
MASK = [1] * len(S1) + [0] * len(OBS) + [1] * len(S2)
LOGPROBS = L1 + [0.0] * len(OBS) + L2


def make_tasks(root: Path, scenarios: dict[str, dict]) -> Path:
    for name, sc in scenarios.items():
        d = root / "tasks" / name
        d.mkdir(parents=True)
        (d / "task.toml").write_text("")
        (d / "scenario.json").write_text(json.dumps(sc))
    return root / "tasks"


def batch(names: list[str], phase: str = "train", step: int = 3) -> dict:
    return {
        "prompts": [[{"role": "user", "content": n}] for n in names],
        "env_classes": ["apexrl"] * len(names),
        "env_extras": [{"task_path": n} for n in names],
        "sampling_params": None,
        "trajectory_ids": [f"{n}_{i}" for i, n in enumerate(names)],
        "batch_metadata": {"global_step": step, "training_phase": phase},
    }


def generator(tmp: Path, tasks: Path, executor=None, **kw) -> TrialGenerator:
    s = GeneratorSettings(
        tasks_dir=str(tasks), logs_dir=str(tmp / "logs"), runner=RUNNER, executor="inline", **kw
    )
    return TrialGenerator(s, executor=executor or InlineExecutor())


SCENARIOS = {
    "complete": {"status": "complete", "reward": 0.75},
    "error": {"status": "error", "error_class": "sandbox_died", "reward": 0.9},
    "timeout": {"status": "agent_timeout", "reward": 0.5},
    "ctx": {"status": "context_length"},
    "length": {"status": "length"},
    "nover": {"status": "no_verifier_result"},
    "notokens": {"status": "error", "tokens": False},
    "trailing": {"status": "complete", "reward": 1.0, "trailing_observation": True},
    "crash_once": {"status": "complete", "reward": 1.0, "crash": "once"},
    "crash": {"crash": "always"},
}


def test_failure_semantics_and_alignment(tmp_path):
    """The `strict` outcome policy (recipe rows: tests/train/test_outcome_policy.py)."""
    from apexrl.trial.config import AgentBudgets

    tasks = make_tasks(tmp_path, SCENARIOS)
    gen = generator(tmp_path, tasks, budgets=AgentBudgets(outcome_policy="strict"))
    names = list(SCENARIOS)
    out = asyncio.run(gen.generate(batch(names)))
    by = dict(zip(names, range(len(names)), strict=True))
    n = len(names)
    for key in (
        "prompt_token_ids",
        "response_ids",
        "rewards",
        "loss_masks",
        "stop_reasons",
        "rollout_logprobs",
        "trajectory_ids",
        "trajectory_generation_times",
    ):
        assert len(out[key]) == n, key
    for i in range(n):
        assert (
            len(out["response_ids"][i])
            == len(out["loss_masks"][i])
            == len(out["rollout_logprobs"][i])
        )
    c = by["complete"]
    assert out["prompt_token_ids"][c] == PROMPT
    assert out["response_ids"][c] == RESPONSE
    assert out["loss_masks"][c] == MASK
    assert out["rollout_logprobs"][c] == LOGPROBS
    assert out["rewards"][c] == 0.75 and out["stop_reasons"][c] == "stop"
    # budget outcomes train with reward 0
    for name, stop in (
        ("timeout", "agent_timeout"),
        ("ctx", "context_length"),
        ("length", "length"),
    ):
        i = by[name]
        assert out["rewards"][i] == 0.0 and out["stop_reasons"][i] == stop
        assert out["loss_masks"][i] == MASK
    # infrastructure failures: reward 0 (even if the record says otherwise), fully masked
    for name, stop in (("error", "error"), ("nover", "no_verifier_result")):
        i = by[name]
        assert out["rewards"][i] == 0.0 and out["stop_reasons"][i] == stop
        assert out["response_ids"][i] == RESPONSE and not any(out["loss_masks"][i])
    i = by["notokens"]
    assert out["response_ids"][i] == [0] and out["loss_masks"][i] == [0]
    assert out["rollout_logprobs"][i] == [0.0]
    # trailing observation tokens carry no signal: dropped
    assert out["response_ids"][by["trailing"]] == RESPONSE
    # a runner that raised once is retried, one that always raises counts as error
    assert out["rewards"][by["crash_once"]] == 1.0
    i = by["crash"]
    assert out["stop_reasons"][i] == "error" and not any(out["loss_masks"][i])
    m = out["rollout_metrics"]
    assert m["apexrl/status/complete"] == pytest.approx(3 / n)
    assert m["apexrl/masked_frac"] == pytest.approx(4 / n)
    assert out["trajectory_ids"] == [f"{x}_{j}" for j, x in enumerate(names)]


def test_policy_table_covers_every_trial_status():
    from typing import get_args

    from apexrl.artifacts.models import TrialResult

    statuses = set(get_args(TrialResult.model_fields["status"].annotation))
    assert statuses == set(OUTCOME_POLICY)


def test_context_budget_cuts_response_and_eval_uses_its_own(tmp_path):
    tasks = make_tasks(tmp_path, {"a": {"status": "complete", "reward": 1.0}})
    gen = generator(
        tmp_path, tasks, max_seq_len=len(PROMPT) + 4, eval_max_seq_len=64, eval_max_steps=250
    )
    out = asyncio.run(gen.generate(batch(["a"])))
    assert out["response_ids"][0] == RESPONSE[:4] and out["stop_reasons"][0] == "length"
    assert len(out["loss_masks"][0]) == 4
    out = asyncio.run(gen.generate(batch(["a"], phase="eval")))
    assert out["response_ids"][0] == RESPONSE and out["stop_reasons"][0] == "stop"
    cfg = json.loads((tmp_path / "logs/eval/step-3/a_0/config.json").read_text())
    assert cfg["budgets"]["context_window"] == 64 and cfg["budgets"]["max_steps"] == 250


def test_concurrency_cap_and_rate_limit(tmp_path):
    names = [f"t{i}" for i in range(6)]
    tasks = make_tasks(tmp_path, {n: {"status": "complete", "sleep": 0.2} for n in names})
    gen = generator(tmp_path, tasks, concurrency=2)
    asyncio.run(gen.generate(batch(names)))
    assert gen.max_in_flight == 2


def test_each_trial_runs_in_its_own_process(tmp_path):
    import os

    from apexrl.trial.executors import ProcessExecutor

    names = ["p0", "p1", "p2"]
    tasks = make_tasks(tmp_path, {n: {"status": "complete", "reward": 1.0} for n in names})
    ex = ProcessExecutor(2)
    try:
        gen = generator(tmp_path, tasks, executor=ex, concurrency=2)
        out = asyncio.run(gen.generate(batch(names)))
    finally:
        ex.close()
    assert out["rewards"] == [1.0, 1.0, 1.0]
    pids = {(tmp_path / f"logs/train/step-3/{n}_{i}/pid").read_text() for i, n in enumerate(names)}
    assert len(pids) == 3 and str(os.getpid()) not in pids


def test_sharded_trials_give_the_same_samples_as_one_process_each(tmp_path):
    import os

    from apexrl.trial.executors import ProcessExecutor, ShardExecutor

    names = ["complete", "error", "timeout", "ctx", "trailing", "notokens"]
    sc = {n: SCENARIOS[n] for n in names}
    outs, pids = {}, {}
    for kind, ex in (("process", ProcessExecutor(2)), ("shards", ShardExecutor(2))):
        tasks = make_tasks(tmp_path / kind, sc)
        try:
            gen = generator(tmp_path / kind, tasks, executor=ex, concurrency=4)
            outs[kind] = asyncio.run(gen.generate(batch(names)))
        finally:
            ex.close()
        pids[kind] = {
            (tmp_path / kind / f"logs/train/step-3/{n}_{i}/pid").read_text()
            for i, n in enumerate(names)
        }
    a, b = outs["process"], outs["shards"]
    for k in ("prompt_token_ids", "response_ids", "loss_masks", "rollout_logprobs", "rewards"):
        assert a[k] == b[k], k
    assert a["stop_reasons"] == b["stop_reasons"]
    assert len(pids["process"]) == len(names)  # one process per trial
    assert len(pids["shards"]) <= 2 and str(os.getpid()) not in pids["shards"]


def test_session_affinity_pins_a_trajectory_to_one_engine():
    eps = ["http://e0", "http://e1", "http://e2"]
    picks = {pick_endpoint(eps, "task_7", True, i) for i in range(10)}
    assert len(picks) == 1
    spread = {pick_endpoint(eps, f"task_{i}", True, 0) for i in range(50)}
    assert spread == set(eps)
    assert [pick_endpoint(eps, "x", False, i) for i in range(3)] == eps
    assert pick_endpoint([], "x", True, 0) is None


def test_missing_task_path_is_a_clear_error(tmp_path):
    gen = generator(tmp_path, tmp_path)
    b = batch(["a"])
    b["env_extras"] = [{}]
    with pytest.raises(ValueError, match="task_path"):
        asyncio.run(gen.generate(b))


def test_rate_limit_spaces_trial_starts():
    import time

    from apexrl.train.generator import RateLimiter

    async def starts() -> list[float]:
        lim = RateLimiter(20.0)  # one start every 50 ms
        out = []
        for _ in range(4):
            await lim.wait()
            out.append(time.monotonic())
        return out

    t = asyncio.run(starts())
    assert t[-1] - t[0] >= 0.14


def test_token_record_is_read_without_following_links(tmp_path):
    """The agent's tito.json is sandbox-written: a link there is no record (the sample is
    masked), never a file read from wherever it points; a regular one is read."""
    from apexrl.artifacts.models import TrialResult
    from apexrl.tito.trajectory import TitoTrajectory, TitoTurn
    from apexrl.train.generator import read_token_record
    from apexrl.trial.config import TrialOutcome

    traj = TitoTrajectory(
        trajectory_id="t",
        messages=[{"role": "user", "content": "q"}],
        prompt_ids=PROMPT,
        turns=[TitoTurn(kind="sampled", token_ids=S1, logprobs=L1)],
    )
    outside = tmp_path / "outside.json"
    outside.write_text("{}\n" + traj.model_dump_json() + "\n")
    logs = tmp_path / "logs"
    (logs / "agent").mkdir(parents=True)
    outcome = TrialOutcome(result=TrialResult(task_id="t", status="complete"))
    (logs / "agent" / "tito.json").symlink_to(outside)
    assert read_token_record(outcome, logs) is None
    (logs / "agent" / "tito.json").unlink()
    (logs / "agent" / "tito.json").write_bytes(outside.read_bytes())
    got = read_token_record(outcome, logs)
    assert got is not None and got.prompt_ids == PROMPT


def test_sft_token_record_refuses_a_link_and_names_an_invalid_record(tmp_path):
    """train sft reads the same final record (apexrl.tito.trajectory.last_token_record) but
    stops on what the generator only masks: a link, a final record that is not valid."""
    from apexrl.errors import BadRecordError
    from apexrl.tito.trajectory import TitoTrajectory, TitoTurn
    from apexrl.train.sft_data import _token_record

    traj = TitoTrajectory(
        trajectory_id="t",
        messages=[{"role": "user", "content": "q"}],
        prompt_ids=PROMPT,
        turns=[TitoTurn(kind="sampled", token_ids=S1, logprobs=L1)],
    )
    folder = tmp_path / "trajectories" / "t1"
    folder.mkdir(parents=True)
    assert _token_record(tmp_path, "t1") is None
    (folder / "tokens.jsonl").write_text('{"x": 1}\n' + traj.model_dump_json() + "\n\n")
    assert _token_record(tmp_path, "t1").prompt_ids == PROMPT
    (folder / "tokens.jsonl").write_text('{"prompt_ids": [1], "turns": 3}\n')
    with pytest.raises(BadRecordError, match="not a valid token record"):
        _token_record(tmp_path, "t1")
    (folder / "tokens.jsonl").unlink()
    (folder / "tokens.jsonl").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(BadRecordError, match="refused"):
        _token_record(tmp_path, "t1")
