"""Every error's reason where the user looks (issue 32.5, 32.7, 32.8): validation reports
every bad row, malformed files name file and line, options are blamed, not the recipe."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from apexrl.cli.app import app

runner = CliRunner()


def test_validate_reports_every_bad_row(tmp_path):
    from apexrl.artifacts.models import DatasetRow
    from apexrl.tasks.dataset import PackedTask, write_dataset
    from apexrl.tasks.pack import pack_task_dir

    good = tmp_path / "good"
    good.mkdir()
    (good / "task.toml").write_text("[metadata]\n")
    blob, _ = pack_task_dir(good)
    rows = [
        PackedTask(DatasetRow(path="a-good"), blob),
        PackedTask(DatasetRow(path="b-junk"), b"not a tar"),
        PackedTask(DatasetRow(path="../c-escape"), blob),
        PackedTask(DatasetRow(path="d-junk"), b"\x1f\x8b junk"),
    ]
    write_dataset(rows, tmp_path / "ds")
    res = runner.invoke(app, ["tasks", "validate", str(tmp_path / "ds")])
    assert res.exit_code == 1, res.output
    found = [json.loads(x) for x in res.stdout.splitlines()]
    bad_rows = sorted(f["where"] for f in found if f["check"] == "row")
    assert len(bad_rows) == 3 and all("#" in w for w in bad_rows), found
    assert any(f["where"] == "a-good" for f in found)  # the good row is still checked


def test_tito_verify_malformed_trajectories_name_file_and_line(tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"messages": [}\n')
    res = runner.invoke(
        app, ["tito", "verify", "-t", "qwen3", "--mode", "replay", "--trajectories", str(broken)]
    )
    assert res.exit_code == 1, res.output
    assert f"{broken}:1" in res.stderr and "internal error" not in res.stderr
    notjson = tmp_path / "notjson.jsonl"
    notjson.write_text('{"messages": []}\nnot json\n')
    res = runner.invoke(
        app, ["tito", "verify", "-t", "qwen3", "--mode", "replay", "--trajectories", str(notjson)]
    )
    assert res.exit_code == 1, res.output
    assert f"{notjson}:2" in res.stderr and "not JSON" in res.stderr
    assert "template" not in res.stderr.split("hint")[0].lower()


def test_train_dry_run_checks_data_and_blames_the_set(tmp_path):
    from pathlib import Path

    recipe = Path(__file__).resolve().parents[1] / "recipes" / "smoke-cpu.toml"
    res = runner.invoke(app, ["train", str(recipe), "--data", "/nonexistent/ds", "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "/nonexistent/ds" in res.stderr and "does not exist" in res.stderr
    res = runner.invoke(
        app, ["train", str(recipe), "--set", "batch.train_batch_size=abc", "--dry-run"]
    )
    assert res.exit_code == 2, res.output
    assert "--set batch.train_batch_size=abc" in res.stderr
