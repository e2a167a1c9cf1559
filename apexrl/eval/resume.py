"""The run directory: configuration check, lock, results journal and compaction.

Results are appended to `results.jsonl` one line per finished trial, in one write
followed by fsync, after the trial's trajectory files are in place. A kill -9 can
at worst leave a partial last line: it is cut off when the journal is next opened,
so the trial it belonged to simply runs again. Rows are keyed by trial id and the
last row wins (`--retry-errors` appends a new row for a rerun trial), so
`results.parquet`, compacted from the journal, holds every trial exactly once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import ValidationError

from apexrl.artifacts.atomic import atomic_path, write_bytes_atomic
from apexrl.artifacts.jsonl import append_record
from apexrl.errors import BadRecordError, UsageError
from apexrl.eval.models import (
    JOURNAL_FILE,
    LOCK_FILE,
    LOGS_DIR,
    RESULTS_FILE,
    RUN_FILE,
    SUMMARY_FILE,
    TRAJECTORIES_DIR,
    EvalResultRow,
    EvalRunConfig,
    EvalSummary,
    RunPlan,
)

INFRA_FILE = "infra.jsonl"  # trials a Ray cluster lost (a dead worker or node), one line a loss
RESULT_COLUMNS = ("trial_id", *[f for f in EvalResultRow.model_fields if f != "trial_id"])


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """One `eval run` per RUN_DIR at a time (released by the kernel on kill -9)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fh = open(run_dir / LOCK_FILE, "a+b")  # noqa: SIM115 - held for the whole run
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"{run_dir} is in use by another `apexrl eval run`",
                hint="wait for it to finish or pick another -o RUN_DIR",
            ) from None
        yield
    finally:
        fh.close()


def load_config(run_dir: Path) -> EvalRunConfig | None:
    path = run_dir / RUN_FILE
    if not path.is_file():
        return None
    try:
        return EvalRunConfig.model_validate_json(path.read_bytes())
    except ValidationError as e:
        msg = e.errors()[0]["msg"]
        raise BadRecordError(str(path), f"not an eval run configuration: {msg}") from None


def prepare_run_dir(run_dir: Path, config: EvalRunConfig, *, force: bool) -> None:
    """Refuse a RUN_DIR holding a different configuration (unless force: then the
    old run's files are removed and the run starts over); write run.json."""
    old = load_config(run_dir)
    if old is None:
        ours = {RUN_FILE, JOURNAL_FILE, RESULTS_FILE, SUMMARY_FILE, LOCK_FILE}
        ours |= {TRAJECTORIES_DIR, LOGS_DIR, "tasks", "report.html", "engine.log", INFRA_FILE}
        foreign = [p.name for p in run_dir.iterdir() if p.name not in ours and p.name[0] != "."]
        if foreign:
            raise UsageError(
                f"{run_dir} is not empty and holds no {RUN_FILE} (found {foreign[0]!r})",
                hint="pick a new or empty -o RUN_DIR",
            )
    elif old.fingerprint() != config.fingerprint():
        diff = _identity_diff(old.identity(), config.identity())
        if not force:
            raise UsageError(
                f"{run_dir} holds a run with a different configuration ({'; '.join(diff)})",
                hint="use another -o RUN_DIR, or --force to discard that run and start over",
            )
        clear_results(run_dir)
    write_bytes_atomic(run_dir / RUN_FILE, config.model_dump_json(indent=2).encode() + b"\n")


def settle_plan(
    old: EvalRunConfig | None,
    config: EvalRunConfig,
    selected: RunPlan,
    *,
    extend: bool,
    force: bool,
    run_dir: Path | None = None,
) -> RunPlan:
    """The plan this invocation runs. A new run, one from before plans were recorded, or
    one of another configuration (refused or started over by prepare_run_dir) takes the
    selection. A resumed run must select its own plan: another selection is refused
    like a changed setting, unless `extend` (the union: the plan's tasks, then the new
    ones, at the larger k) or `force` (the selection replaces the plan; results of
    trials in both are kept, the others no longer count)."""
    if old is None or old.plan is None or old.fingerprint() != config.fingerprint():
        return selected
    if selected == old.plan:
        return selected
    if extend:
        return old.plan.extended(selected)
    if force:
        return selected
    where = f"{run_dir} holds" if run_dir else "the run folder holds"
    plan = old.plan
    raise UsageError(
        f"{where} a run planned as {len(plan.tasks)} task(s) x {plan.attempts} attempt(s); "
        f"this selection differs ({plan.difference(selected)})",
        hint="rerun with the run's own selection to resume it"
        + (f" ({old.command})" if old.command else "")
        + ", add --extend to add this selection to its plan, or use another -o RUN_DIR",
    )


def _identity_diff(old: dict, new: dict, prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _identity_diff(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return out


def clear_results(run_dir: Path) -> None:
    for name in (JOURNAL_FILE, RESULTS_FILE, SUMMARY_FILE, INFRA_FILE):
        (run_dir / name).unlink(missing_ok=True)
    for name in (TRAJECTORIES_DIR, LOGS_DIR):
        shutil.rmtree(run_dir / name, ignore_errors=True)


def load_journal(run_dir: Path, *, repair: bool = False) -> dict[str, EvalResultRow]:
    """Rows by trial id (last wins). A partial or unparsable last line (a crash
    mid-append) is ignored, and cut off when `repair` (before appending again)."""
    path = run_dir / JOURNAL_FILE
    if not path.is_file():
        return {}
    data = path.read_bytes()
    rows: dict[str, EvalResultRow] = {}
    good_end = 0
    pos = 0
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        last = i == len(lines) - 1
        end = pos + len(line) + (0 if last else 1)
        if line.strip():
            try:
                if last:  # no newline after it: the write did not finish
                    raise ValueError("partial line")
                row = EvalResultRow.model_validate(orjson.loads(line))
            except (ValueError, ValidationError) as e:
                if last or _only_blank(lines[i + 1 :]):
                    break
                raise BadRecordError(
                    f"{path}:{i + 1}",
                    f"corrupt journal line: {e}",
                    hint="remove that line; its trial will run again",
                ) from None
            rows[row.trial_id] = row
        pos = end
        good_end = end
    if repair and good_end < len(data):
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return rows


def _only_blank(lines: list[bytes]) -> bool:
    return all(not x.strip() for x in lines)


def append_result(run_dir: Path, row: EvalResultRow) -> None:
    append_record(run_dir / JOURNAL_FILE, row)


def write_trajectory(run_dir: Path, trial_id: str, files: dict[str, bytes]) -> None:
    """trajectories/<trial_id>/ with the given files, replaced as a whole."""
    from apexrl.artifacts.atomic import atomic_dir

    if not files:
        return
    with atomic_dir(run_dir / TRAJECTORIES_DIR / trial_id, force=True, marker=False) as tmp:
        for name, data in files.items():
            (tmp / name).write_bytes(data)


def remove_stale_temp(run_dir: Path) -> None:
    """Temp folders a killed run left in trajectories/ (we hold the run lock)."""
    traj = run_dir / TRAJECTORIES_DIR
    if traj.is_dir():
        for p in traj.iterdir():
            if p.name.startswith(".") and (p.name.endswith(".tmp") or ".old-" in p.name):
                shutil.rmtree(p, ignore_errors=True)
    for p in run_dir.glob(".*.tmp"):
        p.unlink(missing_ok=True)


def _schema():
    import pyarrow as pa

    types = {
        "trial_id": pa.string(),
        "schema_version": pa.string(),
        "task_id": pa.string(),
        "domain": pa.string(),
        "world_id": pa.string(),
        "attempt": pa.int32(),
        "status": pa.string(),
        "error_class": pa.string(),
        "reward": pa.float64(),
        "criteria_met": pa.int32(),
        "criteria_total": pa.int32(),
        "turns": pa.int32(),
        "tokens_in": pa.int64(),
        "tokens_out": pa.int64(),
        "tool_calls": pa.int32(),
        "tool_call_success_rate": pa.float64(),
        "started_at": pa.string(),
        "duration_s": pa.float64(),
        "criteria_unjudged": pa.int32(),
        "infra_retries": pa.int32(),
    }
    return pa.schema([(c, types.get(c, pa.string())) for c in RESULT_COLUMNS])


def write_results(run_dir: Path, rows: dict[str, EvalResultRow] | list[EvalResultRow]) -> Path:
    """results.parquet from rows, one per trial, ordered by (task id, attempt)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = list(rows.values()) if isinstance(rows, dict) else list(rows)
    items.sort(key=lambda r: (r.task_id, r.attempt, r.trial_id))
    cols = {c: [getattr(r, c) for r in items] for c in RESULT_COLUMNS}
    table = pa.table(cols, schema=_schema())
    target = run_dir / RESULTS_FILE
    with atomic_path(target, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return target


def write_summary(run_dir: Path, summary: EvalSummary) -> None:
    write_bytes_atomic(run_dir / SUMMARY_FILE, summary.model_dump_json(indent=2).encode() + b"\n")


def read_results_table(run_dir: Path):
    """The run's rows as a pyarrow Table: the journal when present (it is the
    source of truth while a run is in progress), else results.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    journal = run_dir / JOURNAL_FILE
    parquet = run_dir / RESULTS_FILE
    if parquet.is_file() and (
        not journal.is_file() or parquet.stat().st_mtime_ns >= journal.stat().st_mtime_ns
    ):
        return pq.read_table(parquet)
    if journal.is_file():
        rows = load_journal(run_dir)
        cols = {c: [getattr(r, c) for r in rows.values()] for c in RESULT_COLUMNS}
        return pa.table(cols, schema=_schema())
    raise UsageError(
        f"{run_dir} has no {RESULTS_FILE} or {JOURNAL_FILE}",
        hint="pass a RUN_DIR written by `apexrl eval run`",
    )
