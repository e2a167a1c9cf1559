"""Inputs checked where they enter: `tasks pack` validates each task as `tasks validate`
does, `tasks validate` names unknown task.toml keys with the nearest known one, `tasks
convert` refuses a folder it did not write, and a checkpoint argument that is neither
a folder nor a Hub model is a usage error naming both."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from tests.conftest import make_task, write_apex


@pytest.fixture
def converted(runner, tmp_path) -> Path:
    src = write_apex(
        tmp_path / "apex",
        [make_task(i, "world_a", "law") for i in range(1, 5)],
    )
    out = tmp_path / "tasks"
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def task_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if (p / "task.toml").is_file())


def packed_paths(ds: Path) -> list[str]:
    return sorted(
        r for f in ds.rglob("*.parquet") for r in pq.read_table(f).column("path").to_pylist()
    )


def test_pack_skips_and_names_each_bad_task_exit_5_or_stops_with_strict(
    runner, converted, tmp_path
):
    a, b, c, good = task_dirs(converted)
    (a / "task.toml").write_text("[metadata\nbroken = ")  # invalid TOML
    (b / "instruction.md").unlink()
    (c / "tests" / "verifiers.json").write_text("{not json")
    ds = tmp_path / "ds"
    res = runner.invoke(app, ["tasks", "pack", str(converted), "-o", str(ds)])
    assert res.exit_code == 5, res.output
    for bad, what in (
        (a, "not valid TOML"),
        (b, "instruction.md is missing"),
        (c, "not valid JSON"),
    ):
        assert bad.name in res.stderr and what in res.stderr
    assert packed_paths(ds) == [good.name]
    strict = tmp_path / "strict"
    res = runner.invoke(app, ["tasks", "pack", str(converted), "-o", str(strict), "--strict"])
    assert res.exit_code == 1 and a.name in res.stderr, res.output
    assert not strict.exists()  # nothing written


def test_validate_names_unknown_keys_with_the_nearest_one(runner, converted):
    d = task_dirs(converted)[0]
    text = (d / "task.toml").read_text()
    text = text.replace("[verifier]", "[verifer]", 1).replace("domain = ", "domian = ", 1)
    text = text.replace("[agent]\n", "[agent]\ntimeout_secs = 10\n", 1)
    (d / "task.toml").write_text(text)
    res = runner.invoke(app, ["tasks", "validate", str(converted), "--json"])
    assert res.exit_code == 1, res.output
    for typo, near in (
        ("verifer", "verifier"),
        ("agent.timeout_secs", "agent.timeout_sec"),
        ("metadata.domian", "metadata.domain"),
    ):
        assert f"unknown key `{typo}`" in res.stdout and f"did you mean `{near}`?" in res.stdout


def test_convert_refuses_a_folder_it_did_not_write(runner, converted, tmp_path):
    src = tmp_path / "apex"
    foreign = tmp_path / "mine"
    foreign.mkdir()
    shutil.copytree(task_dirs(converted)[0], foreign / "stale-task")
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(foreign)])
    assert res.exit_code == 2 and "not written by apexrl" in res.stderr, res.output
    assert [p.name for p in foreign.iterdir()] == ["stale-task"]  # untouched
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(foreign), "--force"])
    assert res.exit_code == 0, res.output
    # its own output again: accepted (the marker says apexrl wrote it)
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(converted)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(src)])
    assert res.exit_code == 2 and "would replace the input" in res.stderr


def test_a_checkpoint_that_is_neither_a_folder_nor_a_hub_model(
    runner, converted, tmp_path, monkeypatch
):
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    args = ["eval", "run", "ckpts/step-100", "-t", str(converted), "-o", "run", "--no-judge"]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert f"no folder {tmp_path / 'ckpts' / 'step-100'}" in res.stderr
    assert "the Hub cannot be reached" in res.stderr and "internal error" not in res.stderr
    assert not (tmp_path / "run").exists()
