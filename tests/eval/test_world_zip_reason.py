"""A corrupt world zip (issue 32.3): convert refuses it, the preflight opens every zip it
will use, and a trial that meets one anyway puts the reason in the summary and report,
as the world store's failure (class world_store), not the task's."""

from __future__ import annotations

import shutil

import orjson
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.cli.eval import EvalDeps


def _junk_store(expert, tmp_path) -> tuple:
    store = tmp_path / "worlds"
    shutil.copytree(expert / "world_files_zipped", store)
    law = next(
        r["world_id"]
        for r in orjson.loads((expert / "tasks_and_rubrics.json").read_bytes())
        if r["domain"] == "law"
    )
    (store / f"{law}.zip").write_bytes(b"this is not a zip\n")
    return store, law


def test_convert_refuses_a_junk_world_zip(example_dirs, tmp_path):
    expert, _ = example_dirs
    src = tmp_path / "expert"
    shutil.copytree(expert, src)
    _, law = _junk_store(expert, tmp_path)
    (src / "world_files_zipped" / f"{law}.zip").write_bytes(b"junk")
    res = CliRunner().invoke(app, ["tasks", "convert", str(src), "-o", str(tmp_path / "t")])
    assert res.exit_code == 5, res.output  # the good tasks written, the bad ones named
    assert f"{law}.zip is not a readable zip" in res.stderr


def test_preflight_opens_every_world_zip(example_dirs, tmp_path):
    expert, tasks = example_dirs
    store, law = _junk_store(expert, tmp_path)
    res = CliRunner().invoke(
        app,
        ["eval", "run", "--agent", "oracle", "-t", str(tasks), "--worlds", str(store)]
        + ["-o", str(tmp_path / "run"), "--domain", "law", "--limit", "1"],
    )
    assert res.exit_code == 2, res.output
    assert f"{law}.zip: not a readable zip" in res.stderr


def test_the_reason_reaches_summary_and_report(example_dirs, tmp_path):
    from apexrl.trial.run import run_trial  # real trials: Harbor, bubblewrap, grading

    expert, tasks = example_dirs
    store, law = _junk_store(expert, tmp_path)
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(
        app,
        ["eval", "run", "--agent", "oracle", "-t", str(tasks), "--worlds", str(store)]
        + ["-o", str(run_dir), "--domain", "law", "--limit", "1"],
        obj=EvalDeps(trial_fn=run_trial),  # no preflight: the trial meets the zip itself
    )
    # the world store's fault, neither the model's nor the task's: ungraded, counted with
    # the infrastructure (exit 4, rerun by --retry-errors once the store is fixed)
    assert res.exit_code == 4, res.output
    assert "not a readable zip" in res.stderr  # said at the end of the run
    assert "ended in an infrastructure error (world_store 1)" in res.stderr
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    (cls, msgs), *_ = summary["error_messages"].items()
    assert cls == "world_store" and summary["infra_errors"] == {cls: 1}
    assert summary["task_errors"] == {} and summary["trials_ungraded"] == 1
    assert any(f"{law}.zip" in m and "not a readable zip" in m for m in msgs), msgs
    md = CliRunner().invoke(app, ["eval", "report", str(run_dir), "-f", "md"]).stdout
    assert "not a readable zip" in md
    # a regrade cannot grade it (the agent never ran): it names --retry-errors
    res = CliRunner().invoke(app, ["eval", "regrade", str(run_dir), "-o", str(tmp_path / "rg")])
    assert res.exit_code == 4, res.output
    assert "--retry-errors`" in res.stderr and "broken tasks'" not in res.stderr
