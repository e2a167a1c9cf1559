"""Trace shards in row groups bounded in bytes (the Hub's dataset viewer refuses large
ones), read back from the files' own metadata."""

from __future__ import annotations

import json
import random
import string

import pyarrow as pa
import pyarrow.parquet as pq

from apexrl.artifacts.parquet_write import write_parquet
from apexrl.publish.stage_traces import stage_traces
from tests.publish.conftest import make_run_dir
from tests.publish.hub_formats import check_parquet_for_viewer, check_session_file

MB = 1000 * 1000


def _noise(n: int, seed: int) -> str:
    rng = random.Random(seed)  # incompressible: the sizes are not a compression artefact
    return "".join(rng.choices(string.ascii_letters, k=n))


def test_row_groups_are_bounded_in_bytes(tmp_path):
    schema = pa.schema([("id", pa.int32()), ("text", pa.string())])
    rows = [{"id": i, "text": _noise(MB, i)} for i in range(12)]
    path = tmp_path / "x.parquet"
    groups = write_parquet(path, rows, schema, row_group_bytes=3 * MB)
    meta = pq.ParquetFile(path).metadata
    assert groups == meta.num_row_groups >= 4
    assert check_parquet_for_viewer(path, limit=3 * MB + 1) <= 3 * MB
    assert pq.read_table(path).to_pylist() == rows


def test_a_row_larger_than_the_bound_is_a_group_of_its_own(tmp_path):
    schema = pa.schema([("text", pa.string())])
    path = tmp_path / "x.parquet"
    write_parquet(path, [{"text": _noise(2 * MB, 1)}, {"text": "a"}], schema, row_group_bytes=MB)
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [1, 1]


def test_large_trials_split_into_row_groups(tmp_path):
    run = make_run_dir(tmp_path / "run")
    for p in run.glob("trajectories/*/trajectory.json"):  # a long tool output in each trial
        atif = json.loads(p.read_text())
        atif["extra"]["tito"]["messages"][3]["content"] = _noise(2 * MB, len(str(p)))
        p.write_text(json.dumps(atif))
    plan = stage_traces(run, repo="a/t", stage_dir=tmp_path / "stage", row_group_bytes=3 * MB)
    shard = tmp_path / "stage" / "data" / "train-00000-of-00001.parquet"
    assert pq.ParquetFile(shard).metadata.num_row_groups >= 2
    check_parquet_for_viewer(shard, limit=3 * MB + 1)
    assert len(pq.read_table(shard)) == 4
    sessions = [f for f in plan.files if f.path.startswith("sessions/")]
    assert len(sessions) == 4
    for f in sessions:
        check_session_file(f.local)


def test_packed_and_published_task_shards_too(runner, packed_dataset, tmp_path):
    from apexrl.cli.app import app

    shards = sorted(packed_dataset.glob("data/*.parquet"))
    assert shards
    for shard in shards:  # `tasks pack`
        check_parquet_for_viewer(shard)
    stage = tmp_path / "stage"
    r = runner.invoke(app, ["publish", "dataset", str(packed_dataset), "--repo", "a/d",
                            "--dry-run", "--stage", str(stage)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    redacted = sorted(stage.glob("data/*.parquet"))  # rewritten: a secret was planted
    assert redacted
    for shard in redacted:
        check_parquet_for_viewer(shard)
