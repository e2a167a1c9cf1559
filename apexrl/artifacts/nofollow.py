"""Host-side reads of folders a sandbox could write (logs, answer, uploads, world copy).

Whatever sits there may be a link the agent planted to a host file (`trajectory.json ->
/etc/shadow`). Host code reads it only through these helpers: no link is followed (the
last component is opened with O_NOFOLLOW, walks never descend through a link), only
regular files are read, and what was refused is recorded instead of read.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

REFUSED_FILE = "refused_links.json"


class RefusedPath(OSError):
    """A path that is a link, a device, a fifo or a folder where a file was expected."""


def open_regular(path: Path | str) -> int:
    """A read descriptor of a regular file, opened without following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RefusedPath(errno.ELOOP, "a link (not followed)", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RefusedPath(errno.EINVAL, "not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd


def open_nofollow(path: Path | str) -> IO[bytes]:
    """A regular file opened for reading (binary) without following a link."""
    return os.fdopen(open_regular(path), "rb")


def read_regular(path: Path | str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file; RefusedPath for a link or special file."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read() if max_bytes is None else fh.read(max_bytes)


def read_tail(path: Path | str, n: int) -> bytes:
    with os.fdopen(open_regular(path), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > n:
            fh.seek(size - n)
        return fh.read()


def is_regular(path: Path | str) -> bool:
    """True for a regular file that is not a link (lstat)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def pinned(path: Path | str) -> Iterator[str]:
    """A path (/proc/self/fd/N) to the regular file opened without following links, for
    libraries that take a file name (zip readers): a swap after the check is harmless."""
    fd = open_regular(path)
    try:
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def regular_files(root: Path) -> Iterator[Path]:
    """Every regular file under `root`, in name order, never descending through a link."""
    root = Path(root)
    if not stat.S_ISDIR(_lstat_mode(root)):
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if stat.S_ISDIR(_lstat_mode(Path(dirpath, d))))
        for name in sorted(filenames):
            p = Path(dirpath, name)
            if stat.S_ISREG(_lstat_mode(p)):
                yield p


def _lstat_mode(p: Path) -> int:
    try:
        return os.lstat(p).st_mode
    except OSError:
        return 0


def scrub(root: Path, *, record: bool = True) -> list[dict]:
    """Remove every link and special file under `root` (what a sandbox left there), never
    following one; returns what was removed and, with `record`, writes it to
    `root/refused_links.json` so the run says what it refused."""
    root = Path(root)
    removed: list[dict] = []
    if not stat.S_ISDIR(_lstat_mode(root)):
        return removed
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath, name)
            mode = _lstat_mode(p)
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or mode == 0:
                continue
            entry = {"path": p.relative_to(root).as_posix()}
            if stat.S_ISLNK(mode):
                with contextlib.suppress(OSError):
                    entry["link_to"] = os.readlink(p)
                entry["kind"] = "link"
            else:
                entry["kind"] = "special"
            with contextlib.suppress(OSError):
                p.unlink()
            removed.append(entry)
        dirnames[:] = [d for d in dirnames if stat.S_ISDIR(_lstat_mode(Path(dirpath, d)))]
    if removed and record:
        out = root / REFUSED_FILE
        with contextlib.suppress(OSError):
            if not out.is_symlink():
                out.write_text(json.dumps({"refused": removed}, indent=1) + "\n")
    return removed


def copy_regular(src: Path | str, dst: Path | str) -> None:
    """Copy a regular file (and its mode bits) without following a link at either end."""
    fd = open_regular(src)
    with os.fdopen(fd, "rb") as fin:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        dst = Path(dst)
        if dst.is_symlink():
            dst.unlink()
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(out, mode)
        with os.fdopen(out, "wb") as fout:
            while chunk := fin.read(1 << 20):
                fout.write(chunk)
