"""The acting miniature's wiring in 2 RL steps (issue 40; `make bench-acting` is the full run).

Marker `skyrl` (the jax extra): the tool-use task family, a random tiny Qwen3, the
teacher's trials, a warm start (`apexrl train sft`, merged by `apexrl train export`),
2 GRPO steps of recipes/acting-cpu.toml with real local trials, a held-out eval of the
RL model. Checks: a step trained (the adapter moved), a rollout called a tool (its
trial record shows the call and the tool's result in the stream), and the held-out eval
ran every task to a graded result.
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
        # enough warm start for tool calls to show in the rollouts; 2 RL steps
        sft_set=["sft.epochs=4"],
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
    assert res["teacher"]["pass_at_1"]["value"] == 1.0
    steps = res["rl_steps"]
    assert [s["step"] for s in steps] == [1, 2]
    assert any(s["n_trained"] for s in steps), steps  # a step trained
    # a rollout called a tool through the real loop: the parsed call went to the world's
    # server and its outcome is recorded
    calls = 0
    for f in (tmp_path / "runs" / "rl" / "trials").rglob("apexrl_agent.json"):
        calls += len(json.loads(f.read_text()).get("tool_call_records") or [])
    assert calls >= 1, "no rollout called a tool"
    held = res["rl"]
    assert held["trials"] == held["n_tasks"] == 4 and not held["errors"], held
