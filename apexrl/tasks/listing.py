"""`tasks ls`: the tasks of a dataset, a folder of task dirs or a selection, each with
where it is (absolute paths), as TaskListing records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from apexrl.artifacts.models import TaskListing
from apexrl.tasks.selection import TaskSource


def list_tasks(source: str | list[TaskSource]) -> Iterator[TaskListing]:
    if isinstance(source, list):
        yield from _list_selection(source)
        return
    from apexrl.tasks.dataset import HF_PREFIX, iter_rows, resolve_files
    from apexrl.tasks.pack import find_task_dirs

    path = Path(source).expanduser()
    if not source.startswith(HF_PREFIX) and path.is_dir():
        dirs = find_task_dirs(path)
        if dirs:
            for d in dirs:
                yield _from_dir(d)
            return
    dataset = source if source.startswith(HF_PREFIX) else str(path.absolute())
    for shard in resolve_files(source):
        for where, row in iter_rows(shard):
            yield _from_row(row, shard, int(where.rsplit("#", 1)[1]), dataset)


def _from_row(row: dict, shard: Path, index: int, dataset: str | None) -> TaskListing:
    from apexrl.tasks.dataset import row_metadata

    meta = row_metadata(row).model_dump(exclude={"schema_version"})
    return TaskListing(**meta, dataset=dataset, shard=str(shard.absolute()), row=index)


def _from_dir(d: Path) -> TaskListing:
    from apexrl.tasks.pack import packed_task

    row = packed_task(d).row.model_dump(exclude={"schema_version"})
    return TaskListing(**row, task_dir=str(d.absolute()))


def _list_selection(sources: list[TaskSource]) -> Iterator[TaskListing]:
    from apexrl.tasks.selection import read_rows

    rows = read_rows(sources)
    for s in sources:
        if s.task_dir is not None:
            yield _from_dir(s.task_dir)
        else:
            yield _from_row(rows[s.key], s.shard, int(s.row), None)
