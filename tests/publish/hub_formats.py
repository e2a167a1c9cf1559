"""What the Hub's readers require of the files `publish` stages, written from the Hub's
documentation (not from apexrl's writers): the Session Traces Simple Format, the
`.eval_results/*.yaml` records, and Parquet the dataset viewer reads."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ROW_GROUP_LIMIT = 100 * 1000 * 1000  # what apexrl promises: far under the viewer's ~286 MiB


def check_session_file(path: Path) -> list[dict]:
    """Parse a Session Traces file line by line; returns its message objects."""
    lines = path.read_text("utf-8").splitlines()
    assert lines, f"{path}: empty"
    header = json.loads(lines[0])
    assert header["type"] == "session", path
    for key in ("harness", "id"):
        assert isinstance(header[key], str) and header[key], (path, key)
    if "name" in header:
        assert isinstance(header["name"], str)
    messages, call_ids = [], set()
    for n, line in enumerate(lines[1:], 2):
        rec = json.loads(line)
        assert rec["type"] == "message", (path, n)
        m = rec["message"]
        assert m["role"] in ("user", "assistant", "system", "tool"), (path, n, m["role"])
        assert isinstance(m["content"], str), (path, n)
        if "reasoningContent" in m:
            assert isinstance(m["reasoningContent"], str)
        for call in m.get("toolCalls") or []:
            assert m["role"] == "assistant"
            assert isinstance(call["id"], str) and call["id"]
            assert isinstance(call["function"]["name"], str) and call["function"]["name"]
            assert isinstance(call["function"]["arguments"], str)  # a JSON string
            json.loads(call["function"]["arguments"])
            call_ids.add(call["id"])
        if "toolCallId" in m:
            assert m["role"] == "tool" and m["toolCallId"] in call_ids, (path, n)
        if "timestamp" in m:
            assert isinstance(m["timestamp"], int)
        messages.append(m)
    return messages


def check_eval_results(path: Path) -> list[dict]:
    """A `.eval_results/<name>.yaml`: a list of results, each with dataset.id,
    dataset.task_id and a numeric value; source (if any) with a url."""
    data = yaml.safe_load(path.read_text("utf-8"))
    assert isinstance(data, list) and data, path
    for r in data:
        assert isinstance(r["dataset"]["id"], str) and r["dataset"]["id"].count("/") == 1
        assert isinstance(r["dataset"]["task_id"], str) and r["dataset"]["task_id"]
        assert isinstance(r["value"], int | float) and not isinstance(r["value"], bool)
        if "source" in r:
            assert r["source"]["url"].startswith("https://")
        if "notes" in r:
            assert isinstance(r["notes"], str)
        if "date" in r:
            assert isinstance(r["date"], str)
    return data


def check_parquet_for_viewer(path: Path, limit: int = ROW_GROUP_LIMIT) -> int:
    """Every row group under `limit` bytes (uncompressed, as the file's metadata says) and
    every column chunk with a page index (offset index; column index where the chunk has
    min/max statistics); returns the largest group's size."""
    meta = pq.ParquetFile(path).metadata
    largest = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        largest = max(largest, rg.total_byte_size)
        for j in range(rg.num_columns):
            col = rg.column(j)
            assert col.has_offset_index, (path, i, col.path_in_schema)
            # min/max per page: Parquet writers leave them out for very long values
            if col.statistics is not None and col.statistics.has_min_max:
                assert col.has_column_index, (path, i, col.path_in_schema)
    assert largest < limit, (path, largest)
    return largest
