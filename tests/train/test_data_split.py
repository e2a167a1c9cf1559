"""The job's data preparation: train and eval tasks in folders of their own, tables that share
no task and no world, reruns under one run name that never mix splits, relative paths."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from apexrl.errors import BadRecordError, UsageError
from apexrl.train import entrypoint as E
from apexrl.train.recipe import load_recipe
from apexrl.train.render import absolute_data_path, render


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """The example expert data -> task dirs -> packed dataset -> a by-world split."""
    from typer.testing import CliRunner

    from apexrl.cli.app import app

    root = tmp_path_factory.mktemp("data")
    runner = CliRunner()
    for args in (
        ["tasks", "example", "-o", str(root / "ex"), "--seed", "0"],
        ["tasks", "convert", str(root / "ex"), "-o", str(root / "tasks")],
        ["tasks", "pack", str(root / "tasks"), "-o", str(root / "all")],
        ["tasks", "split", str(root / "all"), "--by", "world", "--eval-fraction", "0.34"]
        + ["--seed", "0", "-o", str(root / "split")],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
    return root


def _preflight(tmp_path, run, train, val):
    loaded = load_recipe("smoke-1gpu", [f'checkpoint.path="{run}/ckpts"', 'run_name="same"'])
    spec = render(loaded, data_train=str(train), data_val=str(val))
    job = tmp_path / "job"
    job.mkdir(exist_ok=True)
    (job / "run_spec.json").write_text(spec.model_dump_json())
    return E.preflight(job / "run_spec.json")


def _table(path):
    return pq.read_table(path).to_pylist()


def test_train_and_eval_share_no_task_and_no_world_after_two_runs(datasets, tmp_path):
    run = tmp_path / "run"
    split = datasets / "split"
    for _ in range(2):  # a rerun under the same run name
        spec, overrides = _preflight(tmp_path, run, split / "train", split / "eval")
        train = _table(overrides["data.train_data"][0])
        val = _table(overrides["data.val_data"][0])
        assert train and val
        assert not {r["task_id"] for r in train} & {r["task_id"] for r in val}
        assert not {r["world_id"] for r in train} & {r["world_id"] for r in val}
        assert all(r["world_id"] for r in train + val)
        # each split's task dirs live in a folder of their own, nothing else in it
        for rows, name in ((train, "train"), (val, "val")):
            folder = run / "data" / name / "tasks"
            dirs = {str(p) for p in folder.iterdir() if (p / "task.toml").is_file()}
            assert {r["task_path"] for r in rows} == dirs
        # eval metrics per domain: data_source is the task's domain
        domains = {"investment-banking", "law", "management-consulting"}
        assert {r["data_source"] for r in train + val} <= domains
        assert spec.generator.tasks_dir == str(run / "data")
    n_all = len([p for p in (datasets / "tasks").iterdir() if p.is_dir()])
    assert len(train) + len(val) == n_all


def test_a_rerun_with_other_data_leaves_no_stale_tasks(datasets, tmp_path):
    run = tmp_path / "run"
    split = datasets / "split"
    _preflight(tmp_path, run, split / "train", split / "eval")
    # second run under the same name: the splits swapped; no task of run 1 stays behind
    _, overrides = _preflight(tmp_path, run, split / "eval", split / "train")
    train = _table(overrides["data.train_data"][0])
    eval_ids = {r["task_id"] for r in _table(run / "data" / "val.parquet")}
    assert not {r["task_id"] for r in train} & eval_ids
    folder = run / "data" / "train" / "tasks"
    assert len([p for p in folder.iterdir() if (p / "task.toml").is_file()]) == len(train)


def test_overlapping_train_and_eval_data_is_refused(datasets, tmp_path):
    with pytest.raises(BadRecordError, match=r"share \d+ task\(s\)"):
        _preflight(tmp_path, tmp_path / "run", datasets / "all", datasets / "split" / "eval")
    # shared worlds alone are refused too (different tasks of one world)
    from apexrl.train.entrypoint import check_disjoint

    with pytest.raises(BadRecordError, match=r"share 1 world\(s\): w1"):
        check_disjoint([{"task_id": "a", "world_id": "w1"}], [{"task_id": "b", "world_id": "w1"}])


def test_data_paths_become_absolute(tmp_path, monkeypatch):
    (tmp_path / "ds").mkdir()
    monkeypatch.chdir(tmp_path)
    assert absolute_data_path("ds", "--data") == str(tmp_path / "ds")
    assert absolute_data_path("hf://org/name", "--data") == "hf://org/name"
    assert absolute_data_path("/cluster/data", "--data") == "/cluster/data"
    with pytest.raises(UsageError, match="relative path"):
        absolute_data_path("missing/ds", "--data")


def test_manifest_git_revision_is_the_projects_not_the_callers(tmp_path, monkeypatch):
    import subprocess

    from apexrl.train.launch import git_revision, package_dir

    monkeypatch.chdir(tmp_path)  # not a git checkout
    rev, _ = git_revision()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=package_dir(), capture_output=True, text=True
    ).stdout.strip()
    assert rev == head and len(rev) == 40
