"""A memory cgroup per trial: one cap on the RAM that all of a trial's processes hold.

RLIMIT_AS bounds each process and RLIMIT_NPROC their number, so a trial could still hold
`nproc x address space`; a memory cgroup bounds the sum, tmpfs pages the trial writes
included (they are charged to the group that wrote them). When apexrl runs as root:
- cgroup v1 (a `memory` hierarchy mounted, as on hosts with the hybrid layout): a group
  per trial under the group apexrl itself runs in, with `memory.limit_in_bytes` (and
  `memory.memsw.limit_in_bytes` where swap accounting exists);
- cgroup v2: the same under apexrl's own group where the `memory` controller is enabled
  for its children (`cgroup.subtree_control`), with `memory.max` and `memory.swap.max`.
Elsewhere (not root, nothing writable) `group_for` returns None and the per-process
limits hold alone (docs/security.md).

Processes join by writing 0 ("myself") to the group's `cgroup.procs` before they run
anything of the trial: the fork server's child through a descriptor it is handed, a
sandbox started from the host through `join_argv`, which runs bwrap from a shell that
joined first. Everything they start inherits the group, so removing a trial can also
kill what is left of it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from apexrl.envs.local.sandbox import pid_alive

PREFIX = "apexrl-trial-"
_PARENT: tuple[Path, int] | None | bool = False  # False: not looked up yet


@dataclass(frozen=True)
class TrialGroup:
    path: Path
    version: int  # 1 or 2

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def open_procs(self) -> int:
        """A descriptor on cgroup.procs: the fork server's child writes b"0" to join."""
        return os.open(self.procs, os.O_WRONLY | os.O_CLOEXEC)

    def join_argv(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that joined this group first (base environment only)."""
        return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(self.procs), *argv]

    def limit(self) -> int:
        name = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        raw = (self.path / name).read_text().strip()
        return -1 if raw == "max" else int(raw)

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs.read_text().split()]
        except OSError:
            return []

    def oom_kills(self) -> int:
        """How many of the trial's processes the kernel killed at the cap."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def remove(self, wait_s: float = 5.0) -> None:
        """Kill what is left in the group, then remove it (its charges go to the parent)."""
        deadline = time.monotonic() + wait_s
        while True:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left for the next sweep (`sweep_stale`)
                time.sleep(0.02)


def group_for(name: str, limit_bytes: int | None) -> TrialGroup | None:
    """A new group named after the trial folder `name`, capped at `limit_bytes`; None where
    this host gives apexrl no memory cgroup (or no cap is asked for)."""
    if limit_bytes is None or os.geteuid() != 0:
        return None
    found = parent()
    if found is None:
        return None
    base, version = found
    path = base / name  # the trial folder's name: apexrl-trial-<pid>-<random>
    try:
        path.mkdir()
    except FileExistsError:
        pass
    except OSError:
        return None
    group = TrialGroup(path, version)
    try:
        if version == 1:
            (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            memsw = path / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # with swap accounting: RAM + swap at the same cap
                memsw.write_text(str(limit_bytes))
        else:
            (path / "memory.max").write_text(str(limit_bytes))
            swap = path / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
    except OSError:
        group.remove(0)
        return None
    return group


def parent() -> tuple[Path, int] | None:
    """(the memory cgroup apexrl runs in, the cgroup version), if it can hold trial groups."""
    global _PARENT
    if _PARENT is False:
        _PARENT = _find_parent()
        if _PARENT is not None:
            sweep_stale(_PARENT[0])
    return _PARENT  # type: ignore[return-value]


def _find_parent() -> tuple[Path, int] | None:
    mounts = _cgroup_mounts()
    own = _own_groups()
    if "memory" in mounts and "memory" in own:  # v1
        base = mounts["memory"] / own["memory"].lstrip("/")
        return (base, 1) if _writable(base) else None
    if "" in mounts and "" in own:  # v2
        base = mounts[""] / own[""].lstrip("/")
        try:
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            return None
        return (base, 2) if "memory" in enabled and _writable(base) else None
    return None


def _cgroup_mounts() -> dict[str, Path]:
    """controller -> mount point for v1 hierarchies ("" -> the v2 mount)."""
    out: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            pre, _, post = line.partition(" - ")
            fields, rest = pre.split(), post.split()
            if len(fields) < 5 or len(rest) < 3:
                continue
            if rest[0] == "cgroup2":
                out.setdefault("", Path(fields[4]))
            elif rest[0] == "cgroup":
                for opt in rest[2].split(","):
                    if opt == "memory":
                        out.setdefault("memory", Path(fields[4]))
    return out


def _own_groups() -> dict[str, str]:
    """controller -> this process's group path ("" -> its v2 group)."""
    out: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(","):
                out[c] = path
    return out


def _writable(base: Path) -> bool:
    return base.is_dir() and os.access(base, os.W_OK)


def sweep_stale(base: Path) -> int:
    """Remove the trial groups of apexrl processes that are gone (an empty group is
    removed; one that still holds processes is left alone)."""
    n = 0
    with contextlib.suppress(OSError):
        for d in base.iterdir():
            if not d.name.startswith(PREFIX):
                continue
            owner = _owner_pid(d.name)
            if owner is not None and pid_alive(owner):
                continue
            with contextlib.suppress(OSError):
                d.rmdir()
                n += 1
    return n


def _owner_pid(folder: str) -> int | None:
    """The pid in a trial folder's name (`apexrl-local-<pid>-<random>`)."""
    parts = folder.split("-")
    for p in parts:
        if p.isdigit():
            return int(p)
    return None
