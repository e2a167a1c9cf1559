"""The generator through the real trial machinery: oracle trials on the example data,
local (bubblewrap) environment, each trial in its own spawned process."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from apexrl.train.generator import GeneratorSettings, TrialGenerator

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def example_tasks(tmp_path_factory) -> Path:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    root = tmp_path_factory.mktemp("gen-oracle")
    write_example(root / "ex")
    assert all(
        o.record for o in convert_all(load_source(root / "ex"), root / "tasks", {}, strict=True)
    )
    return root


def test_oracle_trials_through_the_generator(example_tasks, monkeypatch):
    root = example_tasks
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(root / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(root / "cache"))
    names = sorted(p.name for p in (root / "tasks").iterdir())[:2]
    gen = TrialGenerator(
        GeneratorSettings(
            tasks_dir=str(root / "tasks"),
            logs_dir=str(root / "logs"),
            agent="oracle",
            worlds_dir=str(root / "ex" / "world_files_zipped"),
            executor="process",
            concurrency=2,
        )
    )
    try:
        out = asyncio.run(
            gen.generate(
                {
                    "prompts": [[{"role": "user", "content": n}] for n in names],
                    "env_extras": [{"task_path": n} for n in names],
                    "trajectory_ids": [f"{n}_0" for n in names],
                    "batch_metadata": {"global_step": 0, "training_phase": "train"},
                }
            )
        )
    finally:
        gen.close()
    assert out["rewards"] == [1.0, 1.0] and out["stop_reasons"] == ["stop", "stop"]
    # the oracle samples no tokens: one placeholder, masked, so it adds no gradient
    assert out["response_ids"] == [[0], [0]] and out["loss_masks"] == [[0], [0]]
    assert out["rollout_metrics"]["apexrl/status/complete"] == 1.0
    for n in names:
        assert (root / "logs" / "train" / "step-0" / f"{n}_0" / "result.json").is_file()
    assert os.environ["APEXRL_LOCAL_WORKDIR"] == str(root / "work")
