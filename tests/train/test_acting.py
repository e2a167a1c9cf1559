"""The acting miniature's wiring in 2 RL steps (issue 40; `make bench-acting` is the full run).

Marker `skyrl` (the jax extra): the tool-use task family, a random tiny Qwen3, the
teacher's trials, a warm start (`apexrl train sft`, merged by `apexrl train export`),
2 GRPO steps of recipes/acting-cpu.toml with real local trials, a held-out eval of the
RL model. Checks what holds whatever the policy learned: the teacher's trials called
tools through the agent loop and passed; the warm start lowered its loss; both RL steps
sampled every trial from the served version with the world's tools offered; the
held-out eval graded every task with no infrastructure error. Not asserted: a trained
RL step and a tool call in a rollout. The measured warm start (docs/training.md "The
acting miniature") does not yet write a parsed tool call, so every group's reward is 0
and nothing trains; asserting them here would fail on every run until it does.
"""

from __future__ import annotations

import json

import pytest

from tests.acting_pipeline import Plan, run_pipeline

pytestmark = [pytest.mark.skyrl, pytest.mark.timeout(3600)]


def test_acting_two_steps(tmp_path):
    plan = Plan(
        root=tmp_path,
        train_worlds=4,
        held_worlds=2,
        teacher_tasks=8,
        sft_set=["sft.max_steps=4"],
        rl_set=[
            "training.max_steps=2",
            "batch.train_batch_size=2",
            "batch.mini_batch_size=2",
            "batch.n_samples=4",
            "checkpoint.interval=1",
        ],
        stages=("rl",),
        vllm=False,
    )
    res = run_pipeline(plan)
    teacher = res["teacher"]
    assert teacher["pass_at_1"]["value"] == 1.0 and teacher["share_with_tool_call"] == 1.0
    sft = [json.loads(x) for x in (tmp_path / "runs" / "sft" / "metrics.jsonl").open()]
    assert sft[-1]["loss"] < sft[0]["loss"], sft
    steps = res["rl_steps"]
    assert [s["step"] for s in steps] == [1, 2]
    rows = [
        json.loads(x)
        for f in sorted((tmp_path / "runs" / "rl" / "rollouts").glob("step-*.jsonl"))
        for x in f.open()
    ]
    assert len(rows) == 16
    for row in rows:
        assert row["sampled_by"] == row["served_model"], row
        tito = tmp_path / "runs" / "rl" / "trials" / "train" / f"step-{row['step']}"
        record = json.loads((tito / row["trajectory_id"] / "agent" / "tito.json").read_text())
        names = {t["function"]["name"] for t in record["tools"]}
        assert names == set(plan.tools)  # the allowlist, in every rollout
    held = res["rl"]
    assert held["trials"] == held["n_tasks"] == 4, held
    model_outcomes = {"max_tokens_per_turn", "max_steps", "unparsed_tool_call"}
    assert set(held["errors"]) <= model_outcomes, held
