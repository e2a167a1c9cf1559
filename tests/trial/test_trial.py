"""Full trials on the example data with the local (bubblewrap) environment."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from apexrl.trial.config import AgentBudgets, TrialConfig
from apexrl.trial.run import arun_trial, harbor_config, run_trial
from tests.trial.conftest import task_named

pytestmark = pytest.mark.integration


def config(tmp_path: Path, worlds: Path, name: str = "trial", **kw) -> TrialConfig:
    return TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=tmp_path / name, **kw)


def script_agent(**kwargs):
    from harbor.models.trial.config import AgentConfig

    return AgentConfig(import_path="tests.trial.agents:ScriptAgent", kwargs=kwargs)


def run_script(task: Path, cfg: TrialConfig, **kwargs):
    import asyncio

    return asyncio.run(arun_trial(task, cfg, agent_config=script_agent(**kwargs)))


def no_sandbox_left(trial_data: Path) -> None:
    """No trial folder is left but the warm ones kept for the next trials."""
    from apexrl.envs.local.environment import POOL

    work = trial_data / "work"
    # Other tests in the same process keep warm sandboxes in other work dirs: count ours.
    warm = {s.root for v in POOL.slots.values() for s in v if s.root.is_relative_to(work)}
    left = [p.name for p in work.glob("apexrl-trial-*") if p not in warm] if work.is_dir() else []
    assert left == [], f"sandbox folders left behind: {left}"
    assert len(warm) <= 2


def test_oracle_scores_one_on_every_example_task(tmp_path, trial_data, worlds, task_dirs):
    assert len(task_dirs) >= 10
    for task in task_dirs:
        out = run_trial(task, config(tmp_path, worlds, task.name))
        r = out.result
        assert (r.status, r.error_class, r.reward) == ("complete", None, 1.0), (
            task.name,
            out.error_message,
            out.verdicts,
        )
        assert r.criteria_met == r.criteria_total > 0
        assert len(out.verdicts) == r.criteria_total
        assert {v["source"] for v in out.verdicts} <= {"deterministic", "reference"}
        grading = json.loads((tmp_path / task.name / "verifier" / "grading.json").read_text())
        assert grading["reward"] == 1.0
        assert set(out.timings) >= {"environment_setup", "agent_execution", "verifier", "total"}
        assert r.task_id.startswith("task_") and r.world_id.startswith("world_")
    no_sandbox_left(trial_data)


def test_file_task_diff_lists_the_gold_file(tmp_path, worlds, task_dirs):
    task = task_named(task_dirs, "bid-summary-memo")
    out = run_trial(task, config(tmp_path, worlds))
    grading = json.loads((tmp_path / "trial" / "verifier" / "grading.json").read_text())
    assert grading["changes"]["created"] == ["filesystem/outputs/bid_summary.docx"]
    assert grading["changes"]["modified"] == grading["changes"]["deleted"] == []
    assert out.result.reward == 1.0


def test_harbor_default_verifier_runs_the_vendored_runner_in_the_sandbox(
    tmp_path, worlds, task_dirs
):
    """tests/test.sh + grade.py (stdlib only) inside bubblewrap agree with the host grader."""
    import asyncio

    from harbor.models.trial.config import VerifierConfig
    from harbor.trial.trial import Trial

    for part in ("bid-summary-memo", "steerco-40fc"):
        task = task_named(task_dirs, part)
        hc = harbor_config(task, config(tmp_path, worlds, part))
        hc.verifier = VerifierConfig()

        async def go(hc=hc):
            return await (await Trial.create(hc)).run()

        hr = asyncio.run(go())
        assert hr.exception_info is None, hr.exception_info
        assert hr.verifier_result.rewards["reward"] == 1.0
        verdicts = json.loads((tmp_path / part / "verifier" / "verdicts.json").read_text())
        assert all(v["met"] for v in verdicts)


def test_agent_that_writes_its_own_reward_gets_no_credit(tmp_path, worlds, task_dirs):
    task = task_named(task_dirs, "steerco-40fc")
    out = run_script(task, config(tmp_path, worlds), answer="I do not know.", forge=True)
    r = out.result
    assert r.status == "complete"
    assert r.reward == 0.0 and r.criteria_met == 0
    vdir = tmp_path / "trial" / "verifier"
    assert json.loads((vdir / "reward.json").read_text())["reward"] == 0.0
    assert not (vdir / "reward.txt").exists()
    assert json.loads((vdir / "grading.json").read_text())["criteria_met"] == 0


def test_forged_reward_is_dropped_by_the_in_sandbox_runner_too(tmp_path, worlds, task_dirs):
    import asyncio

    from harbor.models.trial.config import VerifierConfig
    from harbor.trial.trial import Trial

    task = task_named(task_dirs, "steerco-40fc")
    hc = harbor_config(task, config(tmp_path, worlds))
    hc.verifier = VerifierConfig()
    hc.agent = script_agent(answer="I do not know.", forge=True)

    async def go():
        return await (await Trial.create(hc)).run()

    hr = asyncio.run(go())
    assert hr.verifier_result.rewards["reward"] == 0.0
    assert not (tmp_path / "trial" / "verifier" / "judge_verdicts.json").exists()


def test_wrong_answer_scores_partial_fraction(tmp_path, worlds, task_dirs):
    task = task_named(task_dirs, "highest-indication")
    # meets the two deterministic criteria, not the reference: the judge criteria stay unmet
    out = run_script(
        task, config(tmp_path, worlds), answer="Sterling Rowe Holdings at USD 1213.6 million."
    )
    r = out.result
    assert r.status == "complete" and r.reward == 0.0
    assert (r.criteria_met, r.criteria_total) == (2, 4)
    assert [v["source"] for v in out.verdicts].count("unjudged") == 2


# --- faults ------------------------------------------------------------------------------


def test_sandbox_process_killed_is_classified(tmp_path, trial_data, worlds, task_dirs):
    task = task_named(task_dirs, "steerco-40fc")
    t0 = time.monotonic()
    out = run_script(task, config(tmp_path, worlds), kill_gateway=True, commands=["true"])
    assert (out.result.status, out.result.error_class) == ("error", "sandbox_died")
    assert out.result.reward == 0.0
    assert time.monotonic() - t0 < 30
    no_sandbox_left(trial_data)


def test_exec_killed_inside_the_sandbox_fails_the_oracle(tmp_path, worlds, task_dirs, task_copy):
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    (task / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\nkill -9 $$\n")
    out = run_trial(task, config(tmp_path, worlds))
    assert (out.result.status, out.result.error_class) == ("error", "oracle_failed")
    assert "137" in (out.error_message or "")


def test_exec_that_hangs_stops_at_its_timeout(tmp_path, trial_data, worlds, task_dirs):
    task = task_named(task_dirs, "steerco-40fc")
    t0 = time.monotonic()
    out = run_script(
        task, config(tmp_path, worlds), commands=["sleep 300 & sleep 300"], command_timeout_s=1
    )
    assert (out.result.status, out.result.error_class) == ("error", "exec_timeout")
    assert time.monotonic() - t0 < 30
    no_sandbox_left(trial_data)


def test_agent_past_its_timeout_is_agent_timeout(tmp_path, worlds, task_dirs):
    task = task_named(task_dirs, "steerco-40fc")
    cfg = config(tmp_path, worlds, budgets=AgentBudgets(agent_timeout_s=1.0))
    t0 = time.monotonic()
    out = run_script(task, cfg, sleep_s=120, answer="late")
    assert (out.result.status, out.result.error_class) == ("agent_timeout", "agent_timeout")
    assert out.result.reward == 0.0
    assert time.monotonic() - t0 < 30


def test_verifier_crash_is_no_verifier_result(tmp_path, worlds, task_dirs, task_copy):
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    (task / "tests" / "verifiers.json").write_text("{not json")
    out = run_trial(task, config(tmp_path, worlds))
    assert (out.result.status, out.result.error_class) == ("no_verifier_result", "bad_task_rubric")
    assert out.result.reward == 0.0


def test_task_without_world_in_store_is_an_error(tmp_path, trial_data, task_dirs):
    empty = tmp_path / "empty-store"
    empty.mkdir()
    task = task_named(task_dirs, "steerco-40fc")
    out = run_trial(task, config(tmp_path, empty, retries=0))
    assert out.result.status == "error"
    assert "not in the world store" in (out.error_message or "")
    no_sandbox_left(trial_data)


def test_missing_task_dir_is_an_error_outcome(tmp_path, worlds):
    out = run_trial(tmp_path / "nope", config(tmp_path, worlds))
    assert out.result.status == "error" and out.result.reward == 0.0


# --- secrets -------------------------------------------------------------------------------


def test_secrets_in_the_host_environment_never_reach_sandbox_or_logs(
    tmp_path, worlds, task_dirs, monkeypatch
):
    secrets = {
        "OPENAI_API_KEY": "sk-plantedSECRETvalue0123456789abcdef",
        "FMP_API_KEY": "fmp-planted-SECRET-9f8e7d6c5b4a",
        "AWS_SECRET_ACCESS_KEY": "aws/planted+SECRET/0123456789abcdefghijk",
    }
    for k, v in secrets.items():
        monkeypatch.setenv(k, v)
    task = task_named(task_dirs, "steerco-40fc")
    out = run_script(
        task,
        config(tmp_path, worlds),
        commands=["env", "cat /proc/1/environ | tr '\\0' '\\n'", "ls / /root"],
        answer="done",
    )
    assert out.result.status == "complete"
    trial = tmp_path / "trial"
    env_out = json.loads((trial / "agent" / "exec.json").read_text())
    assert env_out[0]["rc"] == 0 and "PATH=" in env_out[0]["out"]
    files = [p for p in trial.rglob("*") if p.is_file()]
    assert len(files) > 5
    for p in files:
        text = p.read_bytes().decode("utf-8", "replace")
        for v in secrets.values():
            assert v not in text, f"secret found in {p.relative_to(trial)}"


def test_oracle_agent_needs_its_task_dir():
    from apexrl.agent.oracle import OracleAgent

    with pytest.raises(ValueError, match="task_dir"):
        OracleAgent(logs_dir=Path("/nonexistent"))


def test_harbor_config_maps_agents_and_environments(tmp_path, worlds, task_dirs):
    task = task_dirs[0]
    cfg = TrialConfig(
        agent="apexrl",
        environment="podman",
        endpoint="http://127.0.0.1:9/v1",
        model="m",
        judge="openai/j",
        judge_api_base="http://127.0.0.1:9/v1",
        logs_dir=tmp_path / "t1",
        worlds_dir=worlds,
    )
    hc = harbor_config(task, cfg)
    assert hc.agent.import_path == "apexrl.agent:ApexAgent"
    assert hc.agent.kwargs["endpoint"] == "http://127.0.0.1:9/v1"
    assert hc.agent.kwargs["budgets"]["max_steps"] == 100
    assert hc.agent.override_timeout_sec == 3600.0
    assert str(getattr(hc.environment.type, "value", hc.environment.type)) == "podman"
    assert hc.environment.delete is False  # the world image is shared by the world's tasks
    assert hc.verifier.import_path == "apexrl.grading.verifier:ApexVerifier"
    assert hc.verifier.kwargs["judge"] == "openai/j"
    assert hc.trials_dir == (tmp_path).resolve() and hc.trial_name == "t1"
    local = harbor_config(task, cfg.model_copy(update={"environment": "local"}))
    assert local.environment.import_path == "apexrl.envs.local:LocalEnvironment"
    assert local.environment.kwargs["worlds_dir"] == str(worlds.resolve())
    modal = harbor_config(task, cfg.model_copy(update={"environment": "modal"}))
    assert modal.environment.import_path == "apexrl.envs.modal:ModalEnvironment"


# --- the judge in a full trial ----------------------------------------------------------------


def test_trial_with_judge_retries_bad_json(tmp_path, worlds, task_dirs):
    from tests.trial.fake_judge import BAD, GOOD_TRUE, fake_judge

    task = task_named(task_dirs, "highest-indication")
    with fake_judge([BAD, GOOD_TRUE, GOOD_TRUE, GOOD_TRUE]) as j:
        cfg = config(tmp_path, worlds, judge="openai/judge-m", judge_api_base=j.url)
        out = run_script(task, cfg, answer="Sterling Rowe Holdings at USD 1213.6 million.")
    r = out.result
    assert (r.status, r.reward, r.criteria_met, r.criteria_total) == ("complete", 1.0, 4, 4)
    judged = [v for v in out.verdicts if v["source"] == "judge"]
    assert len(judged) == 2 and all(v["judge_model"] == "openai/judge-m" for v in judged)
    assert sum(v["attempts"] for v in judged) == 3  # one bad reply retried
    grading = json.loads((tmp_path / "trial" / "verifier" / "grading.json").read_text())
    assert grading["judge_model"] == "openai/judge-m" and grading["judge_prompt_version"]


def test_trial_with_judge_that_never_gives_json(tmp_path, worlds, task_dirs):
    from tests.trial.fake_judge import BAD, fake_judge

    task = task_named(task_dirs, "highest-indication")
    t0 = time.monotonic()
    with fake_judge([BAD]) as j:
        cfg = config(tmp_path, worlds, judge="openai/judge-m", judge_api_base=j.url)
        out = run_script(task, cfg, answer="Sterling Rowe Holdings at USD 1213.6 million.")
    assert (out.result.status, out.result.error_class) == ("no_verifier_result", "judge_bad_json")
    assert out.result.reward == 0.0
    assert time.monotonic() - t0 < 60
