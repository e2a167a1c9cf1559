"""Eval fixtures: the example task dirs and scripted trial functions."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from apexrl.artifacts.models import TrialResult
from apexrl.trial.config import TrialConfig, TrialOutcome


@pytest.fixture(scope="session")
def example_dirs(tmp_path_factory) -> tuple[Path, Path]:
    """(expert data root, folder of converted task dirs) of `apexrl tasks example`."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    root = tmp_path_factory.mktemp("example")
    write_example(root / "expert", seed=0)
    list(convert_all(load_source(root / "expert"), root / "tasks", {}, strict=True))
    return root / "expert", root / "tasks"


@pytest.fixture
def task_dirs(example_dirs, tmp_path) -> Path:
    """A private copy of the example task dirs (14 tasks, 3 domains)."""
    dst = tmp_path / "tasks"
    shutil.copytree(example_dirs[1], dst)
    return dst


def _meta(task_dir: Path) -> dict:
    import tomllib

    return tomllib.loads((task_dir / "task.toml").read_text())["metadata"]


def scripted_trial(task_dir: Path, config: TrialConfig) -> TrialOutcome:
    """Deterministic outcome from (task, attempt): passes, partial scores, errors.

    Writes an ATIF-shaped trajectory and a tokens file into the trial's logs_dir."""
    meta = _meta(task_dir)
    h = int(hashlib.sha256(f"{task_dir.name}/{config.attempt}".encode()).hexdigest(), 16)
    total = int(meta.get("n_criteria") or 2)
    kind = h % 5
    status, err, met = "complete", None, total
    if kind == 1:
        met = total - 1
    elif kind == 2:
        status, err, met = "error", "llm_transient", 0
    traj = config.logs_dir / "trajectory.json"
    traj.write_bytes(
        orjson.dumps(
            {"schema_version": "ATIF-v1.2", "steps": [{"source": "user"}], "pid": os.getpid()}
        )
    )
    toks = config.logs_dir / "tokens.jsonl"
    toks.write_bytes(orjson.dumps({"ids": [1, 2, 3], "mask": [0, 1, 1]}) + b"\n")
    result = TrialResult(
        task_id=meta["task_id"],
        domain=meta["domain"],
        world_id=meta["world_id"],
        attempt=config.attempt,
        status=status,
        error_class=err,
        reward=met / total if status == "complete" else 0.0,
        criteria_met=met,
        criteria_total=total,
        turns=3,
        tokens_in=100,
        tokens_out=20,
        tool_calls=2,
        tool_call_success_rate=1.0,
    )
    return TrialOutcome(result=result, trajectory_path=traj, tokens_path=toks)


def passing_trial(task_dir: Path, config: TrialConfig) -> TrialOutcome:
    meta = _meta(task_dir)
    n = int(meta.get("n_criteria") or 1)
    return TrialOutcome(
        result=TrialResult(
            task_id=meta["task_id"],
            domain=meta["domain"],
            world_id=meta["world_id"],
            attempt=config.attempt,
            reward=1.0,
            criteria_met=n,
            criteria_total=n,
        )
    )


@pytest.fixture(autouse=True)
def _no_litellm_network(monkeypatch):
    """LiteLLM (imported by grading) fetches a price map from the network at import."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from apexrl.engine.tiny import make_tiny_checkpoint

    return make_tiny_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "tiny-qwen3", max_position_embeddings=32768
    )


def eval_runner(trial_fn) -> CliRunner:
    """A CliRunner whose `apexrl eval run` runs `trial_fn` (apexrl.cli.eval.EvalDeps)."""
    from apexrl.cli.eval import EvalDeps

    class Runner(CliRunner):
        def invoke(self, *args, **kwargs):
            kwargs.setdefault("obj", EvalDeps(trial_fn=trial_fn))
            return super().invoke(*args, **kwargs)

    return Runner()
