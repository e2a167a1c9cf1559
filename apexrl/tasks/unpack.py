"""Safe extraction of `task_binary` rows into task directories.

Refused, with an error naming the row and member: absolute paths, `..`,
links that leave the task, devices/fifos, members over the size limit, and a
`path` that is not one safe directory name. Extraction goes to a temp folder
that is renamed into place, so an interrupted unpack never leaves a partial
task dir; an identical existing task dir is skipped (resumable).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.archive_extract import Limits, extract_targz
from apexrl.artifacts.dirlock import dir_lock
from apexrl.artifacts.nofollow import read_regular
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


_LOOKUP = "lookup"  # unpack_row's default: read the stamp log itself


def unpack_row(
    path: object,
    blob: bytes,
    out: Path,
    where: str,
    *,
    max_member: int | None = None,
    limits: Limits | None = None,
    defer: bool = False,
    stamp: str | None = _LOOKUP,
) -> UnpackResult:
    """Extract one row into `out/<path>` (through a temp folder renamed into place).

    Links are allowed only inside the task, checked against the real filesystem
    after extraction (see apexrl.artifacts.archive_extract). `stamp` is the path's entry in
    the stamp log when the caller (holding the folder's lock) read the log once."""
    if limits is None:
        limits = Limits.from_env(**({"max_member_bytes": max_member} if max_member else {}))
    started = _start_row(path, blob, out, where, stamp)
    if isinstance(started, UnpackResult):
        return started
    path, sha, tmp, stamp = started
    _extract_row(blob, tmp, where, limits, path)
    return _end_row(out, path, sha, tmp, stamp, defer)


def _start_row(
    path: object, blob: bytes, out: Path, where: str, stamp: str | None
) -> UnpackResult | tuple[str, str, str, str | None]:
    """An "unchanged" result, or (path, sha256, a new temp folder, the path's stamp)."""
    path = check_task_path(path, where)
    sha = hashlib.sha256(blob).hexdigest()
    base = os.fspath(out)
    if stamp is _LOOKUP:
        stamp = load_stamps(base).get(path)
    if stamp == sha and os.path.isdir(f"{base}/{path}"):
        return UnpackResult(path, "unchanged", sha)
    return path, sha, _make_tmp(base, path), stamp


def _extract_row(
    blob: bytes, tmp: str, where: str, limits: Limits, path: str, *, native: bool = True
) -> None:
    """The row's tree into its temp folder; on a refusal the folder is removed."""
    try:
        extract_targz(
            blob,
            Path(tmp),
            where=where,
            links="in_tree",
            limits=limits,
            strip=path,
            empty=True,
            native=native,
        )
    except BadRecordError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except (OSError, ValueError, EOFError, MemoryError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadRecordError(where, f"task_binary could not be unpacked: {e}") from None


def _end_row(
    out: Path, path: str, sha: str, tmp: str, stamp: str | None, defer: bool
) -> UnpackResult:
    res = UnpackResult(path, "written", sha, pending=tmp)
    if defer:
        return res
    base = os.fspath(out)
    return finish_row(out, res, known=(os.path.lexists(f"{base}/{path}"), stamp is not None))


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


# Stamps live outside the task dirs so that unpack(pack(tree)) == tree exactly: one
# append-only log, out/.apexrl/unpacked.log, a line per event: "<sha256> <path>" once a
# task dir is whole in place, "- <path>" before apexrl moves one (its own, not yet
# whole: a run killed there leaves a dir that the next run replaces, never trusts).
# The last line for a path wins. Per-task files <path>.sha256 (older versions) count too.
STAMP_LOG = "unpacked.log"
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


def _read_stamps(base: str) -> tuple[dict[str, str], int, list[str]]:
    """(path -> sha or "-", lines in the log, older per-task stamp files)."""
    meta = f"{base}/.apexrl"
    stamps: dict[str, str] = {}
    try:
        names = os.listdir(meta)
    except (FileNotFoundError, NotADirectoryError):
        return stamps, 0, []
    legacy = [n for n in names if n.endswith(".sha256")]
    for name in legacy:
        try:
            raw = read_regular(f"{meta}/{name}", max_bytes=256)
        except OSError:
            continue
        stamps[name[: -len(".sha256")]] = raw.decode("ascii", "replace").strip()
    lines: list[str] = []
    if STAMP_LOG in names:
        lines = read_regular(f"{meta}/{STAMP_LOG}").decode("utf-8", "replace").splitlines()
        for line in lines:
            sha, _, path = line.partition(" ")
            if path and sha:
                stamps[path] = sha
    return stamps, len(lines), legacy


def load_stamps(base: str | Path) -> dict[str, str]:
    """Each task path's stamp: the sha256 of the row it was unpacked from, or "-" for a
    dir apexrl was moving when it stopped."""
    return _read_stamps(os.fspath(base))[0]


def _append_stamps(base: str, lines: list[str]) -> None:
    """One write with O_APPEND: lines from parallel workers never interleave."""
    if not lines:
        return
    try:
        fd = os.open(f"{base}/.apexrl/{STAMP_LOG}", _LOG_FLAGS, 0o644)
    except FileNotFoundError:
        os.makedirs(f"{base}/.apexrl", exist_ok=True)
        fd = os.open(f"{base}/.apexrl/{STAMP_LOG}", _LOG_FLAGS, 0o644)
    try:
        data = "".join(lines).encode()
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _compact_stamps(base: str, existing: set[str]) -> dict[str, str]:
    """Read the stamps; rewrite the log when it has grown well past one line per task,
    when older per-task stamp files are there, or when a "-" names a dir that is gone
    (it must not claim a folder made there later). The caller holds the lock."""
    stamps, n_lines, legacy = _read_stamps(base)
    stale = [p for p, sha in stamps.items() if sha == "-" and p not in existing]
    for p in stale:
        del stamps[p]
    if legacy or stale or n_lines > 2 * len(stamps) + 256:
        tmp = f"{base}/.apexrl/{STAMP_LOG}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(f"{sha} {path}\n" for path, sha in stamps.items())
        os.replace(tmp, f"{base}/.apexrl/{STAMP_LOG}")
        for name in legacy:
            with contextlib.suppress(OSError):
                os.unlink(f"{base}/.apexrl/{name}")
    return stamps


def _refuse_foreign(final: str, tmp: str) -> BadRecordError:
    shutil.rmtree(tmp, ignore_errors=True)
    return BadRecordError(
        final,
        "exists and was not unpacked by apexrl: not replaced",
        hint="move it away or unpack into another folder",
    )


def _move_into_place(base: str, path: str, tmp: str, final_there: bool) -> None:
    final = f"{base}/{path}"
    old = None
    if final_there:
        old = tempfile.mkdtemp(prefix=f".{path}.", suffix=".old", dir=base)
        os.replace(final, f"{old}/x")
    os.replace(tmp, final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _publish_mode(tmp: str) -> None:
    """The extracted folder was private while checked; in place it follows the umask."""
    from apexrl.artifacts.atomic import public_mode

    public_mode(tmp, is_dir=True)


def finish_row(
    out: Path, res: UnpackResult, *, known: tuple[bool, bool] | None = None
) -> UnpackResult:
    """Move an extracted row into place and stamp it. `known` = (the task dir exists,
    the log has a stamp for it) when the caller knows them."""
    assert res.pending is not None
    path, sha, tmp = res.path, res.sha256, res.pending
    base = os.fspath(out)
    if known is None:
        final_there, stamped = os.path.lexists(f"{base}/{path}"), path in load_stamps(base)
    else:
        final_there, stamped = known
    if final_there and not stamped:
        raise _refuse_foreign(f"{base}/{path}", tmp)
    if final_there:
        _append_stamps(base, [f"- {path}\n"])  # a crash from here on leaves no stale stamp
    _publish_mode(tmp)
    _move_into_place(base, path, tmp, final_there)
    _append_stamps(base, [f"{sha} {path}\n"])
    return UnpackResult(path, "written", sha)


def _discard(results: list[UnpackResult]) -> None:
    for r in results:
        if r.pending:
            shutil.rmtree(r.pending, ignore_errors=True)


def _unpack_job(
    job: tuple[str, object, bytes | None, Path, bool, str | None, Limits],
) -> UnpackResult | tuple:
    """Worker: unpack one row; errors come back as (where, detail, hint) values."""
    where, path, blob, out, defer, stamp, limits = job
    try:
        _check_blob(blob, where)
        return unpack_row(path, bytes(blob), out, where, defer=defer, stamp=stamp, limits=limits)
    except BadRecordError as e:
        return (e.where, e.detail, e.hint)


def _check_blob(blob: object, where: str) -> None:
    if not isinstance(blob, bytes | bytearray) or not blob:
        raise BadRecordError(where, "task_binary is empty")


# The C writer's batches: rows per call, and the blob bytes one call may hold at most.
BATCH_ROWS = 64
BATCH_BYTES = 256 * 1024 * 1024


def _native_batches(native, jobs, threads: int, limits: Limits):
    """What `_unpack_job` gives per job, in order, from one C call per batch of rows:
    the rows' inflate and write run on the call's own threads without the GIL. A row it
    declines (anything not plain) or that failed part way goes through the Python
    extractor, which decides with its own messages."""
    from apexrl.artifacts.archive_extract import native_limits

    c_limits = native_limits(limits)
    batch: list[tuple] = []
    size = 0
    for job in jobs:
        batch.append(job)
        size += len(job[2] or b"")
        if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
            yield from _native_batch(native, batch, threads, c_limits)
            batch, size = [], 0
    if batch:
        yield from _native_batch(native, batch, threads, c_limits)


def _native_batch(native, batch: list[tuple], threads: int, c_limits: tuple) -> list:
    from apexrl.artifacts.archive_extract import empty_folder

    results: list = [None] * len(batch)
    started: dict[int, tuple[str, str, str, str | None]] = {}
    for i, (where, path, blob, out, _defer, stamp, _limits) in enumerate(batch):
        try:
            _check_blob(blob, where)
            first = _start_row(path, blob, out, where, stamp)
        except BadRecordError as e:
            results[i] = (e.where, e.detail, e.hint)
            continue
        if isinstance(first, UnpackResult):
            results[i] = first
        else:
            started[i] = first
    order = sorted(started)
    items = [(batch[i][2], started[i][2], started[i][0]) for i in order]
    outcomes = native.extract_gz_many(items, c_limits, threads) if items else []
    for i, outcome in zip(order, outcomes, strict=True):
        where, _, blob, out, defer, _, limits = batch[i]
        path, sha, tmp, stamp = started[i]
        try:
            if not isinstance(outcome, tuple):  # declined (None) or failed part way (errno)
                if outcome is not None:
                    empty_folder(tmp)
                _extract_row(blob, tmp, where, limits, path, native=False)
            results[i] = _end_row(out, path, sha, tmp, stamp, defer)
        except BadRecordError as e:
            results[i] = (e.where, e.detail, e.hint)
    return results


def _finish_all(
    base: str, results: list[UnpackResult], existing: set[str], stamps: dict[str, str]
) -> list[UnpackResult]:
    """--strict's end: every extracted row moved into place, two log writes in all."""
    pending = [r for r in results if r.pending]
    for r in pending:
        if r.path in existing and r.path not in stamps:
            err = _refuse_foreign(f"{base}/{r.path}", r.pending)  # type: ignore[arg-type]
            _discard(results)
            raise err
    _append_stamps(base, [f"- {r.path}\n" for r in pending])
    for r in pending:
        _move_into_place(base, r.path, r.pending, r.path in existing)  # type: ignore[arg-type]
    _append_stamps(base, [f"{r.sha256} {r.path}\n" for r in pending])
    return [UnpackResult(r.path, r.status, r.sha256) for r in results]


def unpack_dataset(
    source, out: Path, *, strict: bool, on_row=None, on_error=None, workers: int | None = None
) -> list[UnpackResult]:
    """Unpack every row of a dataset into `out`, rows in parallel: batches of rows through
    the C tar writer on its own threads where it is built, else worker processes.

    Bad rows raise with strict; otherwise they go to `on_error` and the rest are written."""
    from apexrl.artifacts.archive_extract import native_tar
    from apexrl.tasks.dataset import iter_rows, row_count
    from apexrl.tasks.parallel import default_workers, ordered_map

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    limits = Limits.from_env()  # once: every row is held to the same limits
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
            yield where, path, row.get("task_binary"), out, strict, stamps.get(path), limits

    with dir_lock(out):  # a second unpack into `out` waits for this one
        for debris in [*out.glob(".*.unpack-tmp"), *out.glob(".*.old")]:  # a killed run's
            shutil.rmtree(debris, ignore_errors=True)
        # Listed once under the lock (only this run writes here now): no per-task lookups.
        existing = set(os.listdir(out))
        stamps = _compact_stamps(os.fspath(out), existing)
        try:  # --strict: rows are extracted aside and moved into place only at the end
            native = native_tar()
            if native is not None:
                results_iter = _native_batches(native, jobs(), workers or default_workers(), limits)
            else:
                n_items = row_count(source)
                results_iter = ordered_map(_unpack_job, jobs(), workers=workers, n_items=n_items)
            for result in results_iter:
                if isinstance(result, tuple):
                    fail(BadRecordError(*result[:2], hint=result[2]))
                    continue
                results.append(result)
                if on_row and not strict:
                    on_row(result)
        except BaseException:
            _discard(results)
            # rows this process extracted past the failure (the rest of a C batch) too
            for debris in out.glob(f".*.{os.getpid()}-*.unpack-tmp"):
                shutil.rmtree(debris, ignore_errors=True)
            raise
        if strict:
            results = _finish_all(os.fspath(out), results, existing, stamps)
            for r in results:
                if on_row:
                    on_row(r)
    return results
