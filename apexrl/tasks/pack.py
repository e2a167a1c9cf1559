"""Deterministic gzip tars of task directories (the `task_binary` column).

The same tree always gives the same bytes: entries sorted, uid/gid 0, no
owner names, mtime 0, modes normalised to 0755/0644, gzip header with mtime 0
and no file name, compression level pinned.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from pathlib import Path

from apexrl.errors import BadRecordError

GZIP_LEVEL = 6
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # no name, mtime 0, OS unknown


def tar_task_dir(task_dir: Path) -> bytes:
    """Return the uncompressed, deterministic tar of `task_dir` (members relative to it).

    Headers are written directly (ustar, with a PAX record for names that do not
    fit): tarfile's generic header code was most of the packing time."""
    parts: list[bytes] = []
    for rel, full, is_dir in _walk_sorted(task_dir):
        if is_dir:
            parts.append(_header(rel + "/", 0, 0o755, b"5"))
            continue
        with open(full, "rb") as fh:
            data = fh.read()
        mode = 0o755 if os.stat(full).st_mode & 0o111 else 0o644
        parts.append(_header(rel, len(data), mode, b"0"))
        parts.append(data)
        if len(data) % 512:
            parts.append(b"\0" * (512 - len(data) % 512))
    parts.append(b"\0" * 1024)  # end-of-archive marker
    return b"".join(parts)


def _header(name: str, size: int, mode: int, typeflag: bytes) -> bytes:
    raw = name.encode("utf-8")
    if len(raw) <= 100 and raw.isascii():
        return _ustar_block(raw, size, mode, typeflag)
    # PAX extended header carrying the full UTF-8 path, then a truncated ustar header.
    record = _pax_record("path", raw)
    pax = _ustar_block(b"././@PaxHeader", len(record), 0o644, b"x") + record
    pax += b"\0" * (-len(record) % 512)
    return pax + _ustar_block(raw[:100], size, mode, typeflag)


def _pax_record(key: str, value: bytes) -> bytes:
    body = b" " + key.encode() + b"=" + value + b"\n"
    length = len(body)
    while len(str(length).encode()) + len(body) != length:
        length = len(str(length).encode()) + len(body)
    return str(length).encode() + body


def _ustar_block(name: bytes, size: int, mode: int, typeflag: bytes) -> bytes:
    header = bytearray(512)
    header[0 : len(name)] = name
    header[100:108] = b"%07o\0" % mode
    header[108:116] = b"0000000\0"  # uid
    header[116:124] = b"0000000\0"  # gid
    header[124:136] = b"%011o\0" % size
    header[136:148] = b"00000000000\0"  # mtime 0
    header[148:156] = b" " * 8  # checksum placeholder
    header[156:157] = typeflag
    header[257:265] = b"ustar\x0000"
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


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
