"""`-` as stdin and stdout wherever a file is taken (issue 32.2): `tasks ls` records carry
where each task is, so a filtered listing piped to `eval run --tasks -` runs exactly those."""

from __future__ import annotations

import shutil

import orjson
from typer.testing import CliRunner

from apexrl.cli.app import app
from tests.eval.conftest import eval_runner, passing_trial


def test_piped_listing_runs_exactly_the_piped_tasks(task_dirs, tmp_path, monkeypatch):
    runner = CliRunner()
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(task_dirs), "-o", str(ds)]).exit_code == 0
    listing = [orjson.loads(x) for x in runner.invoke(app, ["tasks", "ls", str(ds)]).stdout.split()]
    assert len(listing) == 14 and all(r["shard"].startswith("/") for r in listing)
    law = [r for r in listing if r["domain"] == "law"][:2]
    # a stray folder named `-` in the working folder is not what `-` means
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(task_dirs, elsewhere / "-")
    monkeypatch.chdir(elsewhere)
    piped = "".join(orjson.dumps(r).decode() + "\n" for r in law)
    res = eval_runner(passing_trial).invoke(
        app, ["eval", "run", "--agent", "oracle", "--tasks", "-", "-o", "run"], input=piped
    )
    assert res.exit_code == 0, res.output
    s = orjson.loads(res.stdout)
    assert (s["n_tasks"], s["n_trials"], s["complete"]) == (2, 2, True)
    ran = sorted(
        p.name for p in (elsewhere / "run" / "tasks").iterdir() if not p.name.startswith(".")
    )
    assert ran == sorted(r["path"] for r in law)
    # task folders (convert / ls of a folder) and plain paths work the same way
    dirs = [
        orjson.loads(x) for x in runner.invoke(app, ["tasks", "ls", str(task_dirs)]).stdout.split()
    ]
    assert all(r["task_dir"].startswith("/") for r in dirs)
    res = runner.invoke(app, ["tasks", "ls", "-"], input=f"{task_dirs}\n")
    assert len(res.stdout.split()) == 14
    res = runner.invoke(app, ["tasks", "ls", "-"], input=orjson.dumps(dirs[0]).decode() + "\n")
    assert [orjson.loads(res.stdout)["path"]] == [dirs[0]["path"]]
    # a record that says not where its task is: named, with the fix
    res = runner.invoke(app, ["tasks", "ls", "-"], input='{"path": "x"}\n')
    assert res.exit_code == 1 and "stdin:1" in res.stderr and "tasks ls" in res.stderr


def test_dash_inputs_and_outputs(task_dirs, tmp_path, monkeypatch):
    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(task_dirs), "-o", str(ds)]).exit_code == 0
    two = "".join(runner.invoke(app, ["tasks", "ls", str(ds)]).stdout.splitlines(True)[:2])
    res = runner.invoke(app, ["tasks", "validate", "-"], input=two)
    assert res.exit_code == 0 and "validated 2 task(s)" in res.stderr, res.output
    res = runner.invoke(app, ["tasks", "unpack", "-", "-o", "out"], input=two)
    assert res.exit_code == 0, res.output
    assert len([p for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")]) == 2
    # folder outputs refuse `-` (no folder named -)
    for args in (
        ["tasks", "pack", str(task_dirs), "-o", "-"],
        ["tasks", "unpack", str(ds), "-o", "-"],
        ["tasks", "split", str(ds), "-o", "-"],
        ["tasks", "convert", str(task_dirs), "-o", "-"],
        ["tasks", "example", "-o", "-"],
        ["eval", "run", "--agent", "oracle", "-t", str(task_dirs), "-o", "-"],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "cannot go to stdout" in res.stderr, (args, res.output)
    assert not (tmp_path / "-").exists()
