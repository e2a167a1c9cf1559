"""Each row of the `recipe` outcome policy through the generator, and its group rule."""

from __future__ import annotations

import asyncio
import json

import pytest

from apexrl.agent.outcomes import OUTCOME_POLICIES, group_masked, outcome_policy
from apexrl.trial.config import AgentBudgets, TrialConfig
from tests.train.fake_trials import L1, L2, OBS, S1, S2
from tests.train.test_generator import generator, make_tasks

RESPONSE = S1 + OBS + S2
MASK = [1] * len(S1) + [0] * len(OBS) + [1] * len(S2)
LOGPROBS = L1 + [0.0] * len(OBS) + L2


def _batch(items: list[tuple[str, str]], phase: str = "train") -> dict:
    """items: (task, instance id) per trajectory."""
    return {
        "prompts": [[{"role": "user", "content": t}] for t, _ in items],
        "env_extras": [{"task_path": t} for t, _ in items],
        "trajectory_ids": [
            {"instance_id": g, "repetition_id": i} for i, (_, g) in enumerate(items)
        ],
        "batch_metadata": {"global_step": 1, "training_phase": phase},
    }


ROWS = {  # status -> (reward kept, trained on, stop reason) under recipe
    "complete": (True, True, "stop"),
    "length": (False, True, "length"),
    "context_length": (False, True, "context_length"),
    "agent_timeout": (False, False, "agent_timeout"),
    "error": (False, False, "error"),
    "no_verifier_result": (False, False, "no_verifier_result"),
}


@pytest.mark.parametrize("status", list(ROWS))
def test_recipe_row(tmp_path, status):
    tasks = make_tasks(tmp_path, {"t": {"status": status, "reward": 0.6}})
    gen = generator(tmp_path, tasks)  # budgets default: outcome_policy "recipe"
    out = asyncio.run(gen.generate(_batch([("t", "solo")])))
    keep_reward, trained, stop = ROWS[status]
    assert out["rewards"] == [0.6 if keep_reward else 0.0]
    assert out["stop_reasons"] == [stop]
    assert out["loss_masks"] == [MASK if trained else [0] * len(RESPONSE)]
    assert out["response_ids"] == [RESPONSE] and out["rollout_logprobs"] == [LOGPROBS]


def test_recipe_group_rule(tmp_path):
    tasks = make_tasks(
        tmp_path,
        {
            "ok1": {"status": "complete", "reward": 1.0},
            "ok2": {"status": "complete", "reward": 0.5},
            "to": {"status": "agent_timeout", "reward": 0.9},
            "err": {"status": "error", "error_class": "sandbox_died"},
            "nover": {"status": "no_verifier_result"},
        },
    )
    gen = generator(tmp_path, tasks)
    items = [
        ("ok1", "g1"), ("ok2", "g1"), ("to", "g1"),  # one timeout: only it is masked
        ("ok1", "g2"), ("to", "g2"), ("to", "g2"),  # two timeouts: the group is masked
        ("ok1", "g3"), ("ok2", "g3"), ("err", "g3"),  # an error: the group is masked
        ("ok2", "g4"), ("nover", "g4"),  # no verifier result counts as an error
    ]  # fmt: skip
    out = asyncio.run(gen.generate(_batch(items)))
    trained = [any(m) for m in out["loss_masks"]]
    assert trained == [True, True, False] + [False] * 3 + [False] * 3 + [False] * 2
    assert out["rewards"][:3] == [1.0, 0.5, 0.0] and not any(out["rewards"][3:])
    assert out["rollout_metrics"]["apexrl/group_masked_frac"] == pytest.approx(8 / 11)
    # the same batch under strict: no group rule, timeouts trained
    from apexrl.trial.config import AgentBudgets

    strict = generator(tmp_path / "s", tasks, budgets=AgentBudgets(outcome_policy="strict"))
    out = asyncio.run(strict.generate(_batch(items)))
    assert [any(m) for m in out["loss_masks"]] == [s not in ("err", "nover") for s, _ in items]


def test_policy_table_and_group_rule_units():
    p = outcome_policy("recipe")
    assert p.grade_at_max_steps and p.repairs_then_final and p.repairs_per_trajectory
    assert not outcome_policy("strict").grade_at_max_steps
    assert group_masked(p, ["complete", "agent_timeout", "agent_timeout"])
    assert not group_masked(p, ["complete", "agent_timeout"])
    assert group_masked(p, ["complete", "error"])
    assert not group_masked(OUTCOME_POLICIES["strict"], ["error", "agent_timeout"] * 2)
    with pytest.raises(ValueError, match="unknown outcome policy"):
        outcome_policy("lenient")


def test_trial_configs_carry_reward_nudge_and_eval_defaults(tmp_path):
    tasks = make_tasks(tmp_path, {"t": {"status": "complete", "reward": 1.0}})
    gen = generator(tmp_path, tasks, judge="openai/j", judge_api_base="http://127.0.0.1:1/v1")
    asyncio.run(gen.generate(_batch([("t", "a")], phase="train")))
    asyncio.run(gen.generate(_batch([("t", "a")], phase="eval")))
    cfgs = {
        p.parent.parent.parent.name: TrialConfig.model_validate(json.loads(p.read_text()))
        for p in (tmp_path / "logs").rglob("config.json")
    }
    train, ev = cfgs["train"], cfgs["eval"]
    assert train.reward == ev.reward == "score"  # the recipe trains on the fraction met
    assert train.budgets.nudge == "recipe" and train.budgets.max_steps == 100
    assert ev.budgets.nudge == "off" and ev.budgets.max_steps == 250  # the recipe's eval
    assert train.budgets.outcome_policy == "recipe"
    assert train.judge == "openai/j" and train.judge_api_base == "http://127.0.0.1:1/v1"
    assert AgentBudgets().nudge == "recipe"
