"""Stage an eval run for `publish traces`: one row per trial (messages, verdicts, log tails,
optionally tokens) redacted into Parquet shards, the run's records, and the card."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from apexrl.artifacts.nofollow import is_regular, read_regular, read_tail, regular_files
from apexrl.artifacts.parquet_write import ROW_GROUP_BYTES, write_parquet
from apexrl.errors import BadRecordError, UsageError
from apexrl.publish import cards
from apexrl.publish.hostpaths import HostPaths
from apexrl.publish.redact import Redactor
from apexrl.publish.sessions import session_lines, session_path, to_jsonl
from apexrl.publish.stage import Plan, finish_with_card, new_plan, stage_text

LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".json", ".jsonl")
LOG_TAIL = 64 * 1024
SHARD_BYTES = 256 * 1024 * 1024  # traces: target size of a Parquet shard (file)


def _trace_schema(include_tokens: bool):
    import pyarrow as pa

    msg = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("reasoning_content", pa.string()),
            ("tool_calls", pa.string()),
            ("tool_call_id", pa.string()),
            ("name", pa.string()),
        ]
    )
    crit = pa.struct(
        [
            ("id", pa.string()),
            ("criterion", pa.string()),
            ("met", pa.bool_()),
            ("score", pa.float64()),
            ("reason", pa.string()),
            ("source", pa.string()),
        ]
    )
    log = pa.struct([("name", pa.string()), ("text", pa.string())])
    fields = [
        ("trial_id", pa.string()),
        ("task_id", pa.string()),
        ("domain", pa.string()),
        ("world_id", pa.string()),
        ("attempt", pa.int32()),
        ("status", pa.string()),
        ("error_class", pa.string()),
        ("graded", pa.bool_()),
        ("reward", pa.float64()),
        ("criteria_met", pa.int32()),
        ("criteria_total", pa.int32()),
        ("criteria", pa.list_(crit)),
        ("messages", pa.list_(msg)),
        ("turns", pa.int32()),
        ("tool_calls", pa.int32()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("duration_s", pa.float64()),
        ("logs", pa.list_(log)),
    ]
    if include_tokens:
        fields += [("token_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8()))]
    return pa.schema(fields)


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, list):  # content parts
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in v]
        return "".join(parts)
    return json.dumps(v, ensure_ascii=False)


def _messages(atif: dict) -> list[dict]:
    tito = (atif.get("extra") or {}).get("tito") or {}
    msgs = tito.get("messages")
    if not isinstance(msgs, list):
        from apexrl.tito.trajectory import _messages_from_atif

        msgs = _messages_from_atif(atif)
    out = []
    for m in msgs:
        if not isinstance(m, dict):
            continue
        calls = m.get("tool_calls")
        out.append(
            {
                "role": str(m.get("role") or ""),
                "content": _text(m.get("content")),
                "reasoning_content": _text(m.get("reasoning_content")),
                "tool_calls": calls if isinstance(calls, list) and calls else None,
                "tool_call_id": m.get("tool_call_id"),
                "name": m.get("name"),
            }
        )
    return out


def _column_messages(messages: list[dict]) -> list[dict]:
    """The messages column: tool calls as one JSON string (their shapes vary by model)."""
    return [
        {**m, "tool_calls": json.dumps(m["tool_calls"], ensure_ascii=False) if m["tool_calls"]
         else None}
        for m in messages
    ]  # fmt: skip


def _tokens(path: Path) -> tuple[list[int], list[int]]:
    """Token ids and loss mask from tokens.jsonl: a TITO trajectory (one JSON document,
    possibly pretty-printed), or JSON lines of per-turn records {kind, token_ids}."""
    ids: list[int] = []
    mask: list[int] = []
    text = read_regular(path).decode("utf-8", "replace")
    try:
        whole = json.loads(text)
        records = [whole] if isinstance(whole, dict) else []
    except json.JSONDecodeError:
        try:
            records = [json.loads(x) for x in text.splitlines() if x.strip()]
        except json.JSONDecodeError as e:
            raise BadRecordError(str(path), f"not JSON lines: {e}") from None
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if "prompt_ids" in rec:  # a whole TITO trajectory
            ids += rec["prompt_ids"]
            mask += [0] * len(rec["prompt_ids"])
            for t in rec.get("turns") or []:
                ids += t["token_ids"]
                mask += [1 if t.get("kind") == "sampled" else 0] * len(t["token_ids"])
        elif "token_ids" in rec:
            ids += rec["token_ids"]
            sampled = rec.get("kind") == "sampled" or "logprobs" in rec and rec["logprobs"]
            mask += [1 if sampled else 0] * len(rec["token_ids"])
    return ids, mask


_VERDICT_FILES = (
    "verifier/grading.json",
    "grading.json",
    "verdicts.json",
    "verifier/verdicts.json",
)


def _verdicts(row: dict, dirs: list[Path]) -> list[dict]:
    raw = row.get("verdicts")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = None
    if not isinstance(raw, list):
        raw = None
        found = [d / n for d in dirs for n in _VERDICT_FILES if is_regular(d / n)]
        if found:
            try:
                data = json.loads(read_regular(found[0]))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise BadRecordError(str(found[0]), f"not readable JSON: {e}") from None
            raw = data.get("verdicts") if isinstance(data, dict) else data
    out = []
    for v in raw or []:
        if not isinstance(v, dict):
            continue
        met = v.get("met", v.get("passed"))
        score = v.get("score")
        out.append(
            {
                "id": _text(v.get("verifier_id") or v.get("id") or v.get("criterion_id")),
                "criterion": _text(v.get("criteria") or v.get("criterion")),
                "met": bool(met) if met is not None else None,
                "score": float(score) if isinstance(score, int | float) else None,
                "reason": _text(v.get("rationale") or v.get("reason") or v.get("explanation")),
                "source": _text(v.get("source")),
            }
        )
    return out


# published in their own columns (or too big for a log column)
_TRIAL_FILES = {
    "trajectory.json", "atif.json", "tokens.jsonl", "tito.json", "verdicts.json", "grading.json",
}  # fmt: skip


def _logs(dirs: list[Path], red: Redactor, where: str, paths: HostPaths) -> list[dict]:
    """The tail of each log file, host paths rewritten, through the byte scanner (any
    encoding, archives whatever their name), then decoded for the text column."""
    out = []
    for d in dirs:
        if not d.is_dir():
            continue
        for p in regular_files(d):  # never a link the sandbox planted (/etc/shadow)
            if p.name in _TRIAL_FILES or not p.name.endswith(LOG_SUFFIXES):
                continue
            try:
                data = read_tail(p, LOG_TAIL)
            except OSError:  # swapped for a link since the walk: refused
                continue
            name = p.relative_to(d).as_posix()
            data = paths.bytes_text(data)
            out.append({"name": name, "text": log_text(red.bytes_text(data, f"{where} {name}"))})
    return out


def log_text(data: bytes) -> str:
    """A (redacted) log as the text column shows it: UTF-16 (by its BOM, or by where its
    NUL bytes fall: a tail may start mid-character) or UTF-8. Archives and other binary
    data are scanned but not published: the column names them only."""
    if data[:4] == b"PK\x03\x04" or data[:2] == b"\x1f\x8b" or data[257:262] == b"ustar":
        return f"[an archive of {len(data)} bytes: not published]"
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if data.startswith(bom):
            return data[2:].decode(codec, "replace")
    if b"\0" in data:
        even, odd = data[0::2].count(0), data[1::2].count(0)
        if odd > len(data) // 4 and even * 8 < odd:
            return data[: len(data) // 2 * 2].decode("utf-16-le", "replace")
        if even > len(data) // 4 and odd * 8 < even:
            return data[1 : 1 + (len(data) - 1) // 2 * 2].decode("utf-16-le", "replace")
        return f"[binary data of {len(data)} bytes: not published]"
    return data.decode("utf-8", "replace")


def _trial_id(row: dict, traj_root: Path) -> str:
    if row.get("trial_id"):
        return str(row["trial_id"])
    task, attempt = row.get("task_id"), row.get("attempt", 0)
    for cand in (f"{task}.a{attempt}", f"{task}__{attempt}", f"{task}.{attempt}"):
        if (traj_root / cand).is_dir():
            return cand
    return f"{task}.a{attempt}"


def _result_rows(run_dir: Path) -> list[dict]:
    """results.parquet; for a run killed before compaction, the results.jsonl journal
    (last row of a trial wins)."""
    import pyarrow.parquet as pq

    results = run_dir / "results.parquet"
    if results.is_file():
        return pq.read_table(results).to_pylist()
    journal = run_dir / "results.jsonl"
    if journal.is_file():
        rows: dict[str, dict] = {}
        for k, line in enumerate(journal.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill: the trial reruns on resume
            rows[str(row.get("trial_id") or k)] = row
        return list(rows.values())
    raise UsageError(
        f"{run_dir}: no results.parquet", hint="pass the folder written by `apexrl eval run`"
    )


def _plan_ids(run: dict) -> set[str] | None:
    """The trial ids run.json planned; None for a run that recorded no plan."""
    from apexrl.eval.models import RunPlan

    raw = run.get("plan")
    if not isinstance(raw, dict):
        return None
    try:
        return set(RunPlan.model_validate(raw).trial_ids())
    except ValueError as e:
        raise BadRecordError("run.json", f"its plan is not readable: {e}") from None


def _graded(row: dict) -> bool:
    """False for a trial that ended in an infrastructure error or a broken task
    (apexrl.eval.infra): its
    reward is no score, and a Hub user averaging the column must not count it as 0."""
    from apexrl.eval.infra import is_ungraded

    return not is_ungraded(row.get("status"), row.get("error_class"))


def trace_rows(
    run_dir: Path,
    include_tokens: bool,
    red: Redactor,
    paths: HostPaths | None = None,
    planned: set[str] | None = None,
) -> Iterator[dict]:
    """One row per trial. `paths`: host paths rewritten before redaction (hostpaths);
    `planned`: the run's planned trial ids (others are left out), None for all."""
    paths = paths or HostPaths(run_dir)
    traj_root = run_dir / "trajectories"
    for n, row in enumerate(_result_rows(run_dir)):
        tid = _trial_id(row, traj_root)
        if planned is not None and tid not in planned:
            continue  # a trial of an earlier plan (--force): not this run's
        graded = _graded(row)
        where = f"data row {n} (trial {tid})"
        tdir = traj_root / tid
        messages: list[dict] = []
        tj = tdir / "trajectory.json"
        if is_regular(tj):
            try:
                messages = _messages(json.loads(read_regular(tj)))
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
                raise BadRecordError(str(tj), f"not a readable ATIF trajectory: {e}") from None
        before = red.total
        messages = red.obj(paths.obj(messages), where)
        spelled = red.total > before  # the token ids spell the messages, a secret included
        header = red.obj(
            {"id": tid, "name": f"{row.get('task_id')} attempt {row.get('attempt')}",
             "task_id": row.get("task_id"), "attempt": row.get("attempt"),
             "status": row.get("status"), "graded": graded,
             "reward": row.get("reward") if graded else None},
            where,
        )  # fmt: skip
        out = {
            "trial_id": tid,
            "task_id": row.get("task_id"),
            "domain": row.get("domain"),
            "world_id": row.get("world_id"),
            "attempt": row.get("attempt"),
            "status": row.get("status"),
            "error_class": row.get("error_class"),
            "graded": graded,
            # an ungraded trial has no reward: null, never a 0 that averages as a failure
            "reward": row.get("reward") if graded else None,
            "criteria_met": row.get("criteria_met") if graded else None,
            "criteria_total": row.get("criteria_total"),
            "criteria": _verdicts(row, [tdir, run_dir / "logs" / tid]),
            "messages": _column_messages(messages),
            "turns": row.get("turns"),
            "tool_calls": row.get("tool_calls"),
            "tokens_in": row.get("tokens_in"),
            "tokens_out": row.get("tokens_out"),
            "duration_s": row.get("duration_s"),
            "logs": _logs([tdir, run_dir / "logs" / tid], red, where, paths),
        }
        out = red.obj(paths.obj(out), where)
        if include_tokens:
            tok = tdir / "tokens.jsonl"
            ids, mask = _tokens(tok) if is_regular(tok) and not spelled else ([], [])
            if spelled:
                red.note(where, "token-ids-withheld")
            out["token_ids"], out["loss_mask"] = ids, mask
        yield out, header, messages


def _row_bytes(row: dict) -> int:
    return (
        len(json.dumps(row.get("messages")))
        + sum(len(x["text"]) for x in row.get("logs") or [])
        + 4 * len(row.get("token_ids") or [])
    )


def stage_traces(
    run_dir: Path,
    *,
    repo: str,
    stage_dir: Path,
    include_tokens: bool = False,
    private: bool = True,
    license: str | None = None,
    redactor: Redactor | None = None,
    shard_bytes: int = SHARD_BYTES,
    row_group_bytes: int = ROW_GROUP_BYTES,
) -> Plan:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} does not exist")
    plan = new_plan(repo, "dataset", private=private, stage_dir=stage_dir, redactor=redactor)
    schema = _trace_schema(include_tokens)
    data_dir = plan.stage_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    raw_run = cards.read_json(run_dir / "run.json")
    paths = HostPaths.for_run(run_dir, raw_run)  # no host path goes out (hostpaths)
    run = plan.redactor.obj(paths.obj(raw_run), "run.json")
    summary = plan.redactor.obj(
        paths.obj(cards.read_json(run_dir / "summary.json")), "summary.json"
    )
    model = run.get("model")
    model = model.get("name") if isinstance(model, dict) else model
    entries: list[tuple[str, Path]] = []
    tmp_names: list[Path] = []

    def flush(group: list[dict]) -> None:
        path = data_dir / f".part-{len(tmp_names):05d}.parquet"
        write_parquet(path, group, schema, row_group_bytes=row_group_bytes)
        tmp_names.append(path)

    group: list[dict] = []
    size = n_rows = 0
    ungraded: dict[str, int] = {}  # infrastructure errors: class -> rows
    task_errors: dict[str, int] = {}  # broken tasks
    sessions: set[str] = set()
    planned = _plan_ids(raw_run)
    traj_root = run_dir / "trajectories"
    outside = (
        sum(1 for r in _result_rows(run_dir) if _trial_id(r, traj_root) not in planned)
        if planned is not None
        else 0
    )
    rows = trace_rows(run_dir, include_tokens, plan.redactor, paths, planned)
    for row, header, messages in rows:
        if not row["graded"]:
            from apexrl.eval.infra import is_task_error

            cls = str(row.get("error_class") or row.get("status"))
            by = (
                task_errors
                if is_task_error(row.get("status"), row.get("error_class"))
                else ungraded
            )
            by[cls] = by.get(cls, 0) + 1
        rel = session_path(row["task_id"], row["trial_id"])
        while rel in sessions:  # two trial ids that differ only in unsafe characters
            rel = rel.removesuffix(".jsonl") + "_.jsonl"
        sessions.add(rel)
        lines = session_lines(header, messages, model if isinstance(model, str) else None)
        entries.append((rel, stage_text(plan, rel, to_jsonl(lines))))
        b = _row_bytes(row)
        if group and size + b > shard_bytes:
            flush(group)
            group, size = [], 0
        group.append(row)
        size += b
        n_rows += 1
    flush(group)
    shards = []
    for i, p in enumerate(tmp_names):
        name = f"data/train-{i:05d}-of-{len(tmp_names):05d}.parquet"
        final = plan.stage_dir / name
        p.replace(final)
        shards.append(name)
        entries.append((name, final))
    for name, obj in (("run.json", run), ("summary.json", summary)):
        if obj:
            text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            entries.append((name, stage_text(plan, name, text.encode())))
    card = cards.traces_card(
        repo=repo,
        run=run,
        summary=summary,
        n_rows=n_rows,
        ungraded=ungraded,
        task_errors=task_errors,
        outside_plan=outside,
        shards=shards,
        include_tokens=include_tokens,
        license=license,
        n_redactions=plan.redactor.total,
    )
    return finish_with_card(plan, entries, card)
