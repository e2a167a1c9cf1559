"""`eval regrade` over a run one of whose tasks is broken since (its rubric no longer
reads): that trial is recorded ungraded with the task's error class, every other trial
is graded, and the regrade exits 5 (partial) naming the broken task."""

from __future__ import annotations

import orjson

from apexrl.cli.app import app
from tests.eval.conftest import eval_runner, passing_trial
from tests.eval.test_regrade_claims import source_run


def _rows(run):
    from apexrl.eval.resume import load_journal

    return {tid: r.model_dump() for tid, r in load_journal(run).items()}


def test_a_broken_rubric_is_recorded_and_the_others_are_graded(task_dirs, tmp_path):
    run = source_run(task_dirs, tmp_path / "run")
    (bad_tid, bad_row), (good_tid, _) = sorted(_rows(run).items())
    broken = next(
        d for d in task_dirs.iterdir() if bad_row["task_id"] in (d / "task.toml").read_text()
    )
    rubric = broken / "tests" / "verifiers.json"
    good_rubric = rubric.read_bytes()
    rubric.write_text("{ not json")
    out = tmp_path / "rg"
    runner = eval_runner(passing_trial)
    res = runner.invoke(app, ["eval", "regrade", str(run), "-o", str(out)])
    assert res.exit_code == 5, res.output
    rec = orjson.loads(res.stdout.splitlines()[-1])
    assert rec["graded"] == 1 and rec["task_errors"] == [bad_tid]
    assert rec["summary"]["task_errors"] == {"bad_task_rubric": 1}
    assert rec["summary"]["infra_errors"] == {} and rec["summary"]["trials_ungraded"] == 1
    assert bad_tid in res.stderr and "verifiers.json" in res.stderr
    assert "--retry-errors`" not in res.stderr  # rerunning a broken task fails the same way
    new = _rows(out)
    assert (new[bad_tid]["status"], new[bad_tid]["error_class"]) == ("error", "bad_task_rubric")
    assert "verifiers.json" in new[bad_tid]["error_message"]
    assert new[good_tid]["status"] == "complete"  # graded now
    # the task fixed, the same regrade grades it and reuses the other trial's grade
    rubric.write_bytes(good_rubric)
    res = runner.invoke(app, ["eval", "regrade", str(run), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rec = orjson.loads(res.stdout.splitlines()[-1])
    assert (rec["graded"], rec["reused"], rec["task_errors"]) == (1, 1, [])
    assert _rows(out)[bad_tid]["status"] == "complete"


def test_unreadable_kept_evidence_keeps_that_row_and_grades_the_others(task_dirs, tmp_path):
    """A trial's kept inputs.json is written beside the sandbox: a corrupt one is that
    trial's problem (its row kept as it was, exit 5), not the end of the regrade."""
    run = source_run(task_dirs, tmp_path / "run")
    (bad_tid, bad_row), (good_tid, _) = sorted(_rows(run).items())
    inputs = run / "logs" / bad_tid / "verifier" / "inputs" / "inputs.json"
    assert inputs.is_file()
    inputs.write_text("{ not json")
    out = tmp_path / "rg"
    res = eval_runner(passing_trial).invoke(app, ["eval", "regrade", str(run), "-o", str(out)])
    assert res.exit_code == 5, res.output
    rec = orjson.loads(res.stdout.splitlines()[-1])
    assert rec["graded"] == 1 and rec["missing"] == [bad_tid] and rec["task_errors"] == []
    assert "kept no readable grading inputs" in res.stderr
    new = _rows(out)
    assert new[bad_tid] == bad_row and new[good_tid]["status"] == "complete"
