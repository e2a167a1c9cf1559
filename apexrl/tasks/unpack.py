"""Safe extraction of `task_binary` rows into task directories.

Refused, with an error naming the row and member: absolute paths, `..`,
links that leave the task, devices/fifos, members over the size limit, and a
`path` that is not one safe directory name. Extraction goes to a temp folder
that is renamed into place, so an interrupted unpack never leaves a partial
task dir; an identical existing task dir is skipped (resumable).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.archive import Limits, dir_lock, extract_targz
from apexrl.errors import BadRecordError

# apexrl.artifacts.models.SAFE_ID (a test keeps them equal), compiled here so that
# unpack's worker processes start without importing pydantic.
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

MAX_MEMBER_BYTES = Limits.max_member_bytes
MAX_TASK_BYTES = Limits.max_total_bytes


@dataclass
class UnpackResult:
    path: str
    status: str  # "written" | "unchanged"
    sha256: str
    pending: str | None = None  # extracted but not yet moved into place (strict runs)


def check_task_path(path: object, where: str) -> str:
    if not isinstance(path, str) or not SAFE_ID.match(path) or ".." in path:
        raise BadRecordError(
            where,
            f"path {path!r} is not a safe task directory name",
            hint="a task path is one folder name: letters, digits, '-', '_', '.'",
        )
    return path


def unpack_row(
    path: object,
    blob: bytes,
    out: Path,
    where: str,
    *,
    max_member: int | None = None,
    limits: Limits | None = None,
    defer: bool = False,
    stamped: bool | None = None,
) -> UnpackResult:
    """Extract one row into `out/<path>` (through a temp folder renamed into place).

    Links are allowed only inside the task, checked against the real filesystem
    after extraction (see apexrl.artifacts.archive). `stamped` False says the caller
    (holding the folder's lock) knows there is no stamp to read."""
    path = check_task_path(path, where)
    if limits is None:
        limits = Limits.from_env(**({"max_member_bytes": max_member} if max_member else {}))
    sha = hashlib.sha256(blob).hexdigest()
    base = os.fspath(out)
    if stamped is not False and _read_stamp(base, path) == sha and os.path.isdir(f"{base}/{path}"):
        return UnpackResult(path, "unchanged", sha)
    tmp = _make_tmp(base, path)
    try:
        extract_targz(blob, Path(tmp), where=where, links="in_tree", limits=limits, strip=path)
    except BadRecordError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except (OSError, ValueError, EOFError, MemoryError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadRecordError(where, f"task_binary could not be unpacked: {e}") from None
    if defer:
        return UnpackResult(path, "written", sha, pending=tmp)
    return finish_row(out, UnpackResult(path, "written", sha, pending=tmp))


_tmp_serial = itertools.count()


def _make_tmp(base: str, path: str) -> str:
    """A new private folder `out/.<path>.<pid>-<n>.unpack-tmp` (mkdtemp without the
    random-name cost; a name left by a killed run is skipped, then swept)."""
    while True:
        tmp = f"{base}/.{path}.{os.getpid()}-{next(_tmp_serial)}.unpack-tmp"
        try:
            os.mkdir(tmp, 0o700)
            return tmp
        except FileExistsError:
            continue


def _read_stamp(base: str, path: str) -> str | None:
    try:
        fd = os.open(f"{base}/.apexrl/{path}.sha256", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)


# Stamps live outside the task dirs (out/.apexrl/<path>.sha256) so that
# unpack(pack(tree)) == tree exactly.
_STAMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC


def finish_row(
    out: Path, res: UnpackResult, *, known: tuple[bool, bool] | None = None
) -> UnpackResult:
    """Move an extracted row into place and stamp it. `known` = (the task dir exists,
    its stamp exists) when the caller listed the folder under its lock."""
    assert res.pending is not None
    path, sha, tmp = res.path, res.sha256, res.pending
    base = os.fspath(out)
    final = f"{base}/{path}"
    stamp = f"{base}/.apexrl/{path}.sha256"
    if known is None:
        final_there, stamped = os.path.lexists(final), os.path.isfile(stamp)
    else:
        final_there, stamped = known
    if final_there and not stamped:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadRecordError(
            final,
            "exists and was not unpacked by apexrl: not replaced",
            hint="move it away or unpack into another folder",
        )
    if stamped:
        os.unlink(stamp)  # a crash from here on leaves no stale stamp
    old = None
    if final_there:
        old = tempfile.mkdtemp(prefix=f".{path}.", suffix=".old", dir=base)
        os.replace(final, f"{old}/x")
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    try:
        fd = os.open(stamp, _STAMP_FLAGS, 0o644)
    except FileNotFoundError:
        os.makedirs(f"{base}/.apexrl", exist_ok=True)
        fd = os.open(stamp, _STAMP_FLAGS, 0o644)
    try:
        os.write(fd, (sha + "\n").encode())
    finally:
        os.close(fd)
    return UnpackResult(path, "written", sha)


def _discard(results: list[UnpackResult]) -> None:
    for r in results:
        if r.pending:
            shutil.rmtree(r.pending, ignore_errors=True)


def _unpack_job(job: tuple[str, object, bytes | None, Path, bool, bool]) -> UnpackResult | tuple:
    """Worker: unpack one row; errors come back as (where, detail, hint) values."""
    where, path, blob, out, defer, stamped = job
    try:
        if not isinstance(blob, bytes | bytearray) or not blob:
            raise BadRecordError(where, "task_binary is empty")
        return unpack_row(path, bytes(blob), out, where, defer=defer, stamped=stamped)
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
        for where, row in iter_rows(source, only=("path", "task_binary")):
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
            yield where, path, row.get("task_binary"), out, strict, f"{path}.sha256" in stamps

    with dir_lock(out):  # a second unpack into `out` waits for this one
        for debris in [*out.glob(".*.unpack-tmp"), *out.glob(".*.old")]:  # a killed run's
            shutil.rmtree(debris, ignore_errors=True)
        # Listed once under the lock (only this run writes here now): no per-task lookups.
        existing = set(os.listdir(out))
        stamps = set(os.listdir(out / ".apexrl"))
        try:  # --strict: rows are extracted aside and moved into place only at the end
            for result in ordered_map(
                _unpack_job, jobs(), workers=workers, n_items=row_count(source)
            ):
                if isinstance(result, tuple):
                    fail(BadRecordError(*result[:2], hint=result[2]))
                    continue
                results.append(result)
                if on_row and not strict:
                    on_row(result)
        except BaseException:
            _discard(results)
            raise
        if strict:
            results = [
                finish_row(out, r, known=(r.path in existing, f"{r.path}.sha256" in stamps))
                if r.pending
                else r
                for r in results
            ]
            for r in results:
                if on_row:
                    on_row(r)
    return results
