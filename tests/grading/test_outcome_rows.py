"""Trial-level rows of the outcome policy: a max_steps ending is graded under `recipe`;
reward.json's reward follows the reward setting while Pass@k stays pass/fail."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from types import SimpleNamespace as NS

import pytest

from apexrl.eval.metrics import Columns, summarize
from apexrl.grading.grader import grade
from apexrl.trial.config import AgentBudgets, TrialConfig
from apexrl.trial.run import outcome_from


def _hr(meta, rewards):
    return NS(
        exception_info=None,
        agent_result=NS(metadata={"apexrl": meta}, n_input_tokens=10, n_output_tokens=5),
        verifier_result=NS(rewards=rewards),
        environment_setup=None,
        agent_setup=None,
        agent_execution=None,
        verifier=None,
    )


@pytest.mark.parametrize(
    ("policy", "status", "reward"), [("recipe", "complete", 0.5), ("strict", "length", 0.0)]
)
def test_max_steps_is_graded_under_recipe(tmp_path, policy, status, reward):
    logs = tmp_path / "trial"
    (logs / "verifier").mkdir(parents=True)
    (logs / "verifier" / "grading.json").write_text(
        json.dumps({"criteria_met": 1, "criteria_total": 2, "verdicts": []})
    )
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.toml").write_text('[metadata]\ntask_id = "t1"\ndomain = "law"\n')
    cfg = TrialConfig(logs_dir=logs, budgets=AgentBudgets(outcome_policy=policy))
    meta = {"trial_status": "length", "error_class": "max_steps", "steps": 100}
    out = outcome_from(_hr(meta, {"reward": 0.5}), task, cfg, datetime.now(UTC), 1.0)
    r = out.result
    assert (r.status, r.error_class, r.reward) == (status, "max_steps", reward)
    if status == "complete":
        assert (r.criteria_met, r.criteria_total) == (1, 2)
    # a per-turn length cut (not max_steps) is never graded
    meta = {"trial_status": "length", "error_class": "max_tokens_per_turn"}
    out = outcome_from(_hr(meta, {"reward": 0.5}), task, cfg, datetime.now(UTC), 1.0)
    assert out.result.status == "length" and out.result.reward == 0.0


def test_reward_setting_score_or_pass(tmp_path):
    crit = [
        {"verifier_id": "a", "criteria": "has 42", "check": {"kind": "contains", "value": "42"}},
        {"verifier_id": "b", "criteria": "has 7", "check": {"kind": "contains", "value": "7"}},
    ]
    s = asyncio.run(grade(crit, answer="42", fs_root=tmp_path, reward="score"))
    p = asyncio.run(grade(crit, answer="42", fs_root=tmp_path, reward="pass"))
    assert s.reward == 0.5 and p.reward == 0.0 and s.score == p.score == 0.5
    assert s.rewards() == {
        "reward": 0.5,
        "pass": 0.0,
        "score": 0.5,
        "criteria_met": 1.0,
        "criteria_total": 2.0,
    }
    with pytest.raises(ValueError, match="reward must be"):
        asyncio.run(grade(crit, answer="42", fs_root=tmp_path, reward="mean"))
    # Pass@1 counts pass/fail from the criteria, mean score the fraction: whatever the reward
    rows = [
        {"task_id": "t", "attempt": 0, "status": "complete", "reward": 0.5,
         "criteria_met": 1, "criteria_total": 2},
        {"task_id": "u", "attempt": 0, "status": "complete", "reward": 0.0,
         "criteria_met": 1, "criteria_total": 2},
    ]  # fmt: skip
    summ = summarize(Columns.from_rows(rows))
    assert summ.pass_at_1.value == 0.0 and summ.mean_score.value == pytest.approx(0.5)
