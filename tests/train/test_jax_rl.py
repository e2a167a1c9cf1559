"""Real RL steps on CPU: `apexrl train recipes/smoke-cpu.toml` (SkyRL 0.4.0's JAX backend).

Marker `skyrl`: `make test-train` runs it in .venv-train with the jax extra (`make jax-env`).
Two steps end to end on the letters task set (real local trials: bubblewrap sandbox,
apexrl's agent over TITO against the local CPU engine, apexrl's grader), then checks:
the adapter's weights changed; the engine served each new version (asked under the new
version's name, its logprobs equal the trainer's within 1e-4); every trial record carries
the version it was sampled with; the summed logprobs of positive-advantage trajectories
rose over the step and those of negative-advantage ones fell.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skyrl, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]


def test_smoke_cpu_two_steps_end_to_end(tmp_path, monkeypatch):
    from apexrl.engine.lora import read_lora_deltas
    from apexrl.train.jaxrl.grpo import run_jax
    from apexrl.train.recipe import load_recipe

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(tmp_path / "cache"))
    loaded = load_recipe(
        REPO / "recipes" / "smoke-cpu.toml",
        [f'checkpoint.path="{tmp_path}/run/ckpts"', "training.max_steps=2"],
    )
    lines: list[str] = []
    summary = run_jax(loaded, say=lines.append)
    run = tmp_path / "run"
    assert summary["steps"] == [1, 2], lines
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    trained = [s for s in steps if s["n_trained"]]
    assert trained, f"no step had reward variance: {steps}"

    # the adapter's weights changed (LoRA B starts at zero: any delta is a change)
    ck = run / "ckpts" / "global_step_2" / "adapter.tar.gz"
    deltas = read_lora_deltas(ck)
    assert deltas and max(float(d.abs().max()) for d in deltas.values()) > 0
    if len(trained) == 2:
        first = read_lora_deltas(run / "ckpts" / "global_step_1" / "adapter.tar.gz")
        moved = max(float((deltas[k] - first[k]).abs().max()) for k in deltas)
        assert moved > 0, "the second step did not change the weights"

    for s in trained:
        # the engine served the new version: asked by that name, its logprobs are the trainer's
        assert s["engine_trainer_max_abs_diff"] is not None
        assert s["engine_trainer_max_abs_diff"] < 1e-4, s
        assert s["new_version"] == s["weight_version"] + 1
        # positive-advantage trajectories became likelier, negative ones less likely
        assert s["logprob_shift_pos"] > 0, s
        assert s["logprob_shift_neg"] < 0, s

    # every trial record carries the version it was sampled with
    n_records = 0
    for s in steps:
        rows = [
            json.loads(x)
            for x in (run / "rollouts" / f"step-{s['step']}.jsonl").read_text().splitlines()
        ]
        assert len(rows) == s["n_trajectories"] == 16
        for row in rows:
            want = f"smoke-cpu@v{s['weight_version']}"
            assert row["served_model"] == want
            tito = run / "trials" / "train" / f"step-{s['step']}" / row["trajectory_id"]
            record = json.loads((tito / "agent" / "tito.json").read_text())
            assert record["model"] == want, (row["trajectory_id"], record["model"])
            assert row["sampled_by"] == want
            n_records += 1
    assert n_records == 32
    assert steps[1]["weight_version"] == steps[0]["new_version"]

    # checkpoints + manifest like the GPU path; the latest step named as SkyRL names it
    assert (run / "ckpts" / "latest_ckpt_global_step.txt").read_text().strip() == "2"
    manifest = json.loads((run / "ckpts" / "apexrl_manifest.json").read_text())
    assert manifest["run_name"] == "smoke-cpu" and manifest["recipe_sha256"] == loaded.sha256
    assert (run / "ckpts" / "global_step_2" / "trainer").is_dir()
