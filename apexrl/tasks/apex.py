"""Reading expert task data in the APEX-Agents layout.

SRC/tasks_and_rubrics.json, SRC/world_descriptions.json,
SRC/world_files_zipped/<world_id>.zip, SRC/task_files/<task_id>/..., SRC/gold_files/<task_id>/...
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from apexrl.artifacts.file_types import label_problem
from apexrl.artifacts.jsonl import read_json_file
from apexrl.artifacts.models import SNAPSHOT_ID, ApexTask, ApexWorld, DataTerms
from apexrl.errors import BadRecordError, UsageError

TASKS_FILE = "tasks_and_rubrics.json"
WORLDS_FILE = "world_descriptions.json"


@dataclass
class ApexSource:
    root: Path
    tasks: list[tuple[str, ApexTask]] = field(default_factory=list)  # (where, task)
    worlds: dict[str, ApexWorld] = field(default_factory=dict)
    bad: list[BadRecordError] = field(default_factory=list)
    terms: DataTerms | None = None  # the source's licence and terms (apexrl.tasks.terms)

    def world_zip(self, world_id: str) -> Path:
        return self.root / "world_files_zipped" / f"{world_id}.zip"

    def task_files_dir(self, task_id: str) -> Path:
        return self.root / "task_files" / task_id

    def gold_files_dir(self, task_id: str) -> Path:
        return self.root / "gold_files" / task_id


def load_source(root: Path, *, strict: bool = False) -> ApexSource:
    """Parse and check every record. Bad records are collected (or raised with strict)."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory", hint="pass the APEX-layout data folder")
    tasks_path = root / TASKS_FILE
    if not tasks_path.is_file():
        raise UsageError(
            f"{tasks_path} not found",
            hint=f"SRC must hold {TASKS_FILE} (`apexrl tasks example -o DIR` shows the layout)",
        )
    from apexrl.tasks.terms import card_terms

    src = ApexSource(root=root, terms=card_terms(root))
    src.worlds = _load_worlds(root / WORLDS_FILE)
    raw = read_json_file(tasks_path)
    if not isinstance(raw, list):
        raise BadRecordError(str(tasks_path), "expected a JSON list of task records")
    seen: dict[str, str] = {}
    for index, obj in enumerate(raw):
        where = f"{TASKS_FILE}[{index}]"
        try:
            task = _parse_task(obj, where)
            where = f"{where} ({task.task_id})"
            _check_task(src, task, where, seen)
        except BadRecordError as e:
            if strict:
                raise
            src.bad.append(e)
            continue
        seen[task.task_id] = where
        src.tasks.append((where, task))
    return src


def _load_worlds(path: Path) -> dict[str, ApexWorld]:
    if not path.is_file():
        return {}
    raw = read_json_file(path)
    if not isinstance(raw, list):
        raise BadRecordError(str(path), "expected a JSON list of world records")
    worlds: dict[str, ApexWorld] = {}
    for index, obj in enumerate(raw):
        try:
            world = ApexWorld.model_validate(obj)
        except ValidationError as e:
            raise BadRecordError(f"{WORLDS_FILE}[{index}]", _describe(e)) from None
        worlds[world.world_id] = world
    return worlds


def _parse_task(obj: object, where: str) -> ApexTask:
    if isinstance(obj, dict) and obj.get("task_id"):
        where = f"{where} ({obj['task_id']})"
    try:
        return ApexTask.model_validate(obj)
    except ValidationError as e:
        raise BadRecordError(where, _describe(e), hint="fix the record or drop it") from None


@functools.lru_cache(maxsize=4096)
def _zip_problem(path: str, size: int, mtime_ns: int) -> str | None:
    """Why a world zip does not open (its central directory; once per file version)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            if not zf.infolist():
                return "is empty"
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        return f"is not a readable zip ({e})"
    return None


def _check_task(src: ApexSource, task: ApexTask, where: str, seen: dict[str, str]) -> None:
    if task.task_id in seen:
        raise BadRecordError(
            where,
            f"duplicate task_id (first seen at {seen[task.task_id]})",
            hint="task ids must be unique",
        )
    for i, c in enumerate(task.rubric):
        problem = label_problem(c.model_dump())
        if problem:
            raise BadRecordError(
                f"{where}.rubric[{i}] ({c.verifier_id})",
                problem,
                hint="fix the criterion's expected_file_type, or drop the task",
            )
    if not src.world_zip(task.world_id).is_file():
        raise BadRecordError(
            where,
            f"world zip world_files_zipped/{task.world_id}.zip is missing",
            hint="add the world's zip or drop the task",
        )
    zpath = src.world_zip(task.world_id)
    st = zpath.stat()
    problem = _zip_problem(str(zpath), st.st_size, st.st_mtime_ns)
    if problem:
        raise BadRecordError(
            where,
            f"world zip world_files_zipped/{task.world_id}.zip {problem}",
            hint="replace it with the world's zip, or drop the task",
        )
    files_dir = src.task_files_dir(task.task_id)
    for name in input_file_names(task):
        if not _inside(files_dir, name).is_file():
            raise BadRecordError(
                where,
                f"field 'task_input_files' names {name!r}, not found under "
                f"task_files/{task.task_id}/",
                hint="add the file or fix task_input_files",
            )
    if task.task_input_files and not files_dir.is_dir():
        raise BadRecordError(
            where,
            f"field 'task_input_files' is {task.task_input_files!r} but "
            f"task_files/{task.task_id}/ is missing",
            hint="add the task's files folder or set task_input_files to null",
        )
    if task.gold_response_type == "file" and not src.gold_files_dir(task.task_id).is_dir():
        raise BadRecordError(
            where,
            f"field 'gold_response_type' is 'file' but gold_files/{task.task_id}/ is missing",
            hint="add the golden files or set gold_response_type to 'text'",
        )


def input_file_names(task: ApexTask) -> list[str]:
    """The file names task_input_files lists, if it lists any.

    The published data holds null or an opaque snapshot id ("snap_<hex>"): only its
    truthiness matters and the files are the folder task_files/<task_id>/. Booleans
    name nothing either. A list, or a comma/newline separated string, names files."""
    value = task.task_input_files
    if not value or isinstance(value, bool):
        return []
    if isinstance(value, str):
        if SNAPSHOT_ID.match(value.strip()):
            return []
        value = [p for chunk in value.splitlines() for p in chunk.split(",")]
    return [p.strip() for p in value if isinstance(p, str) and p.strip()]


def _inside(base: Path, name: str) -> Path:
    """Resolve `name` under `base`, refusing anything that would leave it."""
    candidate = (base / name).resolve()
    if not candidate.is_relative_to(base.resolve()):
        raise BadRecordError(str(base), f"path {name!r} escapes its folder")
    return candidate


def _describe(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "<record>"
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"field {loc!r}: {msg}")
    return "; ".join(parts)
