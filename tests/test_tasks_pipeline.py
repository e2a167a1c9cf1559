"""convert -> pack -> unpack -> validate -> split -> ls on hand-made APEX data."""

from __future__ import annotations

import filecmp
import json
import tomllib
from pathlib import Path

from apexrl.cli.app import app


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def same_tree(a: Path, b: Path) -> bool:
    """Byte-for-byte equality of two trees (names, contents, exec bits)."""
    files_a = sorted(
        p.relative_to(a) for p in a.rglob("*") if not p.relative_to(a).parts[0].startswith(".")
    )
    files_b = sorted(
        p.relative_to(b) for p in b.rglob("*") if not p.relative_to(b).parts[0].startswith(".")
    )
    if files_a != files_b:
        return False
    for rel in files_a:
        pa, pb = a / rel, b / rel
        if pa.is_file():
            if not filecmp.cmp(pa, pb, shallow=False):
                return False
            if (pa.stat().st_mode & 0o111) != (pb.stat().st_mode & 0o111):
                return False
    return True


def convert(runner, src: Path, out: Path, *extra: str):
    return runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out), *extra])


def test_convert_writes_harbor_task_dirs(runner, mini_apex, tmp_path):
    out = tmp_path / "tasks"
    result = convert(runner, mini_apex, out)
    assert result.exit_code == 0, result.output
    records = ndjson(result.stdout)
    assert len(records) == 4
    by_id = {r["task_id"]: r for r in records}
    t1 = out / by_id[f"task_{1:032x}"]["path"]
    assert (t1 / "instruction.md").read_text().startswith("What is the answer to question 1?")
    assert "brief.txt" in (t1 / "instruction.md").read_text()
    brief = t1 / "environment" / "task_files" / "filesystem" / "brief.txt"
    assert brief.read_text() == "The brief.\n"
    assert (t1 / "environment" / "Dockerfile").is_file()
    assert (t1 / "tests" / "test.sh").stat().st_mode & 0o111
    assert json.loads((t1 / "tests" / "verifiers.json").read_text())[0]["check"]["kind"] == "number"

    # Harbor's own model loads the config; metadata sits in [metadata].
    from harbor.models.task.config import TaskConfig

    t3 = out / by_id[f"task_{3:032x}"]["path"]
    config = TaskConfig.model_validate_toml((t3 / "task.toml").read_text())
    assert config.metadata["world_id"] == "world_c"
    assert config.metadata["required_env_keys"] == ["FMP_API_KEY"]
    assert config.verifier.env == {"FMP_API_KEY": "${FMP_API_KEY}"}
    assert (t3 / "solution" / "gold_files" / "outputs" / "memo.md").is_file()

    # A hostile task name is slugified, never used as a path.
    evil = by_id[f"task_{4:032x}"]["path"]
    assert "/" not in evil and ".." not in evil
    assert (out / evil).parent == out


def test_convert_with_images_pins_digest(runner, mini_apex, tmp_path):
    images = tmp_path / "images.jsonl"
    digest = "sha256:" + "ab" * 32
    images.write_text(
        json.dumps({"world_id": "world_a", "ref": "reg.example/worlds:world_a", "digest": digest})
        + "\n"
    )
    result = convert(runner, mini_apex, tmp_path / "tasks", "--images", str(images))
    assert result.exit_code == 0, result.output
    rec = next(r for r in ndjson(result.stdout) if r["world_id"] == "world_a")
    toml = tomllib.loads((tmp_path / "tasks" / rec["path"] / "task.toml").read_text())
    assert toml["environment"]["docker_image"] == f"reg.example/worlds@{digest}"
    assert toml["metadata"]["image_digest"] == digest


def test_convert_is_idempotent(runner, mini_apex, tmp_path):
    out = tmp_path / "tasks"
    assert convert(runner, mini_apex, out).exit_code == 0
    first = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert convert(runner, mini_apex, out).exit_code == 0
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == first


def test_pack_unpack_round_trip_and_determinism(runner, mini_apex, tmp_path):
    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    r1 = runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tmp_path / "ds1")])
    r2 = runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tmp_path / "ds2")])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output
    m1, m2 = json.loads(r1.stdout), json.loads(r2.stdout)
    assert m1["digest"] == m2["digest"] and m1["n_tasks"] == 4

    import pyarrow.parquet as pq

    t1 = pq.read_table(tmp_path / "ds1").to_pylist()
    t2 = pq.read_table(tmp_path / "ds2").to_pylist()
    assert [r["task_binary"] for r in t1] == [r["task_binary"] for r in t2]
    assert set(t1[0]) >= {"path", "task_binary", "task_id", "world_id", "domain", "sha256"}

    out = tmp_path / "unpacked"
    r = runner.invoke(app, ["tasks", "unpack", str(tmp_path / "ds1"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert same_tree(tasks, out)
    # Rerun is resumable: nothing rewritten.
    again = runner.invoke(app, ["tasks", "unpack", str(tmp_path / "ds1"), "-o", str(out)])
    assert {row["status"] for row in ndjson(again.stdout)} == {"unchanged"}


def test_unpack_accepts_recipe_style_dataset(runner, mini_apex, tmp_path):
    """Datasets with only path + task_binary, members prefixed by the task dir name."""
    import io
    import tarfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    rows = []
    for d in sorted(p for p in tasks.iterdir() if p.is_dir()):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(d, arcname=d.name)
        rows.append({"path": d.name, "task_binary": buf.getvalue()})
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "recipe.parquet")
    out = tmp_path / "out"
    r = runner.invoke(app, ["tasks", "unpack", str(tmp_path / "recipe.parquet"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert same_tree(tasks, out)
    listing = ndjson(
        runner.invoke(app, ["tasks", "ls", str(tmp_path / "recipe.parquet"), "--json"]).stdout
    )
    assert {row["world_id"] for row in listing} == {"world_a", "world_b", "world_c"}


def test_validate_passes_then_finds_problems(runner, mini_apex, tmp_path):
    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    ok = runner.invoke(app, ["tasks", "validate", str(tasks)])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.strip() == ""

    victim = sorted(p for p in tasks.iterdir() if p.is_dir())[0]
    (victim / "tests" / "test.sh").chmod(0o644)
    (victim / "tests" / "verifiers.json").write_text("[]")
    (victim / "instruction.md").unlink()
    toml = (
        (victim / "task.toml")
        .read_text()
        .replace("[verifier.env]", '[verifier.env]\nSECRET_X = "${SECRET_X}"')
    )
    (victim / "task.toml").write_text(toml)
    bad = runner.invoke(app, ["tasks", "validate", str(tasks), "--json"])
    assert bad.exit_code == 1
    checks = {f["check"] for f in ndjson(bad.stdout)}
    assert checks == {"verifier_entrypoint", "rubric", "instruction", "env_keys"}
    assert all(f["where"] == victim.name for f in ndjson(bad.stdout))


def test_validate_a_packed_dataset(runner, mini_apex, tmp_path):
    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    assert (
        runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tmp_path / "ds")]).exit_code == 0
    )
    result = runner.invoke(app, ["tasks", "validate", str(tmp_path / "ds")])
    assert result.exit_code == 0, result.output


def test_split_shares_no_world(runner, mini_apex, tmp_path):
    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    assert (
        runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tmp_path / "ds")]).exit_code == 0
    )
    result = runner.invoke(
        app,
        [
            "tasks",
            "split",
            str(tmp_path / "ds"),
            "--eval-fraction",
            "0.3",
            "--seed",
            "1",
            "-o",
            str(tmp_path / "split"),
        ],
    )
    assert result.exit_code == 0, result.output
    train, evl = ndjson(result.stdout)
    assert train["n_tasks"] + evl["n_tasks"] == 4
    assert evl["n_tasks"] >= 1 and train["n_tasks"] >= 1
    assert not set(train["worlds"]) & set(evl["worlds"])
    again = runner.invoke(
        app,
        [
            "tasks",
            "split",
            str(tmp_path / "ds"),
            "--eval-fraction",
            "0.3",
            "--seed",
            "1",
            "-o",
            str(tmp_path / "split2"),
        ],
    )
    assert ndjson(again.stdout)[1]["worlds"] == evl["worlds"]


def test_split_dataset_is_a_library_call(runner, mini_apex, tmp_path):
    """The split is apexrl.tasks.split.split_dataset; the command only parses and prints."""
    from apexrl.tasks.split import split_dataset

    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0
    heard: list[str] = []
    train, evl = split_dataset(
        str(ds), tmp_path / "split", eval_fraction=0.3, seed=1, shard_mb=256, force=False,
        on_warning=heard.append,
    )  # fmt: skip
    assert (train["split"], evl["split"]) == ("train", "eval")
    assert train["n_tasks"] + evl["n_tasks"] == 4 and not set(train["worlds"]) & set(evl["worlds"])
    assert (tmp_path / "split" / "train").is_dir() and (tmp_path / "split" / "eval").is_dir()
    assert all("--eval-fraction" in h for h in heard)


def test_ls_table_and_json(runner, mini_apex, tmp_path):
    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    assert (
        runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tmp_path / "ds")]).exit_code == 0
    )
    rows = ndjson(runner.invoke(app, ["tasks", "ls", str(tmp_path / "ds"), "--json"]).stdout)
    assert len(rows) == 4
    assert all(r["size_bytes"] > 0 and r["domain"] for r in rows)


def test_pack_rows_carry_the_metadata_reader_answer(runner, mini_apex, tmp_path):
    """Pack reads task.toml/archipelago.json once, while tarring; the row's metadata is
    what the shared reader says, and the binary is a plain gzip tar any tool reads."""
    import gzip
    import subprocess

    from apexrl.tasks.meta import find_task_meta
    from apexrl.tasks.pack import find_task_dirs, packed_task

    tasks = tmp_path / "tasks"
    assert convert(runner, mini_apex, tasks).exit_code == 0
    for task_dir in find_task_dirs(tasks):
        meta = find_task_meta(task_dir, require_world=False)
        packed = packed_task(task_dir)
        assert meta is not None and packed.row.task_id == meta.task_id
        assert (packed.row.world_id, packed.row.domain) == (meta.world_id or None, meta.domain)
        assert packed_task(task_dir).task_binary == packed.task_binary  # deterministic
        assert gzip.decompress(packed.task_binary)[-1024:] == bytes(1024)
        out = tmp_path / "x" / task_dir.name
        out.mkdir(parents=True)
        (tmp_path / "t.tgz").write_bytes(packed.task_binary)
        subprocess.run(["tar", "xzf", str(tmp_path / "t.tgz"), "-C", str(out)], check=True)
        assert same_tree(task_dir, out)
