"""Stage a packed task dataset for `publish dataset`: shards as they are, or with every
member of each task, every other column and the shard's metadata redacted when a finding
needs it, the manifest, and the card."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from apexrl.artifacts.parquet_write import write_parquet
from apexrl.errors import BadRecordError, UsageError
from apexrl.publish import cards
from apexrl.publish.redact import Redactor
from apexrl.publish.stage import Plan, finish_with_card, new_plan, redacted_copy, stage_text


def _redact_task_binary(blob: bytes, where: str, red: Redactor) -> bytes | None:
    """The task tar with every text member redacted; None when nothing changed."""
    from apexrl.artifacts.archive_extract import gunzip
    from apexrl.artifacts.archive_extract import tar_members as parse
    from apexrl.artifacts.archive_write import Entry, bytes_entry, gzip_bytes, tar_bytes

    members, bad = parse(gunzip(blob, where), where)
    if bad:
        raise BadRecordError(f"{where} member {bad[0][0]!r}", bad[0][1])
    changed = False
    entries: list[Entry] = []
    for m in members:
        if m.kind == "file":
            assert m.read is not None
            with m.read() as fh:
                data = fh.read()
            red_data = red.bytes_text(data, f"{where} {m.name}")
            if red_data is not None and red_data != data:
                changed = True
                data = red_data
            entries.append(bytes_entry(m.name, data, executable=bool(m.mode & 0o100)))
        else:
            entries.append(Entry(m.name, m.kind, linkname=m.linkname))
    if not changed:
        return None
    return gzip_bytes(tar_bytes(entries))


def _redact_columns(row: dict, where: str, red: Redactor) -> bool:
    """Every value beside task_binary (metadata and any extra column) through the scanner;
    True when one changed."""
    changed = False
    for key, value in row.items():
        if key == "task_binary" or value is None:
            continue
        at = f"{where} column {key}"
        new = red.bytes_text(value, at) if isinstance(value, bytes) else red.obj(value, at)
        if new != value:
            row[key] = new
            changed = True
    return changed


def _redact_metadata(schema, where: str, red: Redactor):
    """The shard's key-value metadata (its footer) through the scanner: the schema to
    write, or None when nothing changed."""
    meta = schema.metadata or {}
    new = {
        red.bytes_text(k, f"{where} metadata key"): red.bytes_text(v, f"{where} metadata")
        for k, v in meta.items()
    }
    return schema.with_metadata(new) if new != meta else None


def stage_dataset(
    ds_dir: Path,
    *,
    repo: str,
    stage_dir: Path,
    private: bool = True,
    license: str | None = None,
    redactor: Redactor | None = None,
) -> Plan:
    import pyarrow.parquet as pq

    from apexrl.artifacts.models import DatasetRow
    from apexrl.tasks.dataset import MANIFEST, dataset_digest

    ds_dir = Path(ds_dir)
    man_path = ds_dir / MANIFEST
    if not man_path.is_file():
        raise UsageError(
            f"{ds_dir}: no {MANIFEST}", hint="pass a folder written by `apexrl tasks pack`"
        )
    manifest = cards.read_json(man_path)
    if not manifest or not isinstance(manifest.get("shards"), list):
        raise BadRecordError(str(man_path), "not a dataset manifest (no shards list)")
    plan = new_plan(repo, "dataset", private=private, stage_dir=stage_dir, redactor=redactor)
    entries: list[tuple[str, Path]] = []
    rows_meta: list[DatasetRow] = []
    any_changed = False
    for shard in manifest["shards"]:
        src = ds_dir / shard
        if "/.." in f"/{shard}" or not src.is_file():
            raise BadRecordError(str(man_path), f"shard {shard!r} is missing")
        table = pq.read_table(src)
        rows = table.to_pylist()
        schema = _redact_metadata(table.schema, shard, plan.redactor)
        changed = schema is not None
        schema = schema or table.schema
        for i, row in enumerate(rows):
            where = f"{shard} row {i} ({row.get('path')})"
            changed |= _redact_columns(row, where, plan.redactor)
            new = _redact_task_binary(row["task_binary"], where, plan.redactor)
            if new is not None:
                changed = True
                row["task_binary"] = new
                row["sha256"] = hashlib.sha256(new).hexdigest()
                row["size_bytes"] = len(new)
            rows_meta.append(
                DatasetRow(
                    path=row["path"],
                    task_id=row.get("task_id"),
                    world_id=row.get("world_id"),
                    domain=row.get("domain"),
                    sha256=row.get("sha256"),
                    size_bytes=row.get("size_bytes") or 0,
                )
            )
        if changed:
            any_changed = True
            out = plan.stage_dir / shard
            out.parent.mkdir(parents=True, exist_ok=True)
            write_parquet(out, rows, schema)
            entries.append((shard, out))
        else:
            entries.append((shard, src))
    if any_changed:
        manifest = {**manifest, "digest": dataset_digest(rows_meta)}
        text = json.dumps(manifest, sort_keys=False) + "\n"
        entries.append((MANIFEST, stage_text(plan, MANIFEST, text.encode())))
    else:
        entries.append((MANIFEST, redacted_copy(plan, MANIFEST, man_path)))
    card = cards.dataset_card(
        repo=repo,
        manifest=manifest,
        license=license,
        shards=list(manifest["shards"]),
        n_redactions=plan.redactor.total,
        scanned=dict(plan.redactor.scanned),
    )
    return finish_with_card(plan, entries, card)
