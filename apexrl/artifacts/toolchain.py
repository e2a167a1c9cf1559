"""What builds archipelago's uv projects (its MCP servers and other projects:
apexrl.peer.runtime; its grading runner: apexrl.artifacts.archipelago_runner): a Python
3.13, uv, the folder builds go to, a synced copy of a project, and the `.built` record
that says a build is whole (one build at a time under a lock)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from apexrl.artifacts.dirlock import file_lock
from apexrl.errors import ApexError, ExitCode, UsageError

PEER_DIR_ENV = "APEXRL_PEER_DIR"
BUILD_TIMEOUT_S = 900
BUILT = ".built"  # written last into a build's folder: the build is whole


def peer_dir() -> Path:
    """Where builds go: $APEXRL_PEER_DIR, else ~/.cache/apexrl/peer."""
    raw = os.environ.get(PEER_DIR_ENV)
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "apexrl" / "peer"


def find_python313(env: str, needed_by: str) -> str:
    """A Python 3.13: $ENV, pyenv's 3.13.* (newest first), else python3.13 on PATH."""
    cands = [os.environ.get(env, "")]
    pyenv = Path.home() / ".pyenv" / "versions"
    if pyenv.is_dir():
        cands += [str(p / "bin" / "python") for p in sorted(pyenv.glob("3.13*"), reverse=True)]
    cands += [shutil.which("python3.13") or ""]
    for c in cands:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise UsageError(
        f"{needed_by} needs Python 3.13, and none was found",
        hint=f"install one (pyenv install 3.13, or Debian's python3.13) or set {env}",
    )


def find_uv(needed_by: str) -> str:
    """uv beside this Python, else on PATH, else the one the `uv` package ships."""
    here = Path(sys.executable).with_name("uv")
    if here.is_file():
        return str(here)
    if shutil.which("uv"):
        return str(shutil.which("uv"))
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        raise UsageError(
            f"{needed_by} needs uv, and it is not installed",
            hint="pip install uv (apexrl's dev extra has it)",
        ) from None


def run_build(argv: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> None:
    """One build step; ApexError (exit code REMOTE: it fetches packages) with the end of
    its output when it fails or runs past BUILD_TIMEOUT_S."""
    try:
        r = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ApexError(
            f"{what}: did not finish in {BUILD_TIMEOUT_S} s", code=ExitCode.REMOTE
        ) from None
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-8:]
        raise ApexError(
            f"{what} failed (exit {r.returncode}):\n  " + "\n  ".join(tail),
            hint="check the network to PyPI and the checkout's uv.lock",
            code=ExitCode.REMOTE,
        )


def uv_sync(
    project: Path, *, python: str, uv: str, what: str, sync_args: tuple[str, ...] = ("--no-dev",)
) -> None:
    """`uv sync --frozen` of the uv project in PROJECT into PROJECT/.venv with PYTHON
    (whatever venv runs apexrl left out of it)."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(project / ".venv")
    env.setdefault("UV_LINK_MODE", "hardlink")
    argv = [uv, "sync", "--frozen", *sync_args, "--quiet", "--python", python]
    run_build(argv, project, what, env)


def synced_copy(
    src: Path,
    dest: Path,
    *,
    skip: Iterable[str],
    python: str,
    uv: str,
    what: str,
    sync_args: tuple[str, ...] = ("--no-dev",),
) -> None:
    """DEST as a fresh copy of the uv project SRC (less the names in `skip`; what a build
    that stopped half way left there removed first), synced (uv_sync)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(*skip))
    uv_sync(dest, python=python, uv=uv, what=what, sync_args=sync_args)


def is_built(folder: Path) -> bool:
    return (folder / BUILT).is_file()


def mark_built(folder: Path, record: dict[str, Any]) -> None:
    (folder / BUILT).write_text(json.dumps(record) + "\n")


def build_once(
    dest: Path,
    lock: Path,
    build: Callable[[], dict[str, Any]],
    *,
    refuse: UsageError | None = None,
) -> Path:
    """DEST, built by `build` (which returns the record `.built` keeps) unless it is built
    already; under LOCK, so two processes never build it at once. `refuse`: raised
    instead of building (a caller that may only use what is built)."""
    if is_built(dest):
        return dest
    if refuse is not None:
        raise refuse
    with file_lock(lock):
        if not is_built(dest):  # or another process built it meanwhile
            mark_built(dest, build())
    return dest
