"""What a trial changed in its SQLite databases, as rows: the evidence of a `.db` criterion.

archipelago grades a criterion whose expected file type is "Database Files (.db)" with a
judge that explores the row diff through tools (apexrl.grading.db_judge); a `.db` file
shown among other files reads as the same row diff in text (diff_text).

The databases are sandbox-written: each is copied (no link followed, at most
MAX_DB_BYTES) into a private folder and opened read-only there; identifiers from its
catalog are quoted, values only ever bound; every query runs under a deadline.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

MAX_DB_BYTES = 512 * 1024 * 1024  # of one database copied for the diff
MAX_ROWS_KEPT = 100  # row bodies kept per table and change type (counts stay exact)
MAX_ROWS_SEARCHED = 200_000  # rows of one kind search_rows reads past the kept ones
QUERY_DEADLINE_S = 60.0  # of all the queries over one pair of databases
CHANGE_TYPES = ("added", "deleted", "modified")


@dataclass
class TableDiff:
    columns: list[str] = field(default_factory=list)
    rows: dict[str, list] = field(default_factory=lambda: {k: [] for k in CHANGE_TYPES})
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHANGE_TYPES, 0))
    error: str = ""

    @property
    def changed(self) -> bool:
        return any(self.counts.values()) or bool(self.error)

    def truncated(self, kind: str) -> bool:
        return self.counts[kind] > len(self.rows[kind])


@dataclass
class DbDiff:
    """Tables by the name the judge uses (bare for one database, `db:table` for several)."""

    tables: dict[str, TableDiff] = field(default_factory=dict)
    sources: dict[str, tuple[Path | None, Path | None]] = field(default_factory=dict)
    _where: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (db, table)

    def totals(self) -> dict[str, int]:
        return {k: sum(t.counts[k] for t in self.tables.values()) for k in CHANGE_TYPES}


def diff_databases(pairs: list[tuple[str, Path | None, Path | None]], workdir: Path) -> DbDiff:
    """The row diff of each (shown path, before, after) database pair; either side may be
    missing (a created or deleted database). Copies go under `workdir`."""
    out = DbDiff()
    for n, (shown, before, after) in enumerate(pairs):
        copies = tuple(
            _copy(p, workdir / f"{n}-{side}.db") for side, p in (("a", before), ("b", after))
        )
        out.sources[shown] = copies  # type: ignore[assignment]
        for table, diff in _diff_pair(*copies).items():
            name = table if len(pairs) == 1 else f"{shown}:{table}"
            out.tables[name] = diff
            out._where[name] = (shown, table)
    return out


def _copy(src: Path | None, dst: Path) -> Path | None:
    from apexrl.artifacts.nofollow import open_nofollow

    if src is None:
        return None
    with open_nofollow(src) as fh, open(dst, "wb") as out:
        copied = 0
        while chunk := fh.read(1 << 20):
            copied += len(chunk)
            if copied > MAX_DB_BYTES:
                raise ValueError(f"{src.name}: over {MAX_DB_BYTES // (1 << 20)} MiB, not diffed")
            out.write(chunk)
    return dst


def _connect(before: Path | None, after: Path | None) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    deadline = time.monotonic() + QUERY_DEADLINE_S
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    for alias, path in (("a", before), ("b", after)):
        if path is not None:
            conn.execute(f"ATTACH DATABASE ? AS {alias}", (f"file:{path}?mode=ro&immutable=1",))
    conn.execute("PRAGMA query_only=ON")
    return conn


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables(conn: sqlite3.Connection, alias: str) -> list[str]:
    rows = conn.execute(
        f"SELECT name FROM {alias}.sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
    )
    return [r[0] for r in rows]


def _columns(conn: sqlite3.Connection, alias: str, table: str) -> tuple[list[str], list[str]]:
    info = conn.execute(f"PRAGMA {alias}.table_info({_q(table)})").fetchall()
    cols = [r[1] for r in info]
    pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5]]
    return cols, pk


def _diff_pair(
    before: Path | None, after: Path | None, keep: int = MAX_ROWS_KEPT
) -> dict[str, TableDiff]:
    conn = _connect(before, after)
    try:
        old = set(_tables(conn, "a")) if before is not None else set()
        new = set(_tables(conn, "b")) if after is not None else set()
        out: dict[str, TableDiff] = {}
        for table in sorted(old | new):
            try:
                out[table] = _diff_table(conn, table, table in old, table in new, keep)
            except sqlite3.Error as e:
                out[table] = TableDiff(error=f"could not be diffed: {e}")
        return out
    finally:
        conn.close()


def _diff_table(
    conn: sqlite3.Connection, table: str, in_a: bool, in_b: bool, keep: int
) -> TableDiff:
    d = TableDiff()
    cols_a, pk_a = _columns(conn, "a", table) if in_a else ([], [])
    cols_b, pk_b = _columns(conn, "b", table) if in_b else ([], [])
    d.columns = cols_b or cols_a
    if not (in_a and in_b) or cols_a != cols_b:
        # a table created, dropped or reshaped: every row of each side is added/deleted
        for kind, alias, present in (("deleted", "a", in_a), ("added", "b", in_b)):
            if present:
                sql = f"SELECT * FROM {alias}.{_q(table)}"
                d.counts[kind], d.rows[kind] = _collect(
                    conn, sql, cols_a if alias == "a" else cols_b, keep
                )
        return d
    t = _q(table)
    added = f"SELECT * FROM b.{t} EXCEPT SELECT * FROM a.{t}"
    deleted = f"SELECT * FROM a.{t} EXCEPT SELECT * FROM b.{t}"
    if not pk_a or pk_a != pk_b:
        d.counts["added"], d.rows["added"] = _collect(conn, added, cols_b, keep)
        d.counts["deleted"], d.rows["deleted"] = _collect(conn, deleted, cols_a, keep)
        return d
    # with a primary key, a row whose key is on both sides but whose values differ is modified
    keys = ", ".join(_q(c) for c in pk_a)
    on = " AND ".join(f"x.{_q(c)} IS y.{_q(c)}" for c in pk_a)
    mod = f"SELECT {keys} FROM ({added}) x WHERE EXISTS (SELECT 1 FROM ({deleted}) y WHERE {on})"
    only_new = (
        f"SELECT * FROM ({added}) x WHERE NOT EXISTS (SELECT 1 FROM ({deleted}) y WHERE {on})"
    )
    only_old = (
        f"SELECT * FROM ({deleted}) x WHERE NOT EXISTS (SELECT 1 FROM ({added}) y WHERE {on})"
    )
    d.counts["added"], d.rows["added"] = _collect(conn, only_new, cols_b, keep)
    d.counts["deleted"], d.rows["deleted"] = _collect(conn, only_old, cols_a, keep)
    d.counts["modified"], key_rows = _collect(conn, mod, pk_a, keep)
    match = " AND ".join(f"{_q(c)} IS ?" for c in pk_a)
    for key in key_rows:
        args = [key[c] for c in pk_a]
        pair = {}
        for side, alias, cols in (("before", "a", cols_a), ("after", "b", cols_b)):
            row = conn.execute(f"SELECT * FROM {alias}.{t} WHERE {match}", args).fetchone()
            pair[side] = dict(zip(cols, row, strict=True)) if row else {}
        d.rows["modified"].append(pair)
    return d


def _collect(
    conn: sqlite3.Connection, sql: str, cols: list[str], keep: int
) -> tuple[int, list[dict]]:
    """(count, the first `keep` rows as column -> value)."""
    n, kept = 0, []
    for row in conn.execute(sql):
        n += 1
        if len(kept) < keep:
            kept.append({c: _value(v) for c, v in zip(cols, row, strict=False)})
    return n, kept


def _value(v):
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return v


# --- what the judge reads ----------------------------------------------------------------


def summary(diff: DbDiff) -> str:
    """The judge's first view: totals, then each changed table's counts."""
    tot = diff.totals()
    lines = [
        f"Rows added: {tot['added']}, deleted: {tot['deleted']}, modified: {tot['modified']}",
        f"Databases: {', '.join(diff.sources) or '(none)'}",
    ]
    changed = [(n, t) for n, t in sorted(diff.tables.items()) if t.changed]
    if changed:
        lines.append(f"Tables with changes ({len(changed)}):")
    for name, t in changed:
        if t.error:
            lines.append(f"  {name}: {t.error}")
            continue
        c = t.counts
        line = f"  {name}: {c['added']} added, {c['deleted']} deleted, {c['modified']} modified"
        if any(t.truncated(k) for k in CHANGE_TYPES):
            line += f" (first {MAX_ROWS_KEPT} rows of each kind kept: search_rows searches all)"
        lines.append(line)
    unchanged = len(diff.tables) - len(changed)
    if unchanged:
        lines.append(f"Tables without changes: {unchanged}")
    return "\n".join(lines)


def diff_text(diff: DbDiff, limit: int = 200_000) -> str:
    """The row diff as text (a `.db` file among other files): each changed table's kept
    rows, one JSON object per line, prefixed + (added), - (deleted), ~ (modified)."""
    out = [summary(diff)]
    for name, t in sorted(diff.tables.items()):
        if not t.changed or t.error:
            continue
        out.append(f"--- table {name} ---")
        for kind, mark in (("added", "+"), ("deleted", "-"), ("modified", "~")):
            out += [f"{mark} {json.dumps(r, default=str)}" for r in t.rows[kind]]
    text = "\n".join(out)
    return text if len(text) <= limit else text[:limit] + "\n[... more rows not shown ...]"


MAX_TOOL_REPLY = 10_000  # characters of one tool result
DEFAULT_ROWS = 20
MAX_SEARCH = 50


def _tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    """One tool in the OpenAI function-calling form the judge is sent."""
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


_TABLE = {"table_name": {"type": "string"}}
_CHANGE = {"change_type": {"type": "string", "enum": list(CHANGE_TYPES)}}
TOOLS = [
    _tool(
        "inspect_table",
        "A changed table's columns and its counts of added, deleted and modified rows.",
        _TABLE,
        ["table_name"],
    ),
    _tool(
        "get_rows",
        "A page of a table's added, deleted or modified rows (a modified row as its before "
        "and after values). Only the first 100 of each kind are kept.",
        {**_TABLE, **_CHANGE, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
        ["table_name", "change_type"],
    ),
    _tool(
        "search_rows",
        "Every added, deleted or modified row of a table containing a text (any column, "
        "case-insensitive), over all its changed rows.",
        {**_TABLE, **_CHANGE, "contains": {"type": "string"}, "limit": {"type": "integer"}},
        ["table_name", "change_type", "contains"],
    ),
    _tool(
        "submit_verdict",
        "Your verdict on the criterion; ends the grading.",
        {"result": {"type": "integer", "enum": [0, 1]}, "reason": {"type": "string"}},
        ["result", "reason"],
    ),
]


def run_tool(diff: DbDiff, name: str, args: dict) -> str:
    """A tool's reply (JSON text, at most MAX_TOOL_REPLY characters). Arguments come from
    the judge: names are looked up, numbers clamped, nothing is executed."""
    handler = {"inspect_table": _inspect, "get_rows": _get_rows, "search_rows": _search}.get(name)
    if handler is None:
        reply = {
            "error": f"unknown tool {name!r}: inspect_table, get_rows, search_rows, submit_verdict"
        }
    else:
        table = diff.tables.get(str(args.get("table_name", "")))
        if table is None:
            known = sorted(n for n, t in diff.tables.items() if t.changed)[:50]
            reply = {"error": f"no table {args.get('table_name')!r}", "tables_with_changes": known}
        else:
            try:
                reply = handler(diff, str(args["table_name"]), table, args)
            except (sqlite3.Error, ValueError, TypeError, KeyError) as e:
                reply = {"error": f"{type(e).__name__}: {e}"}
    text = json.dumps(reply, default=str)
    return text if len(text) <= MAX_TOOL_REPLY else text[:MAX_TOOL_REPLY] + " [... cut]"


def _kind(args: dict) -> str:
    kind = str(args.get("change_type", ""))
    if kind not in CHANGE_TYPES:
        raise ValueError(f"change_type must be one of {', '.join(CHANGE_TYPES)}")
    return kind


def _int(v, default: int, lo: int, hi: int) -> int:
    try:
        return max(lo, min(int(v), hi))
    except (TypeError, ValueError):
        return default


def _inspect(diff: DbDiff, name: str, t: TableDiff, args: dict) -> dict:
    return {
        "table_name": name,
        "columns": t.columns,
        **{f"rows_{k}": t.counts[k] for k in CHANGE_TYPES},
        "rows_kept_per_kind": MAX_ROWS_KEPT,
        **({"error": t.error} if t.error else {}),
    }


def _get_rows(diff: DbDiff, name: str, t: TableDiff, args: dict) -> dict:
    kind = _kind(args)
    offset = _int(args.get("offset", 0), 0, 0, MAX_ROWS_KEPT)
    limit = _int(args.get("limit", DEFAULT_ROWS), DEFAULT_ROWS, 1, MAX_ROWS_KEPT)
    page = t.rows[kind][offset : offset + limit]
    return {
        "table_name": name,
        "change_type": kind,
        "total": t.counts[kind],
        "offset": offset,
        "rows": page,
    }


def _search(diff: DbDiff, name: str, t: TableDiff, args: dict) -> dict:
    kind = _kind(args)
    needle = str(args.get("contains", "")).lower()
    if not needle:
        raise ValueError("contains is empty")
    limit = _int(args.get("limit", DEFAULT_ROWS), DEFAULT_ROWS, 1, MAX_SEARCH)
    rows = t.rows[kind]
    if t.truncated(kind):  # past the kept rows: that table's diff again, read further
        db, table = diff._where[name]
        again = _diff_pair(*diff.sources[db], keep=MAX_ROWS_SEARCHED).get(table)
        rows = again.rows[kind] if again is not None else rows
    hits = [r for r in rows if needle in json.dumps(r, default=str).lower()][:limit]
    return {"table_name": name, "change_type": kind, "contains": needle, "matches": hits}


def private_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="apexrl-dbdiff-")
