"""Parquet task datasets: sharded writing, streaming reading, hf:// sources.

Columns: path, task_binary (gzip tar of the task dir; the recipe's format),
task_id, world_id, domain, sha256, size_bytes. Readers accept datasets that
have only `path` and `task_binary`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from apexrl import __version__
from apexrl.artifacts.atomic import atomic_dir
from apexrl.artifacts.jsonl import dumps
from apexrl.errors import BadRecordError, RemoteError, UsageError

if TYPE_CHECKING:  # pydantic loads only where rows are built (unpack's readers skip it)
    from apexrl.artifacts.models import DatasetManifest, DatasetRow, DataTerms

MANIFEST = "_dataset.json"  # "_" so pyarrow and datasets readers skip it
SHARD_DIR = "data"
META_COLUMNS = ("path", "task_id", "world_id", "domain", "sha256", "size_bytes")
HF_PREFIX = "hf://"
_HF_RE = re.compile(r"^hf://(?:datasets/)?(?P<repo>[\w.-]+/[\w.-]+)(?:@(?P<rev>[\w./-]+))?$")


@dataclass
class PackedTask:
    row: DatasetRow
    task_binary: bytes


def _schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("path", pa.string()),
            ("task_binary", pa.binary()),
            ("task_id", pa.string()),
            ("world_id", pa.string()),
            ("domain", pa.string()),
            ("sha256", pa.string()),
            ("size_bytes", pa.int64()),
        ]
    )


def write_dataset(
    tasks: Iterable[PackedTask],
    out_dir: Path,
    *,
    shard_mb: float = 256,
    force: bool = False,
    inputs: Iterable[Path | str] = (),
    data_terms: DataTerms | None = None,
) -> DatasetManifest:
    """Write shards + dataset.json into `out_dir` atomically (old content replaced; a
    folder apexrl did not write, or one holding an input, is refused unless `force`)."""
    limit = max(1, int(shard_mb * 1024 * 1024))
    with atomic_dir(Path(out_dir), force=force, inputs=inputs) as tmp:
        (tmp / SHARD_DIR).mkdir()
        groups: list[list[PackedTask]] = [[]]
        size = 0
        rows: list[DatasetRow] = []
        for task in tasks:
            if groups[-1] and size + len(task.task_binary) > limit:
                _write_shard(tmp, groups[-1], len(groups) - 1)
                groups[-1] = []  # free memory; keep the count
                groups.append([])
                size = 0
            groups[-1].append(task)
            size += len(task.task_binary)
            rows.append(task.row)
        _write_shard(tmp, groups[-1], len(groups) - 1)
        shards = _name_shards(tmp, len(groups))
        manifest = make_manifest(rows, shards)
        manifest.data_terms = data_terms
        (tmp / MANIFEST).write_bytes(dumps(manifest) + b"\n")
    return manifest


def make_manifest(rows: list[DatasetRow], shards: list[str]) -> DatasetManifest:
    from apexrl.artifacts.models import DatasetManifest

    return DatasetManifest(
        n_tasks=len(rows),
        shards=shards,
        digest=dataset_digest(rows),
        domains=dict(sorted(Counter(r.domain or "" for r in rows).items())),
        worlds=dict(sorted(Counter(r.world_id or "" for r in rows).items())),
        apexrl_version=__version__,
    )


def dataset_digest(rows: Iterable[DatasetRow]) -> str:
    """The dataset's content digest: sha256 over sorted (task path, packed task sha256).
    What `tasks pack` writes in _dataset.json, eval records in run.json, and a training
    run's manifest records (tasks.pack.source_digest)."""
    h = hashlib.sha256()
    for path, sha in sorted((r.path, r.sha256 or "") for r in rows):
        h.update(f"{path}\0{sha}\n".encode())
    return "sha256:" + h.hexdigest()


def _write_shard(tmp: Path, group: list[PackedTask], index: int) -> None:
    from apexrl.artifacts.parquet_write import write_parquet

    rows = (
        {**{name: getattr(t.row, name) for name in META_COLUMNS}, "task_binary": t.task_binary}
        for t in group
    )
    # task_binary is already gzip: compressing it again only costs time. Row groups
    # bounded in bytes, with a page index: what the Hub's dataset viewer reads.
    write_parquet(
        tmp / SHARD_DIR / f"part-{index:05d}.parquet",
        rows,
        _schema(),
        compression={"task_binary": "none", **{c: "zstd" for c in META_COLUMNS}},
        use_dictionary=["domain", "world_id"],
        write_statistics=False,
    )


def _name_shards(tmp: Path, n: int) -> list[str]:
    names = []
    for i in range(n):
        final = f"{SHARD_DIR}/tasks-{i:05d}-of-{n:05d}.parquet"
        (tmp / SHARD_DIR / f"part-{i:05d}.parquet").rename(tmp / final)
        names.append(final)
    return names


# --- reading ------------------------------------------------------------------------


def resolve_files(source: str | Path) -> list[Path]:
    """Parquet files of a dataset: a directory, one file, or hf://org/name[@rev]."""
    text = str(source)
    if text.startswith(HF_PREFIX):
        return resolve_files(download_hf(text))
    path = Path(text)
    if path.is_file():
        return [path]
    if path.is_dir() and (path / MANIFEST).is_file():
        return _manifest_shards(path)  # the manifest, not every *.parquet below
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.parquet") if not p.name.startswith("."))
        if not files:
            raise UsageError(
                f"no .parquet files under {path}", hint="pass a dataset from `apexrl tasks pack`"
            )
        return files
    raise UsageError(f"{path} does not exist")


def _manifest_shards(path: Path) -> list[Path]:
    import orjson

    where = str(path / MANIFEST)
    try:
        man = orjson.loads((path / MANIFEST).read_bytes())
        shards = man["shards"]
        assert isinstance(shards, list) and all(isinstance(s, str) for s in shards)
    except (OSError, ValueError, KeyError, TypeError, AssertionError):
        raise BadRecordError(where, "not a dataset manifest (no shards list)") from None
    out = []
    for s in shards:
        p = path / s
        if s.startswith("/") or ".." in s.split("/") or not p.is_file():
            raise BadRecordError(where, f"shard {s!r} is missing or outside the dataset")
        out.append(p)
    return out


def download_hf(source: str) -> Path:
    m = _HF_RE.match(source)
    if not m:
        raise UsageError(
            f"bad dataset address {source!r}", hint="use hf://org/name or hf://org/name@revision"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    try:
        return Path(
            snapshot_download(
                m["repo"],
                repo_type="dataset",
                revision=m["rev"],
                allow_patterns=["*.parquet", "**/*.parquet", MANIFEST],
                etag_timeout=30,
            )
        )
    except RepositoryNotFoundError as e:
        raise RemoteError(
            f"dataset {m['repo']} not found on the Hub",
            retryable=False,
            hint="check the name and HF_TOKEN",
        ) from e
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else None
        retryable = status is None or status == 429 or status >= 500
        raise RemoteError(f"Hub download failed: {e}", retryable=retryable) from e
    except LocalEntryNotFoundError as e:  # the Hub could not be reached
        raise RemoteError(
            f"could not reach the Hub for {m['repo']}: {e.__cause__ or e}",
            retryable=True,
            hint="check the network / HF_ENDPOINT, or pass a local dataset folder",
        ) from e


def iter_rows(
    source: str | Path, *, with_binary: bool = True, only: tuple[str, ...] | None = None
) -> Iterator[tuple[str, dict]]:
    """Yield (where, row dict) for every row; `where` is 'file#row'. With `only`, rows
    hold just those columns (unpack reads `path` and `task_binary`, nothing else)."""
    import pyarrow.parquet as pq

    for file in resolve_files(source):
        try:
            pf = pq.ParquetFile(file)
        except Exception as e:  # pyarrow raises several types for a corrupt file
            raise BadRecordError(str(file), f"not a readable Parquet file: {e}") from None
        names = set(pf.schema_arrow.names)
        if "path" not in names or "task_binary" not in names:
            raise BadRecordError(
                str(file), "missing column 'path' or 'task_binary'", hint="is this a task dataset?"
            )
        wanted = [c for c in (*META_COLUMNS, "task_binary") if c in names]
        if not with_binary:
            wanted.remove("task_binary")
        if only is not None:
            wanted = [c for c in wanted if c in only]
        _check_sizes(pf, file)
        index = 0
        batches = pf.iter_batches(batch_size=64, columns=wanted)
        while True:
            try:
                batch = next(batches)
                names = batch.schema.names  # columns to lists, then rows: no per-cell lookups
                cols = [c.to_pylist() for c in batch.columns]
                rows = [dict(zip(names, r, strict=True)) for r in zip(*cols, strict=True)]
            except StopIteration:
                break
            except MemoryError:
                raise BadRecordError(
                    f"{file.name}#{index}", "refused: out of memory reading these rows"
                ) from None
            except Exception as e:  # pyarrow: ArrowInvalid, OSError on a truncated file
                raise BadRecordError(
                    f"{file}", f"unreadable Parquet data near row {index}: {e}"
                ) from None
            for row in rows:
                yield f"{file.name}#{index}", row
                index += 1


def _check_sizes(pf, file: Path) -> None:
    """Refuse a shard whose row groups expand far beyond their stored size (a Parquet
    compression bomb) before pyarrow decompresses them."""
    from apexrl.artifacts.archive_extract import Limits

    limits = Limits.from_env()
    md = pf.metadata
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        stored = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
        limits.check_ratio(rg.total_byte_size, stored, f"{file} row group {g}")


def row_metadata(row: dict) -> DatasetRow:
    """A DatasetRow from a row; fills missing metadata from the tar's task.toml."""
    from apexrl.artifacts.models import DatasetRow

    have = {k: row.get(k) for k in META_COLUMNS if row.get(k) is not None}
    if "task_id" not in have and row.get("task_binary") is not None:
        have.update(_metadata_from_binary(row["task_binary"]))
        have.setdefault("size_bytes", len(row["task_binary"]))
        have.setdefault("sha256", hashlib.sha256(row["task_binary"]).hexdigest())
    return DatasetRow.model_validate(
        {k: v for k, v in have.items() if k in DatasetRow.model_fields}
    )


def _metadata_from_binary(blob: bytes) -> dict:
    """task_id / world_id / domain from a task_binary's task.toml or archipelago.json
    (members at the top of the tar or one folder down); {} when it has neither."""
    from apexrl.artifacts.archive_extract import gunzip, tar_members
    from apexrl.tasks.meta import ARCHIPELAGO_FILE, TASK_TOML, meta_from_texts

    texts: dict[str, str] = {}
    try:
        members, _ = tar_members(gunzip(blob, "task_binary"), "task_binary")
        for m in members:
            base = m.name.removeprefix("./")
            leaf = base.rsplit("/", 1)[-1]
            wanted = leaf in (TASK_TOML, ARCHIPELAGO_FILE) and leaf not in texts
            if m.kind == "file" and wanted and base.count("/") <= 1 and m.read is not None:
                with m.read() as fh:
                    texts[leaf] = fh.read().decode("utf-8")
            if len(texts) == 2:
                break
        if not texts:
            return {}
        meta = meta_from_texts(
            "",
            texts.get(TASK_TOML),
            texts.get(ARCHIPELAGO_FILE),
            where="task_binary",
            require_world=False,
        )
    except (BadRecordError, OSError, UnicodeDecodeError):
        return {}
    out = {"task_id": meta.task_id, "world_id": meta.world_id, "domain": meta.domain}
    return {k: v for k, v in out.items() if v}


def row_count(source: str | Path) -> int:
    """Rows in a dataset, from Parquet footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in resolve_files(source))
