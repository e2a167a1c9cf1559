"""Trial fixtures: the example data converted to Harbor task dirs, a world store, and
private work/cache folders for the local environment."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ["HARBOR_TELEMETRY"] = "0"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


# whose servers serve the world: apexrl's own, or archipelago's from a checkout (the
# peer tier: `make peer` builds them; $APEXRL_ARCHIPELAGO names the checkout)
RUNTIMES = [
    pytest.param("apexrl", id="apexrl"),
    pytest.param("archipelago", id="archipelago", marks=pytest.mark.peer),
]


def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def peer_processes(root_pid: int) -> list[int]:
    """Processes under `root_pid` running one of archipelago's servers (a runtime's Python)."""
    out = []
    for pid in descendants(root_pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"main.py" in argv and any(a.endswith(b"/.venv/bin/python") for a in argv):
            out.append(pid)
    return out


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (not zombies)."""
    out = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(pid)
        except OSError:
            pass
    return out


@pytest.fixture(scope="session")
def trial_data(tmp_path_factory) -> Path:
    """<root>/ex (APEX layout), <root>/tasks (Harbor task dirs), local env folders."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    root = tmp_path_factory.mktemp("trialdata")
    write_example(root / "ex")
    outcomes = list(convert_all(load_source(root / "ex"), root / "tasks", {}, strict=True))
    assert all(o.record for o in outcomes)
    os.environ["APEXRL_LOCAL_WORKDIR"] = str(root / "work")
    os.environ["APEXRL_WORLD_CACHE"] = str(root / "cache")
    return root


@pytest.fixture(scope="session")
def worlds(trial_data) -> Path:
    return trial_data / "ex" / "world_files_zipped"


@pytest.fixture(scope="session")
def task_dirs(trial_data) -> list[Path]:
    return sorted(p for p in (trial_data / "tasks").iterdir() if p.is_dir())


def task_named(task_dirs: list[Path], part: str) -> Path:
    return next(p for p in task_dirs if part in p.name)


@pytest.fixture
def task_copy(tmp_path):
    """Copy a task dir so a test can break it."""

    def make(src: Path) -> Path:
        dst = tmp_path / "tasks" / src.name
        shutil.copytree(src, dst)
        return dst

    return make
