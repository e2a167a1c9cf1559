"""Deterministic gzip tars of task directories (the `task_binary` column).

The same tree always gives the same bytes: entries sorted, uid/gid 0, no
owner names, mtime 0, modes normalised to 0755/0644, gzip header with mtime 0
and no file name, compressed by ISA-L at a pinned level (isal pinned too).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from apexrl.artifacts.archive_extract import native_tar
from apexrl.artifacts.archive_write import (
    GZIP_LEVEL,
    Entry,
    bytes_entry,
    gzip_bytes,
    gzip_fast,
    tar_bytes,
    walk_sorted,
)
from apexrl.artifacts.nofollow import RefusedPath, open_regular
from apexrl.errors import BadRecordError

__all__ = ["GZIP_LEVEL", "gzip_bytes", "pack_task_dir", "tar_task_dir"]


# Top-level files whose bytes the row's metadata comes from (kept while tarring).
_META_FILES = ("task.toml", "archipelago.json")


def tar_task_dir(task_dir: Path, *, keep: dict[str, bytes] | None = None) -> bytes:
    """Return the uncompressed, deterministic tar of `task_dir` (members relative to it).

    apexrl.artifacts.archive_write writes it (ustar + PAX for long names); files
    are read whole here, which is what keeps packing near `tar czf`'s speed. With
    `keep`, the bytes of a top-level task.toml / archipelago.json are put there too.

    The C fast path (archive_extract.native_tar: the same bytes, tests/test_fasttar.py) packs
    any tree of plain ASCII-named files and folders; a link, a special file or a
    non-ASCII name comes here, where it is packed or named."""
    native = native_tar()
    if native is not None:
        done = native.tar_dir(os.fspath(task_dir))
        if done is not None:
            tar, kept = done
            if keep is not None:
                keep.update(kept)
            return tar
    entries: list[Entry] = []
    for rel, full, is_dir in walk_sorted(task_dir):
        if is_dir:
            entries.append(Entry(rel, "dir"))
            continue
        data, executable = _read_file(full, rel, task_dir)
        if keep is not None and rel in _META_FILES:
            keep[rel] = data
        entries.append(bytes_entry(rel, data, executable=executable))
    return tar_bytes(entries)


def _read_file(full: str, rel: str, task_dir: Path) -> tuple[bytes, bool]:
    """A regular file's bytes (never through a link) and whether it is executable."""
    try:
        fd = open_regular(full)
    except RefusedPath as e:  # replaced since the walk saw it
        raise BadRecordError(f"{task_dir}/{rel}", f"{e.strerror}: not packed") from None
    try:
        st = os.fstat(fd)
        chunks = [os.read(fd, st.st_size + 1)]
        while chunks[-1]:  # a file that grew since fstat is read to its end
            chunks.append(os.read(fd, 1 << 20))
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 2 else b"".join(chunks)
    return data, bool(st.st_mode & 0o111)


def pack_task_dir(task_dir: Path, *, keep: dict[str, bytes] | None = None) -> tuple[bytes, str]:
    """The task's `task_binary` and its sha256 hex."""
    blob = gzip_fast(tar_task_dir(task_dir, keep=keep))
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

    texts: dict[str, bytes] = {}
    blob, sha = pack_task_dir(task_dir, keep=texts)  # one read of every file
    meta = _row_meta(task_dir, texts)
    row = DatasetRow(
        path=task_dir.name,
        task_id=meta.task_id if meta else None,
        world_id=(meta.world_id or None) if meta else None,
        domain=meta.domain if meta else None,
        sha256=sha,
        size_bytes=len(blob),
    )
    return PackedTask(row=row, task_binary=blob)


def _row_meta(task_dir: Path, texts: dict[str, bytes]):
    """find_task_meta's answer from the bytes read while tarring (the rubric count,
    which a dataset row does not carry, is left out)."""
    from apexrl.tasks.meta import ARCHIPELAGO_FILE, TASK_TOML, meta_from_texts, metadata_of

    decoded: dict[str, str | None] = {}
    for name in (TASK_TOML, ARCHIPELAGO_FILE):
        raw = texts.get(name)
        try:  # as Path.read_text does: UTF-8, universal newlines
            text = raw.decode("utf-8") if raw is not None else None
        except UnicodeDecodeError:
            raise BadRecordError(str(task_dir / name), "not UTF-8") from None
        decoded[name] = text.replace("\r\n", "\n").replace("\r", "\n") if text else text
    where = str(task_dir)
    table = metadata_of(decoded[TASK_TOML], where)
    if decoded[ARCHIPELAGO_FILE] is None and not table:
        return None
    return meta_from_texts(
        task_dir.name,
        decoded[TASK_TOML],
        decoded[ARCHIPELAGO_FILE],
        where=where,
        require_world=False,
        table=table,
    )


def _pack_job(task_dir: Path):
    """Worker: pack one task dir; errors come back as (where, detail, hint) values."""
    try:
        return packed_task(task_dir)
    except BadRecordError as e:
        return (e.where, e.detail, e.hint)


def pack_dirs(dirs: list[Path], *, workers: int | None = None, on_done=None):
    """PackedTask per dir, in order, packed in parallel processes."""
    from apexrl.tasks.parallel import ordered_map

    preload = ("apexrl.tasks.meta", "apexrl.tasks.dataset", "apexrl.artifacts.models")
    for result in ordered_map(_pack_job, dirs, workers=workers, n_items=len(dirs), preload=preload):
        if isinstance(result, tuple):
            raise BadRecordError(*result[:2], hint=result[2])
        if on_done:
            on_done()
        yield result


def source_digest(source: str | None) -> str | None:
    """dataset_digest of a local dataset source without unpacking it: a packed dataset's
    _dataset.json digest, or a folder of task dirs packed here (the digest eval records
    for the same folder). Remote sources (hf://, s3://) are named by their URI: None.
    Parquet files without a _dataset.json: a hash of their bytes ("files:sha256:...")."""
    from apexrl.tasks.dataset import MANIFEST

    if not source or "://" in source:
        return None
    p = Path(source).expanduser()
    if p.is_dir() and (p / MANIFEST).is_file():
        import json

        return json.loads((p / MANIFEST).read_text("utf-8")).get("digest")
    if p.is_dir():
        from apexrl.artifacts.models import DatasetRow
        from apexrl.tasks.dataset import dataset_digest

        dirs = find_task_dirs(p)
        if dirs:
            return dataset_digest(DatasetRow(path=d.name, sha256=pack_task_dir(d)[1]) for d in dirs)
    files = (
        [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else []
    )
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(p.parent if p.is_file() else p)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return "files:sha256:" + h.hexdigest()


def checked_task_dirs(dirs: list[Path], *, strict: bool) -> tuple[list[Path], list]:
    """(task dirs to pack, a BadRecordError per task `tasks validate` finds an error in).
    A task Harbor or apexrl cannot run (invalid TOML, no instruction.md, a broken
    rubric, ...) is never packed: with `strict` the first one stops the pack (nothing
    written), else it is skipped and reported (the caller exits 5)."""
    from apexrl.errors import BadRecordError
    from apexrl.tasks.validate import validate_task_dir

    good, bad = [], []
    for d in dirs:
        errors = [f for f in validate_task_dir(d) if f.severity == "error"]
        if not errors:
            good.append(d)
            continue
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        e = BadRecordError(
            str(d),
            f"{errors[0].check}: {errors[0].message}{more}",
            hint=f"fix it (`apexrl tasks validate {d}` lists each problem) or move it away",
        )
        if strict:
            raise e
        bad.append(e)
    return good, bad
