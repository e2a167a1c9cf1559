"""JSONL (NDJSON) reading and writing with orjson. `-` means stdin/stdout."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from apexrl.artifacts.atomic import atomic_path
from apexrl.errors import BadRecordError


def dumps(obj: BaseModel | dict) -> bytes:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    return orjson.dumps(obj)


def read_json_file(path: Path) -> object:
    """Parse one JSON file; a syntax error names the file, line and column."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRecordError(
            str(path), f"not UTF-8 text (byte {e.start})", hint="re-encode the file as UTF-8"
        ) from None
    import json  # stdlib json reports line/column; orjson only a char offset

    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BadRecordError(
            f"{path}:{e.lineno}:{e.colno}", f"invalid JSON: {e.msg}", hint="fix the JSON syntax"
        ) from None


def iter_lines(source: str | Path) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, raw line) of a JSONL file or stdin, skipping blanks."""
    if str(source) == "-":
        stream = sys.stdin.buffer
        for n, line in enumerate(stream, 1):
            if line.strip():
                yield n, line
        return
    with open(source, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                yield n, line


def iter_json(source: str | Path) -> Iterator[tuple[str, Any]]:
    """(where, value) of each non-blank line, `where` naming the file and line; a line
    that is not JSON is a BadRecordError there."""
    for n, line in iter_lines(source):
        where = f"{source}:{n}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise BadRecordError(where, f"invalid JSON: {e}") from None
        yield where, obj


def read_records[M: BaseModel](source: str | Path, model: type[M]) -> Iterator[M]:
    """Read and validate records; errors name the file and line."""
    for where, obj in iter_json(source):
        try:
            yield model.model_validate(obj)
        except ValidationError as e:
            raise BadRecordError(where, _first_error(e)) from None


def write_records(target: str | Path, records: Iterable[BaseModel | dict]) -> int:
    """Write records as JSONL atomically (or to stdout for `-`). Returns the count."""
    count = 0
    if str(target) == "-":
        out = sys.stdout.buffer
        for r in records:
            out.write(dumps(r) + b"\n")
            count += 1
        out.flush()
        return count
    with atomic_path(Path(target)) as tmp, open(tmp, "wb") as fh:
        for r in records:
            fh.write(dumps(r) + b"\n")
            count += 1
    return count


def append_record(target: Path, record: BaseModel | dict) -> None:
    """Append one record as a single write + fsync, so a crash never leaves a
    partial line followed by a good one."""
    line = dumps(record) + b"\n"
    with open(target, "ab") as fh:
        fh.write(line)
        fh.flush()
        import os

        os.fsync(fh.fileno())


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<record>"
    return f"field {loc!r}: {err['msg']}"
