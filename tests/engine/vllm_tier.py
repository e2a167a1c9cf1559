"""Starting the engines of the contract suite: the local CPU engine, and a real vLLM
(the CPU build that `make vllm` installs in .venv-vllm) through apexrl's own launcher."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from apexrl.engine.serve import RunningEngine, start_engine

WINDOW = 4096  # the served window: > vLLM CPU's default batch (2,048), small prompts
REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 900.0  # vLLM CPU takes minutes to start on a busy 2-core machine


def vllm_python() -> str:
    """APEXRL_VLLM_PYTHON, else the repository's .venv-vllm (built by `make vllm`)."""
    py = os.environ.get("APEXRL_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
    if not os.access(py, os.X_OK):
        pytest.fail(f"no vLLM interpreter at {py}: run `make vllm` (or set APEXRL_VLLM_PYTHON)")
    return py


def tiny_checkpoint(tmp: Path) -> Path:
    from apexrl.engine.tiny import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp / "tiny", seed=0)  # make-tiny's defaults


def local_engine(tmp: Path) -> RunningEngine:
    return start_engine(
        str(tiny_checkpoint(tmp)), engine="local", served_model_name="tiny", max_model_len=WINDOW
    )


def vllm_engine(tmp: Path) -> RunningEngine:
    log = tmp / "vllm.log"
    try:
        return start_engine(
            str(tiny_checkpoint(tmp)),
            engine="vllm",
            vllm_python=vllm_python(),
            served_model_name="tiny",
            max_model_len=WINDOW,
            log_path=log,
            ready_timeout_s=READY_TIMEOUT_S,
        )
    except Exception:
        tail = log.read_text(errors="replace")[-4000:] if log.is_file() else "(no log)"
        print(f"--- vLLM log tail ({log}) ---\n{tail}")
        raise
