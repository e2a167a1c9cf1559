"""Safe extraction of `task_binary` rows into task directories.

Refused, with an error naming the row and member: absolute paths, `..`,
links that leave the task, devices/fifos, members over the size limit, and a
`path` that is not one safe directory name. Extraction goes to a temp folder
that is renamed into place, so an interrupted unpack never leaves a partial
task dir; an identical existing task dir is skipped (resumable).
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.models import SAFE_ID
from apexrl.errors import BadRecordError

MAX_MEMBER_BYTES = 512 * 1024 * 1024
MAX_TASK_BYTES = 2 * 1024 * 1024 * 1024


@dataclass
class UnpackResult:
    path: str
    status: str  # "written" | "unchanged"
    sha256: str


def check_task_path(path: object, where: str) -> str:
    if not isinstance(path, str) or not SAFE_ID.match(path) or ".." in path:
        raise BadRecordError(
            where,
            f"path {path!r} is not a safe task directory name",
            hint="a task path is one folder name: letters, digits, '-', '_', '.'",
        )
    return path


def safe_members(
    tar: tarfile.TarFile, path: str, where: str, max_member: int
) -> list[tarfile.TarInfo]:
    """Check every member; return them with any leading `<path>/` prefix stripped."""
    members = tar.getmembers()
    prefix = f"{path}/"
    strip = bool(members) and all(m.name == path or m.name.startswith(prefix) for m in members)
    total = 0
    kept = []
    for m in members:
        name = m.name
        if strip:
            if name == path:
                continue
            name = name[len(prefix) :]
        _check_member(m, name, where, max_member)
        total += m.size
        if total > MAX_TASK_BYTES:
            raise BadRecordError(where, f"task is larger than {MAX_TASK_BYTES} bytes unpacked")
        m.name = name
        if m.islnk() and strip and m.linkname.startswith(prefix):
            m.linkname = m.linkname[len(prefix) :]
        kept.append(m)
    return kept


def _check_member(m: tarfile.TarInfo, name: str, where: str, max_member: int) -> None:
    label = f"{where} member {m.name!r}"
    if name.startswith("/"):
        raise BadRecordError(label, "absolute path refused")
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../") or ".." in name.split("/"):
        raise BadRecordError(label, "path with '..' refused")
    if m.ischr() or m.isblk() or m.isfifo() or m.isdev():
        raise BadRecordError(label, "device or fifo refused")
    if m.issym() or m.islnk():
        target = m.linkname
        resolved = (
            posixpath.normpath(posixpath.join(posixpath.dirname(norm), target))
            if m.issym()
            else posixpath.normpath(target)
        )
        if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            raise BadRecordError(label, f"link to {target!r} leaves the task")
    if m.size > max_member:
        raise BadRecordError(label, f"member of {m.size} bytes exceeds the {max_member}-byte limit")


def unpack_row(
    path: object,
    blob: bytes,
    out: Path,
    where: str,
    *,
    max_member: int = MAX_MEMBER_BYTES,
) -> UnpackResult:
    path = check_task_path(path, where)
    sha = hashlib.sha256(blob).hexdigest()
    final = out / path
    stamp = _stamp_path(out, path)
    if final.is_dir() and stamp.is_file() and stamp.read_text().strip() == sha:
        return UnpackResult(path, "unchanged", sha)
    tmp = out / f".{path}.unpack-tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        raw = _gunzip(blob)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            members = safe_members(tar, path, where, max_member)
            tmp.mkdir(parents=True)
            _extract(raw, members, tmp)
    except BadRecordError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadRecordError(where, f"task_binary is not a valid gzip tar: {e}") from None
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(sha + "\n")
    return UnpackResult(path, "written", sha)


def _stamp_path(out: Path, path: str) -> Path:
    # Stamps live outside the task dirs so unpack(pack(tree)) == tree exactly.
    return out / ".apexrl" / f"{path}.sha256"


def _gunzip(blob: bytes) -> bytes:
    try:
        return zlib.decompress(blob, 16 + zlib.MAX_WBITS)
    except zlib.error:
        import gzip  # multi-member gzip streams

        return gzip.decompress(blob)


def _extract(raw: bytes, members: list[tarfile.TarInfo], root: Path) -> None:
    """Write members that safe_members already checked. Modes are normalised to
    0755 (dirs, executables) / 0644, matching what pack writes."""
    made = {str(root)}
    for m in members:
        target = os.path.join(root, m.name)
        parent = os.path.dirname(target)
        if parent not in made:
            os.makedirs(parent, 0o755, exist_ok=True)
            made.add(parent)
        if m.isdir():
            os.makedirs(target, 0o755, exist_ok=True)
            made.add(target.rstrip("/"))
        elif m.isfile():
            mode = 0o755 if m.mode & 0o100 else 0o644
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            try:
                os.write(fd, raw[m.offset_data : m.offset_data + m.size])
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        elif m.issym():
            os.symlink(m.linkname, target)
        elif m.islnk():
            os.link(os.path.join(root, m.linkname), target)


def _unpack_job(job: tuple[str, object, bytes | None, Path]) -> UnpackResult | tuple:
    """Worker: unpack one row; errors come back as (where, detail, hint) values."""
    where, path, blob, out = job
    try:
        if not isinstance(blob, bytes | bytearray) or not blob:
            raise BadRecordError(where, "task_binary is empty")
        return unpack_row(path, bytes(blob), out, where)
    except BadRecordError as e:
        return (e.where, e.detail, e.hint)


def unpack_dataset(
    source, out: Path, *, strict: bool, on_row=None, on_error=None, workers: int | None = None
) -> list[UnpackResult]:
    """Unpack every row of a dataset into `out`, rows in parallel processes.

    Bad rows raise with strict; otherwise they go to `on_error` and the rest are written."""
    from apexrl.tasks.dataset import iter_rows, row_count
    from apexrl.tasks.parallel import ordered_map

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results: list[UnpackResult] = []
    seen: dict[str, str] = {}

    def fail(err: BadRecordError) -> None:
        if strict or on_error is None:
            raise err
        on_error(err)

    def jobs():
        for where, row in iter_rows(source):
            path = row.get("path")
            try:
                check_task_path(path, where)
                if path in seen:
                    raise BadRecordError(
                        where, f"duplicate task path {path!r} (first at {seen[path]})"
                    )
            except BadRecordError as e:
                fail(e)
                continue
            seen[path] = where
            yield where, path, row.get("task_binary"), out

    for result in ordered_map(_unpack_job, jobs(), workers=workers, n_items=row_count(source)):
        if isinstance(result, tuple):
            fail(BadRecordError(*result[:2], hint=result[2]))
            continue
        results.append(result)
        if on_row:
            on_row(result)
    return results
