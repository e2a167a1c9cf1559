"""Locks: `dir_lock`, writers of one destination folder take turns (two unpacks into the same
folder); `file_lock`, holders of one lock file take turns (two builds of one runtime)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the file PATH (created with its folder, never through a link):
    its holders take turns."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def dir_lock(folder: Path, *, what: str = "writer") -> Iterator[None]:
    """An exclusive lock on `folder` (a `.apexrl/lock` file inside): concurrent writers of
    one destination take turns instead of interleaving."""
    with file_lock(Path(folder) / ".apexrl" / "lock"):
        yield
