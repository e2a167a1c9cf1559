"""A task selection read from stdin (`-`): NDJSON records or a path per line.

    apexrl tasks ls DS --json | jq -c 'select(.domain == "law")' | apexrl eval run --tasks - ...

Each line is either a JSON record naming one task, as `tasks ls` and `tasks convert`
write them (`shard` + `row`: one row of a dataset shard; `task_dir`: one task folder),
or a path: a task folder, a folder of task folders, or a dataset (every task in it).
Relative paths resolve against the working directory. Exactly the selected tasks are
used, in the order given; naming one task twice is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from apexrl.errors import BadRecordError, UsageError


@dataclass(frozen=True)
class TaskSource:
    """One task: a task folder, or row `row` (0-based, within the file) of a shard."""

    task_dir: Path | None = None
    shard: Path | None = None
    row: int | None = None
    where: str = ""  # stdin line, for errors

    @property
    def key(self) -> tuple:
        return (str(self.task_dir),) if self.task_dir else (str(self.shard), self.row)


def read_lines(stream) -> list[str]:
    """Non-blank lines of stdin; a terminal on stdin is a usage error (nothing piped)."""
    if stream.isatty():
        raise UsageError(
            "- reads tasks from stdin, but nothing is piped",
            hint="pipe `apexrl tasks ls DATASET --json` records or paths, one per line",
        )
    return [line for line in stream.read().splitlines() if line.strip()]


def parse_selection(lines: Iterable[str]) -> list[TaskSource]:
    out: list[TaskSource] = []
    seen: dict[tuple, str] = {}
    for i, line in enumerate(lines, 1):
        where = f"stdin:{i}"
        text = line.strip()
        for src in _sources(text, where) if text.startswith("{") else _expand(Path(text), where):
            if src.key in seen:
                raise BadRecordError(where, f"task selected twice (first at {seen[src.key]})")
            seen[src.key] = where
            out.append(src)
    if not out:
        raise UsageError("no tasks on stdin", hint="pipe records of `apexrl tasks ls --json`")
    return out


def _sources(text: str, where: str) -> list[TaskSource]:
    try:
        rec = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise BadRecordError(where, f"not a JSON record: {e}") from None
    if not isinstance(rec, dict):
        raise BadRecordError(where, "not a JSON object")
    if rec.get("shard") is not None and rec.get("row") is not None:
        shard = Path(str(rec["shard"])).expanduser().absolute()
        if not shard.is_file() or not isinstance(rec["row"], int) or rec["row"] < 0:
            raise BadRecordError(where, f"shard {shard} (row {rec['row']!r}) does not exist")
        return [TaskSource(shard=shard, row=rec["row"], where=where)]
    if rec.get("task_dir") is not None:
        d = Path(str(rec["task_dir"])).expanduser().absolute()
        if not (d / "task.toml").is_file():
            raise BadRecordError(where, f"task folder {d} has no task.toml")
        return [TaskSource(task_dir=d, where=where)]
    raise BadRecordError(
        where,
        "the record says not where its task is (no shard + row, no task_dir)",
        hint="pipe records of `apexrl tasks ls` or `tasks convert` (this apexrl or later)",
    )


def _expand(path: Path, where: str) -> list[TaskSource]:
    """A path line: every task of a task folder, folder of task folders or dataset."""
    from apexrl.tasks.dataset import iter_rows, resolve_files
    from apexrl.tasks.pack import find_task_dirs

    path = path.expanduser().absolute()
    if not path.exists():
        raise BadRecordError(where, f"{path} does not exist")
    dirs = find_task_dirs(path) if path.is_dir() else []
    if dirs:
        return [TaskSource(task_dir=d, where=where) for d in dirs]
    out = []
    for shard in resolve_files(path):
        for where_row, _ in iter_rows(shard, only=("path",)):
            out.append(TaskSource(shard=shard, row=int(where_row.rsplit("#", 1)[1]), where=where))
    return out


def read_rows(sources: list[TaskSource], *, with_binary: bool = True) -> dict[tuple, dict]:
    """The dataset rows the selection names, by source key (each shard read once)."""
    from apexrl.tasks.dataset import iter_rows

    wanted: dict[Path, set[int]] = {}
    for s in sources:
        if s.shard is not None:
            wanted.setdefault(s.shard, set()).add(int(s.row))
    rows: dict[tuple, dict] = {}
    for shard, idx in wanted.items():
        for where, row in iter_rows(shard, with_binary=with_binary):
            n = int(where.rsplit("#", 1)[1])
            if n in idx:
                rows[(str(shard), n)] = row
        missing = idx - {k[1] for k in rows if k[0] == str(shard)}
        if missing:
            raise BadRecordError(str(shard), f"has no row {min(missing)}")
    return rows


def materialize(sources: list[TaskSource], out: Path, *, copy_dirs: bool = False) -> list[Path]:
    """Task folders of the selection, in its order: folders as they are (copied into `out`
    with `copy_dirs`), dataset rows unpacked (safely, as `tasks unpack` does) into `out`.
    Two tasks of one name are refused."""
    from apexrl.tasks.unpack import unpack_row

    rows = read_rows(sources)
    dirs: list[Path] = []
    names: dict[str, str] = {}
    for s in sources:
        if s.task_dir is not None and copy_dirs:
            import shutil

            d = Path(out) / s.task_dir.name
            if not d.exists():
                shutil.copytree(s.task_dir, d, symlinks=True)
        elif s.task_dir is not None:
            d = s.task_dir
        else:
            row = rows[s.key]
            where = f"{s.shard.name}#{s.row}"
            Path(out).mkdir(parents=True, exist_ok=True)
            unpack_row(row.get("path"), row.get("task_binary"), out, where)
            d = Path(out) / str(row["path"])
        if d.name in names:
            raise BadRecordError(s.where, f"a second task named {d.name!r} ({names[d.name]})")
        names[d.name] = s.where
        dirs.append(d)
    return dirs
