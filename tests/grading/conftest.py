"""Grading fixtures: the converted example tasks (shared with the eval tests)."""

import os
from pathlib import Path

import pytest

from tests.eval.conftest import example_dirs, task_dirs  # noqa: F401


@pytest.fixture(scope="session")
def archipelago_checkout() -> str:
    """The archipelago checkout the grader tiers run (`make test` sets APEXRL_ARCHIPELAGO;
    a worktree's ../shared/peers/archipelago otherwise). Its grading runner is built once
    into APEXRL_PEER_DIR (`make peer-grader`: the project's .peer/)."""
    repo = Path(__file__).resolve().parents[2]
    path = os.environ.get("APEXRL_ARCHIPELAGO") or str(repo.parent / "shared/peers/archipelago")
    assert Path(path, "grading", "runner", "main.py").is_file(), (
        f"no archipelago checkout at {path}: set APEXRL_ARCHIPELAGO (make test does)"
    )
    os.environ.setdefault("APEXRL_PEER_DIR", str(repo / ".peer"))
    return path
