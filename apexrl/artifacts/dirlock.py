"""`dir_lock`: writers of one destination folder take turns (two unpacks into the same folder)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def dir_lock(folder: Path, *, what: str = "writer") -> Iterator[None]:
    """An exclusive lock on `folder` (a `.apexrl/lock` file inside): concurrent writers of
    one destination take turns instead of interleaving."""
    import fcntl

    lock_dir = Path(folder) / ".apexrl"
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
