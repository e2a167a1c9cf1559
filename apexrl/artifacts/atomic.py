"""Atomic file and directory writes: temp + rename, so a failed command never
leaves a half-written artifact that looks complete."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


def current_umask() -> int:
    """The process umask, read without changing it (os.umask would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # no /proc: the classic read (briefly changes it)
    os.umask(old)
    return old


def public_mode(path: Path | str, *, is_dir: bool) -> None:
    """Give a temp file or folder (mkstemp/mkdtemp make them 0600/0700) the mode a plain
    open()/mkdir() would have had under the umask: outputs are for teammates too."""
    os.chmod(path, (0o777 if is_dir else 0o666) & ~current_umask())


@contextlib.contextmanager
def atomic_path(target: Path, *, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside `target`; rename it over `target` on success."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    public_mode(tmp, is_dir=False)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        tmp_path.unlink(missing_ok=True)


def write_bytes_atomic(target: Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(target: Path, text: str) -> None:
    write_bytes_atomic(target, text.encode("utf-8"))


MARKER = ".apexrl-output"  # in every folder atomic_dir writes: apexrl may replace it


def check_replaceable(
    target: Path, *, force: bool = False, inputs: Iterable[Path | str] = ()
) -> None:
    """Refuse to replace `target` when that would delete an input, or when it is a
    non-empty folder apexrl did not write (unless `force`)."""
    from apexrl.errors import UsageError

    target = Path(target)
    t = target.resolve()
    for i in inputs:
        if str(i).startswith("hf://"):
            continue
        ir = Path(i).resolve()
        if ir == t or ir.is_relative_to(t):
            raise UsageError(
                f"-o {target} would replace the input {i}",
                hint="write the output to another folder",
            )
    if force or not target.exists():
        return
    if not target.is_dir():
        raise UsageError(f"-o {target} exists and is not a folder", hint="choose another path")
    if (target / MARKER).is_file():
        return
    if any(target.iterdir()):
        raise UsageError(
            f"-o {target} is not empty and was not written by apexrl",
            hint="choose a new folder, or pass --force to replace its content",
        )


@contextlib.contextmanager
def atomic_dir(
    target: Path,
    *,
    force: bool = False,
    inputs: Iterable[Path | str] = (),
    marker: bool = True,
) -> Iterator[Path]:
    """Yield a fresh temp directory beside `target`; on success it replaces
    `target` (an existing one is swapped out, then removed). A non-empty `target`
    apexrl did not write, or one holding an input, is refused (see check_replaceable)."""
    target = Path(target)
    check_replaceable(target, force=force, inputs=inputs)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    public_mode(tmp, is_dir=True)
    try:
        if marker:
            (tmp / MARKER).write_text("written by apexrl; apexrl may replace this folder\n")
        yield tmp
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old-{os.getpid()}")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
