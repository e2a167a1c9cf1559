"""Where the local environment's trial folders go: RAM (a tmpfs) or disk.

A trial folder is scratch: the private world copy, the sandbox's /tmp and /root,
/tests and /solution, created when the trial starts and removed when it stops. At
hundreds of trials a minute that is thousands of files made and deleted a minute.
On ext4 without a journal (common for a VM's scratch disk; this project's CI machine)
each new inode is found by skipping every inode deleted in the last 30-60 s, so the
kernel's cost per file grows with the churn rate: measured at concurrency 8, 23% of
all CPU went to that scan and trials at 8 ran only 1.3-1.6x faster than at 1. A
tmpfs has no such cost, and a trial's scratch is small next to a host's memory.

    $APEXRL_LOCAL_WORKDIR   a folder: used as it is (the caller's choice wins)
    $APEXRL_LOCAL_SCRATCH   auto (default): RAM when /dev/shm is a writable tmpfs with
                            at least $APEXRL_LOCAL_RAM_MIN_FREE bytes available
                            (default 4 GiB; a container's 64 MiB /dev/shm is not)
                            and /dev/shm/apexrl-local is absent or this user's own,
                            else disk (with a warning when that folder is another's)
                            ram: /dev/shm/apexrl-local, an error when unusable
                            disk: <tmp>/apexrl-local (the behaviour before this choice)
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CHOICES = ("auto", "ram", "disk")
RAM_ROOT = Path("/dev/shm")
FOLDER = "apexrl-local"
DEFAULT_RAM_MIN_FREE = 4 << 30


class ScratchError(ValueError):
    """The scratch setting cannot be honoured (a bad value, or `ram` with no tmpfs)."""


@dataclass(frozen=True)
class Scratch:
    path: Path
    kind: str  # "ram", "disk" or "set" ($APEXRL_LOCAL_WORKDIR)
    why: str


def _mount_at(path: Path) -> tuple[str, set[str]] | None:
    """(type, options) of the file system mounted at exactly `path` (/proc/self/mounts)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    found = None
    for line in lines:  # the last mount at a point is the one in effect
        parts = line.split()
        if len(parts) >= 4 and parts[1] == str(path):
            found = (parts[2], set(parts[3].split(",")))
    return found


def ram_min_free(env: Mapping[str, str] | None = None) -> int:
    raw = (os.environ if env is None else env).get("APEXRL_LOCAL_RAM_MIN_FREE", "").strip()
    if not raw:
        return DEFAULT_RAM_MIN_FREE
    try:
        value = int(raw)
    except ValueError:
        raise ScratchError(
            f"APEXRL_LOCAL_RAM_MIN_FREE={raw!r} is not a whole number of bytes"
        ) from None
    if value < 0:
        raise ScratchError(f"APEXRL_LOCAL_RAM_MIN_FREE={raw!r} must be 0 or more")
    return value


def ram_unusable(root: Path = RAM_ROOT, min_free: int | None = None) -> str | None:
    """Why `root` cannot hold trial folders, or None when it can."""
    need = ram_min_free() if min_free is None else min_free
    mount = _mount_at(root)
    if mount is None or mount[0] != "tmpfs":
        return f"{root} is not a tmpfs"
    if "noexec" in mount[1]:  # bind mounts keep it: scripts in /world or /tmp could not run
        return f"{root} is mounted noexec"
    if not os.access(root, os.W_OK | os.X_OK):
        return f"{root} is not writable"
    st = os.statvfs(root)
    free = st.f_bavail * st.f_frsize
    if free < need:
        return f"{root} has {free >> 20} MiB available, under the {need >> 20} MiB asked"
    return None


def not_own(path: Path) -> str | None:
    """Why an existing `path` is not this user's own folder (None: it is, or is absent)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return (
            f"{path} is not a folder of this user's that only it can write "
            f"(mode {stat.filemode(st.st_mode)}, uid {st.st_uid})"
        )
    return None


def own_folder(path: Path) -> Path:
    """Make `path` (apexrl's default folder in a shared, sticky parent such as /dev/shm
    or /tmp) and check that it is this user's own: a folder, not a link, owned by this
    uid, writable by nobody else. Another local user who made it first could otherwise
    read or swap trial folders."""
    with contextlib.suppress(FileExistsError):  # a link or a file: named below
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
    why = not_own(path)
    if why is not None:
        raise ScratchError(f"{why}; remove it, or set APEXRL_LOCAL_WORKDIR=DIR")
    return path


def choose(env: Mapping[str, str] | None = None) -> Scratch:
    """The folder trial folders go to, and why (shown by `apexrl doctor`)."""
    env = os.environ if env is None else env
    if env.get("APEXRL_LOCAL_WORKDIR"):
        return Scratch(Path(env["APEXRL_LOCAL_WORKDIR"]), "set", "APEXRL_LOCAL_WORKDIR")
    choice = env.get("APEXRL_LOCAL_SCRATCH", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ScratchError(f"APEXRL_LOCAL_SCRATCH={choice!r}: use one of {', '.join(CHOICES)}")
    disk = Path(tempfile.gettempdir()) / FOLDER
    if choice == "disk":
        return Scratch(disk, "disk", "APEXRL_LOCAL_SCRATCH=disk")
    why_not = ram_unusable(min_free=ram_min_free(env))
    if why_not is None and choice == "auto":
        # another local user who made /dev/shm/apexrl-local first sends `auto` to disk
        # (with a warning: `warning()`), instead of blocking every run
        why_not = not_own(RAM_ROOT / FOLDER)
    if why_not is None:
        return Scratch(RAM_ROOT / FOLDER, "ram", f"{RAM_ROOT} is a tmpfs with room")
    if choice == "ram":
        raise ScratchError(
            f"APEXRL_LOCAL_SCRATCH=ram but {why_not}; set APEXRL_LOCAL_SCRATCH=disk "
            "or APEXRL_LOCAL_WORKDIR=DIR"
        )
    return Scratch(disk, "disk", why_not)


def warning(chosen: Scratch) -> str | None:
    """What to tell the user about `chosen`: RAM was wanted but is taken by someone else."""
    if chosen.kind == "disk" and chosen.why.startswith(str(RAM_ROOT / FOLDER)):
        return f"trial folders go to disk ({chosen.path}): {chosen.why}"
    return None
