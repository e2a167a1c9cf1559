"""Deterministic gzip tars of task directories (the `task_binary` column).

The same tree always gives the same bytes: entries sorted, uid/gid 0, no
owner names, mtime 0, modes normalised to 0755/0644, gzip header with mtime 0
and no file name, compression level pinned.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from apexrl.artifacts.archive import GZIP_LEVEL, gzip_bytes, tar_header, walk_sorted
from apexrl.errors import BadRecordError

__all__ = ["GZIP_LEVEL", "gzip_bytes", "pack_task_dir", "tar_task_dir"]


def tar_task_dir(task_dir: Path) -> bytes:
    """Return the uncompressed, deterministic tar of `task_dir` (members relative to it).

    Headers come from apexrl.artifacts.archive (ustar + PAX for long names); files
    are read whole here, which is what keeps packing near `tar czf`'s speed."""
    parts: list[bytes] = []
    for rel, full, is_dir in walk_sorted(task_dir):
        if is_dir:
            parts.append(tar_header(rel + "/", 0, 0o755, "dir"))
            continue
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            mode = 0o755 if os.fstat(fd).st_mode & 0o111 else 0o644
            data = fh.read()
        parts.append(tar_header(rel, len(data), mode, "file"))
        parts.append(data)
        if len(data) % 512:
            parts.append(b"\0" * (512 - len(data) % 512))
    parts.append(b"\0" * 1024)  # end-of-archive marker
    return b"".join(parts)


def pack_task_dir(task_dir: Path) -> tuple[bytes, str]:
    """The task's `task_binary` and its sha256 hex."""
    blob = gzip_bytes(tar_task_dir(task_dir))
    return blob, hashlib.sha256(blob).hexdigest()


def find_task_dirs(root: Path) -> list[Path]:
    """Task directories under `root` (a dir holding task.toml, or its children that do)."""
    root = Path(root)
    if (root / "task.toml").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "task.toml").is_file())


def packed_task(task_dir: Path):
    """A dataset row (metadata from task.toml or archipelago.json) with its task_binary."""
    from apexrl.artifacts.models import DatasetRow
    from apexrl.tasks.dataset import PackedTask
    from apexrl.tasks.meta import find_task_meta

    meta = find_task_meta(task_dir, require_world=False)
    blob, sha = pack_task_dir(task_dir)
    row = DatasetRow(
        path=task_dir.name,
        task_id=meta.task_id if meta else None,
        world_id=(meta.world_id or None) if meta else None,
        domain=meta.domain if meta else None,
        sha256=sha,
        size_bytes=len(blob),
    )
    return PackedTask(row=row, task_binary=blob)


def _pack_job(task_dir: Path):
    """Worker: pack one task dir; errors come back as (where, detail, hint) values."""
    try:
        return packed_task(task_dir)
    except BadRecordError as e:
        return (e.where, e.detail, e.hint)


def pack_dirs(dirs: list[Path], *, workers: int | None = None, on_done=None):
    """PackedTask per dir, in order, packed in parallel processes."""
    from apexrl.tasks.parallel import ordered_map

    for result in ordered_map(_pack_job, dirs, workers=workers, n_items=len(dirs)):
        if isinstance(result, tuple):
            raise BadRecordError(*result[:2], hint=result[2])
        if on_done:
            on_done()
        yield result
