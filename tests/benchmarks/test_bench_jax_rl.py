"""The JAX learning curve: recipes/smoke-cpu.toml for 20 steps on the letters task set.

Marker `skyrl` (needs the jax extra): `make bench-jax` (also the last part of `make bench`)
runs it in .venv-train. Measures only: writes bench/results.json key "jax_rl" (mean reward
per step, the curve's start and end as the mean of the first and last 3 steps, wall time
per step split into rollouts and training, the machine's load) and bench/jax_rl_curve.png.
APEXRL_BENCH_JAX_STEPS overrides the step count (>= 20 for the recorded curve).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest

from tests.benchmarks.results import RESULTS, load_average, record

pytestmark = [pytest.mark.skyrl, pytest.mark.timeout(4 * 3600)]

REPO = Path(__file__).resolve().parents[2]
STEPS = int(os.environ.get("APEXRL_BENCH_JAX_STEPS", "20"))


def plot(steps: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [s["step"] for s in steps]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    ax.plot(xs, [s["reward_mean"] for s in steps], marker="o", label="mean reward (16 trials)")
    tasks = sorted({t for s in steps for t in s["rewards_by_task"]})
    for t in tasks:
        pts = [(s["step"], s["rewards_by_task"][t]) for s in steps if t in s["rewards_by_task"]]
        ax.plot(*zip(*pts, strict=True), alpha=0.35, linewidth=1, label=t.split("-")[1])
    ax.set_xlabel("step (one LoRA update)")
    ax.set_ylabel("reward")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("smoke-cpu: GRPO on the letters set, SkyRL JAX backend on CPU")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def test_bench_jax_learning_curve(tmp_path, monkeypatch):
    from apexrl.train.jaxrl.grpo import run_jax
    from apexrl.train.recipe import load_recipe

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(tmp_path / "cache"))
    sets = [
        f'checkpoint.path="{tmp_path}/run/ckpts"',
        f"training.max_steps={STEPS}",
        "checkpoint.interval=5",
    ]
    loaded = load_recipe(REPO / "recipes" / "smoke-cpu.toml", sets)
    load0 = load_average()
    t0 = time.monotonic()
    lines: list[str] = []
    run_jax(loaded, say=lambda m: (lines.append(m), print(m, flush=True)))
    wall = time.monotonic() - t0
    steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == STEPS
    rewards = [s["reward_mean"] for s in steps]
    k = min(3, len(steps))
    png = RESULTS.parent / "jax_rl_curve.png"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    plot(steps, png)
    record(
        "jax_rl",
        {
            "command": "make bench-jax",
            "recipe": "recipes/smoke-cpu.toml",
            "overrides": sets[1:],
            "task_set": "letters (4 tasks x 4 samples per step, deterministic contains checks)",
            "steps": STEPS,
            "reward_mean_per_step": [round(r, 4) for r in rewards],
            "curve_start_mean_first_3": round(statistics.mean(rewards[:k]), 4),
            "curve_end_mean_last_3": round(statistics.mean(rewards[-k:]), 4),
            "wall_s": round(wall, 1),
            "step_s_median": round(statistics.median(s["step_s"] for s in steps), 1),
            "rollout_s_median": round(statistics.median(s["rollout_s"] for s in steps), 1),
            "train_s_median": round(statistics.median(s["train_s"] for s in steps), 1),
            "trained_trajectories_per_step": [s["n_trained"] for s in steps],
            "engine_trainer_max_abs_diff_max": max(
                (s["engine_trainer_max_abs_diff"] or 0.0) for s in steps
            ),
            "plot": str(png.relative_to(REPO)),
        },
        load_at_start=load0,
    )
    assert png.is_file()
