"""Deterministic gzip tars of task directories (the `task_binary` column).

The same tree always gives the same bytes: entries sorted, uid/gid 0, no
owner names, mtime 0, modes normalised to 0755/0644, gzip header with mtime 0
and no file name, compression level pinned.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import zlib
from pathlib import Path

from apexrl.errors import BadRecordError

GZIP_LEVEL = 6
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # no name, mtime 0, OS unknown


def tar_task_dir(task_dir: Path) -> bytes:
    """Return the uncompressed, deterministic tar of `task_dir` (members relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, full, is_dir in _walk_sorted(task_dir):
            info = tarfile.TarInfo(rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if is_dir:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
                continue
            st = os.stat(full)
            info.size = st.st_size
            info.mode = 0o755 if st.st_mode & 0o111 else 0o644
            with open(full, "rb") as fh:
                tar.addfile(info, fh)
    return buf.getvalue()


def gzip_bytes(data: bytes) -> bytes:
    """gzip with a fixed header (zlib's raw deflate + our own header/trailer)."""
    comp = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
    body = comp.compress(data) + comp.flush()
    trailer = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "little") + (
        len(data) & 0xFFFFFFFF
    ).to_bytes(4, "little")
    return _GZIP_HEADER + body + trailer


def pack_task_dir(task_dir: Path) -> tuple[bytes, str]:
    """The task's `task_binary` and its sha256 hex."""
    blob = gzip_bytes(tar_task_dir(task_dir))
    return blob, hashlib.sha256(blob).hexdigest()


def _walk_sorted(root: Path):
    """(relative posix name, full path, is_dir) in a stable order; refuses links."""
    root = Path(root)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        full_dir = root / rel_dir if rel_dir else root
        with os.scandir(full_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink():
                raise BadRecordError(
                    f"{root}/{rel}",
                    "symbolic links are not packed",
                    hint="replace the link by a file",
                )
            if entry.is_dir():
                yield rel, entry.path, True
                subdirs.append(rel)
            elif entry.is_file():
                yield rel, entry.path, False
            else:
                raise BadRecordError(
                    f"{root}/{rel}", "special files (devices, fifos) are not packed"
                )
        # depth-first, in name order: push reversed so the first name pops first
        stack.extend(reversed(subdirs))


def find_task_dirs(root: Path) -> list[Path]:
    """Task directories under `root` (a dir holding task.toml, or its children that do)."""
    root = Path(root)
    if (root / "task.toml").is_file():
        return [root]
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / "task.toml").is_file())


def packed_task(task_dir: Path):
    """A dataset row (metadata from task.toml) with its task_binary."""
    import tomllib

    from apexrl.artifacts.models import DatasetRow
    from apexrl.tasks.dataset import PackedTask

    try:
        meta = tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8")).get(
            "metadata", {}
        )
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadRecordError(f"{task_dir}/task.toml", f"unreadable: {e}") from None
    blob, sha = pack_task_dir(task_dir)
    row = DatasetRow(
        path=task_dir.name,
        task_id=meta.get("task_id"),
        world_id=meta.get("world_id"),
        domain=meta.get("domain"),
        sha256=sha,
        size_bytes=len(blob),
    )
    return PackedTask(row=row, task_binary=blob)
