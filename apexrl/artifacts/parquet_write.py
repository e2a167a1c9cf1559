"""Parquet files the Hub's dataset viewer can read: row groups bounded in bytes (it refuses
groups above about 286 MiB; pyarrow's default bounds rows, not bytes) and a page index
written, so a reader can fetch one page of a large column instead of the whole group."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

ROW_GROUP_BYTES = 64 * 1024 * 1024  # well under the viewer's limit, after encoding overhead


def write_parquet(
    path: Path,
    rows: Iterable[dict],
    schema,
    *,
    row_group_bytes: int = ROW_GROUP_BYTES,
    compression: str | dict = "zstd",
    **writer_options,
) -> int:
    """Write `rows` to `path` in row groups of at most `row_group_bytes` of Arrow data
    each (a single larger row is a group of its own); returns the number of groups.
    `writer_options` go to pyarrow's ParquetWriter (use_dictionary, write_statistics)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    groups = 0
    with pq.ParquetWriter(
        path, schema, compression=compression, write_page_index=True, **writer_options
    ) as writer:
        batch: list[dict] = []
        size = 0
        for row in rows:
            b = _estimate(row)
            if batch and size + b > row_group_bytes:
                table = pa.Table.from_pylist(batch, schema=schema)
                groups += _write_bounded(writer, table, row_group_bytes)
                batch, size = [], 0
            batch.append(row)
            size += b
        if batch or not groups:
            table = pa.Table.from_pylist(batch, schema=schema)
            groups += _write_bounded(writer, table, row_group_bytes)
    return groups


def _write_bounded(writer, table, limit: int) -> int:
    """One row group, or halves of it while its Arrow size is over `limit` (the estimate
    that filled it is only an estimate)."""
    if table.num_rows > 1 and table.nbytes > limit:
        half = table.num_rows // 2
        return _write_bounded(writer, table.slice(0, half), limit) + _write_bounded(
            writer, table.slice(half), limit
        )
    writer.write_table(table, row_group_size=max(1, table.num_rows))
    return 1


def _estimate(value) -> int:
    """A rough byte size of a row as Arrow holds it (strings, bytes, numbers, nesting)."""
    if isinstance(value, str | bytes):
        return len(value) + 4
    if isinstance(value, dict):
        return sum(_estimate(v) for v in value.values()) + 1
    if isinstance(value, list | tuple):
        return sum(_estimate(v) for v in value) + 4
    return 8
