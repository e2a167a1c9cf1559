"""Bad input: clear errors naming the record, distinct exit codes, nothing half-written."""

from __future__ import annotations

import json

from apexrl.cli.app import app
from tests.conftest import make_task, write_apex


def run_convert(runner, src, out, *extra):
    return runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out), *extra])


def test_corrupt_json_names_file_and_line(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "law")])
    (src / "tasks_and_rubrics.json").write_text('[\n  {"task_id": "task_1",\n  oops\n]')
    out = tmp_path / "out"
    result = run_convert(runner, src, out)
    assert result.exit_code == 1
    assert "tasks_and_rubrics.json:3" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir())


def test_non_utf8_input(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "law")])
    (src / "tasks_and_rubrics.json").write_bytes(b'[{"task_name": "caf\xe9"}]')
    result = run_convert(runner, src, tmp_path / "out")
    assert result.exit_code == 1
    assert "not UTF-8" in result.stderr


def _mixed(tmp_path):
    tasks = [
        make_task(1, "world_a", "law"),
        make_task(2, "world_missing", "law"),  # no zip
        make_task(1, "world_b", "investment-banking"),  # duplicate id
        make_task(4, "world_b", "investment-banking", rubric=[]),  # empty rubric
        make_task(5, "world_c", "management-consulting", task_id="../../escape"),
        make_task(6, "world_c", "management-consulting"),
    ]
    return write_apex(tmp_path / "apex", tasks)


def test_partial_success_writes_good_records_and_exits_5(runner, tmp_path):
    src = _mixed(tmp_path)
    out = tmp_path / "out"
    result = run_convert(runner, src, out)
    assert result.exit_code == 5, result.output
    written = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["task_id"] for r in written) == [f"task_{1:032x}", f"task_{6:032x}"]
    err = result.stderr
    assert "tasks_and_rubrics.json[1]" in err and "world_missing.zip is missing" in err
    assert "tasks_and_rubrics.json[2]" in err and "duplicate task_id" in err
    assert "tasks_and_rubrics.json[3]" in err and "rubric is empty" in err
    assert "tasks_and_rubrics.json[4]" in err and "not a safe identifier" in err
    names = sorted(p.name for p in out.iterdir() if p.name != ".apexrl-output")  # its marker
    assert names == sorted(r["path"] for r in written)


def test_strict_stops_at_first_bad_record_and_writes_nothing(runner, tmp_path):
    src = _mixed(tmp_path)
    out = tmp_path / "out"
    result = run_convert(runner, src, out, "--strict")
    assert result.exit_code == 1
    assert "tasks_and_rubrics.json[1]" in result.stderr
    assert "duplicate" not in result.stderr
    assert not out.exists()


def test_missing_input_file_named(runner, tmp_path):
    src = write_apex(
        tmp_path / "apex", [make_task(1, "world_a", "law", task_input_files="a.xlsx, b.pdf")]
    )
    result = run_convert(runner, src, tmp_path / "out", "--strict")
    assert result.exit_code == 1
    assert "'a.xlsx'" in result.stderr and "task_files/" in result.stderr


def test_unknown_domain_is_carried_through(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "Forensic Astrology")])
    result = run_convert(runner, src, tmp_path / "out", "--strict")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["domain"] == "forensic-astrology"


def test_empty_domain_names_field(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", " ")])
    result = run_convert(runner, src, tmp_path / "out", "--strict")
    assert result.exit_code == 1
    assert "field 'domain'" in result.stderr


def test_output_folder_safety_and_manifest_readers(tmp_path):
    """Issue 16: `-o DIR` replaced input task dirs and `.git` with exit 0; `split DS -o DS`
    grew DS because readers took every *.parquet below a folder."""
    from typer.testing import CliRunner

    from apexrl.cli.app import app

    r = CliRunner()
    ex = tmp_path / "ex"
    assert r.invoke(app, ["tasks", "example", "-o", str(ex)]).exit_code == 0
    tasks = tmp_path / "tasks"
    assert r.invoke(app, ["tasks", "convert", str(ex), "-o", str(tasks)]).exit_code == 0
    n_tasks = len([p for p in tasks.iterdir() if p.is_dir()])
    # packing into the input folder would delete it: refused, input intact
    res = r.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tasks)])
    assert res.exit_code == 2 and "would replace the input" in res.output
    assert len([p for p in tasks.iterdir() if p.is_dir()]) == n_tasks
    # a folder apexrl did not write (a repo) is refused unless --force
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    res = r.invoke(app, ["tasks", "pack", str(tasks), "-o", str(repo)])
    assert res.exit_code == 2 and "--force" in res.output
    assert (repo / ".git" / "HEAD").is_file()
    ds = tmp_path / "ds"
    assert r.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0
    assert r.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0  # ours
    # split DS -o DS: DS/train and DS/eval appear, but DS still reads as its manifest says
    res = r.invoke(app, ["tasks", "split", str(ds), "--eval-fraction", "0.34", "-o", str(ds)])
    assert res.exit_code == 0, res.output
    from apexrl.tasks.dataset import row_count

    assert row_count(ds) == n_tasks
    res = r.invoke(app, ["tasks", "split", str(ds), "--eval-fraction", "0.34", "-o", str(ds)])
    assert res.exit_code == 0 and row_count(ds) == n_tasks


def test_truncated_parquet_names_the_file(tmp_path):
    from typer.testing import CliRunner

    from apexrl.artifacts.models import DatasetRow
    from apexrl.cli.app import app
    from apexrl.tasks.dataset import PackedTask, write_dataset

    blob = b"\x1f\x8b" + bytes(range(256)) * 400
    rows = [PackedTask(DatasetRow(path=f"t{i}"), blob) for i in range(3)]
    write_dataset(rows, tmp_path / "ds")
    shard = next((tmp_path / "ds" / "data").glob("*.parquet"))
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2] + data[-(8 + 4096) :])  # footer kept, body cut
    res = CliRunner().invoke(
        app, ["tasks", "unpack", str(tmp_path / "ds"), "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 1, res.output
    assert shard.name in res.output and "internal error" not in res.output


def test_strict_unpack_writes_nothing_and_foreign_dirs_are_kept(tmp_path):
    import pytest

    from apexrl.artifacts.models import DatasetRow
    from apexrl.errors import BadRecordError
    from apexrl.tasks.dataset import PackedTask, write_dataset
    from apexrl.tasks.pack import pack_task_dir
    from apexrl.tasks.unpack import unpack_dataset

    good = tmp_path / "good"
    good.mkdir()
    (good / "task.toml").write_text("[metadata]\n")
    blob, _ = pack_task_dir(good)
    rows = [PackedTask(DatasetRow(path="a-good"), blob), PackedTask(DatasetRow(path="b-bad"), b"x")]
    write_dataset(rows, tmp_path / "ds")
    out = tmp_path / "out"
    with pytest.raises(BadRecordError, match="b-bad|#1"):
        unpack_dataset(tmp_path / "ds", out, strict=True)
    assert not (out / "a-good").exists()  # --strict: nothing written before the failure
    assert not [p for p in out.iterdir() if p.name != ".apexrl"]
    # the bad row first: the rows after it in the same batch leave no temp folder either
    write_dataset(
        [PackedTask(DatasetRow(path="a-bad"), b"x"), PackedTask(DatasetRow(path="b-good"), blob)],
        tmp_path / "ds2",
    )
    with pytest.raises(BadRecordError, match="a-bad|#0"):
        unpack_dataset(tmp_path / "ds2", out, strict=True)
    assert not [p for p in out.iterdir() if p.name != ".apexrl"]
    # a folder of the same name that apexrl did not unpack is never replaced
    (out / "a-good").mkdir()
    (out / "a-good" / "mine.txt").write_text("user data")
    errors = []
    unpack_dataset(tmp_path / "ds", out, strict=False, on_error=errors.append)
    assert (out / "a-good" / "mine.txt").read_text() == "user data"
    assert any("not unpacked by apexrl" in str(e) for e in errors)


def test_convert_refuses_a_linked_task_files_folder(tmp_path):
    """Issue 16: `convert` followed a symlinked task_files/<id> and copied a host dir."""
    import json

    from typer.testing import CliRunner

    from apexrl.cli.app import app

    r = CliRunner()
    ex = tmp_path / "ex"
    assert r.invoke(app, ["tasks", "example", "-o", str(ex)]).exit_code == 0
    host = tmp_path / "host-dir"
    host.mkdir()
    (host / "id_rsa").write_text("HOST-PRIVATE")
    records = json.loads((ex / "tasks_and_rubrics.json").read_text())
    task_id = records[0]["task_id"]
    records[0]["task_input_files"] = "snap_" + "0" * 32  # the published shape: files are used
    (ex / "tasks_and_rubrics.json").write_text(json.dumps(records))
    tf = ex / "task_files" / task_id
    if tf.exists():
        import shutil

        shutil.rmtree(tf)
    tf.parent.mkdir(exist_ok=True)
    tf.symlink_to(host)
    out = tmp_path / "tasks"
    res = r.invoke(app, ["tasks", "convert", str(ex), "-o", str(out)])
    assert res.exit_code in (1, 5) and "links and special files" in res.output
    assert not [p for p in out.rglob("id_rsa")]


def test_parquet_compression_bomb_is_refused_naming_the_file(tmp_path):
    """Issue 16: a small Parquet file whose pages expand to gigabytes ended in
    "internal error: MemoryError"; it is now refused from its footer, file named."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from apexrl.cli.app import app

    big = b"\0" * (40 * 1024 * 1024)
    table = pa.table({"path": ["t-1"], "task_binary": [big]})
    f = tmp_path / "bomb.parquet"
    pq.write_table(table, f, compression="zstd")
    assert f.stat().st_size < 100_000
    del big, table
    res = CliRunner().invoke(app, ["tasks", "unpack", str(f), "-o", str(tmp_path / "o")])
    assert res.exit_code == 1, res.output
    assert "bomb.parquet row group 0" in res.output and "ratio" in res.output


def test_strict_convert_writes_nothing_when_a_later_task_fails(tmp_path):
    """Issue 16: `convert --strict` wrote the good task dirs before the bad one stopped
    it. Now tasks are staged and moved into place only when every one converted."""
    from typer.testing import CliRunner

    from apexrl.cli.app import app

    r = CliRunner()
    ex = tmp_path / "ex"
    assert r.invoke(app, ["tasks", "example", "-o", str(ex)]).exit_code == 0
    records = json.loads((ex / "tasks_and_rubrics.json").read_text())
    last = records[-1]["task_id"]
    records[-1]["task_input_files"] = "snap_" + "1" * 32
    (ex / "tasks_and_rubrics.json").write_text(json.dumps(records))
    tf = ex / "task_files" / last
    if tf.exists():
        import shutil

        shutil.rmtree(tf)
    tf.parent.mkdir(exist_ok=True)
    host = tmp_path / "host-dir"
    host.mkdir()
    tf.symlink_to(host)  # refused at write time, after the other tasks were converted
    out = tmp_path / "tasks"
    res = r.invoke(app, ["tasks", "convert", str(ex), "-o", str(out), "--strict"])
    assert res.exit_code == 1, res.output
    assert "links and special files" in res.output
    assert not out.exists()
    kept = tmp_path / "kept"
    (kept / "mine").mkdir(parents=True)
    res = r.invoke(app, ["tasks", "convert", str(ex), "-o", str(kept), "--strict"])
    assert res.exit_code == 2 and "not written by apexrl" in res.output  # not its folder
    assert sorted(p.name for p in kept.iterdir()) == ["mine"]  # nothing added, nothing lost
    ok = r.invoke(app, ["tasks", "convert", str(ex), "-o", str(tmp_path / "ok")])
    assert ok.exit_code == 5  # without --strict: the good ones written, the bad one reported
    assert len([p for p in (tmp_path / "ok").iterdir() if not p.name.startswith(".")]) == 13


def test_loader_changing_env_names_refused_at_convert_and_validate(runner, tmp_path):
    """Issue 29: a record whose required_env_keys name LD_PRELOAD is refused by convert
    (naming the record), and a task.toml that sets one fails `tasks validate`."""
    tasks = [
        make_task(1, "world_a", "law"),
        make_task(2, "world_a", "law", required_env_keys=["FMP_API_KEY", "LD_PRELOAD"]),
    ]
    src = write_apex(tmp_path / "apex", tasks)
    out = tmp_path / "out"
    result = run_convert(runner, src, out)
    assert result.exit_code == 5, result.output
    assert "tasks_and_rubrics.json[1]" in result.stderr and "LD_PRELOAD" in result.stderr
    assert [json.loads(line)["task_id"] for line in result.stdout.splitlines()] == [
        f"task_{1:032x}"
    ]
    task = next(p for p in out.iterdir() if p.is_dir())
    toml = (task / "task.toml").read_text()
    for table, name in (
        ("[environment.env]", "LD_PRELOAD"),
        ("[verifier.env]", "PYTHONPATH"),
        ("[solution.env]", "BASH_ENV"),
    ):
        if table not in toml:
            toml += f"\n{table}\n"
        bad = toml.replace(f"{table}\n", f'{table}\n{name} = "/world/x"\n', 1)
        (task / "task.toml").write_text(bad)
        result = runner.invoke(app, ["tasks", "validate", str(out)])
        assert result.exit_code == 1, result.output
        assert f"{table} sets {name}" in result.output, result.output
    (task / "task.toml").write_text(toml)
    assert runner.invoke(app, ["tasks", "validate", str(out)]).exit_code == 0
