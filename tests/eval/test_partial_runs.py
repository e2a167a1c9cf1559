"""An interrupted eval is reported as such everywhere a user reads its figures (issue 32.1)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from apexrl.cli.app import app
from tests.eval.conftest import eval_runner, passing_trial


def interrupting_trial(after: int):
    """Passes `after` trials, then the user presses Ctrl-C."""
    seen = {"n": 0}

    def trial(task_dir, config):
        if seen["n"] >= after:
            raise KeyboardInterrupt
        seen["n"] += 1
        return passing_trial(task_dir, config)

    return trial


def run_args(tasks: Path, run_dir: Path) -> list[str]:
    return ["eval", "run", "--agent", "oracle", "-t", str(tasks), "-o", str(run_dir), "-k", "2"]


@pytest.fixture
def partial_run(task_dirs, tmp_path) -> Path:
    run_dir = tmp_path / "run"
    res = eval_runner(interrupting_trial(13)).invoke(app, run_args(task_dirs, run_dir))
    assert res.exit_code == 130, res.output
    assert "interrupted: 13 of 28 trial(s) have a result" in res.stderr
    assert "resume with: apexrl eval run ... -o" in res.stderr
    return run_dir


def test_summary_and_every_report_format_say_incomplete(partial_run, task_dirs):
    summary = orjson.loads((partial_run / "summary.json").read_bytes())
    assert summary["complete"] is False
    assert (summary["trials_planned"], summary["trials_done"]) == (28, 13)
    runner = eval_runner(passing_trial)
    res = runner.invoke(app, ["eval", "report", str(partial_run)])
    assert "INCOMPLETE: 13 of 28 planned trials" in res.stderr
    data = orjson.loads(res.stdout)
    assert (data["complete"], data["trials_planned"], data["trials_done"]) == (False, 28, 13)
    assert "eval run" in data["resume"]
    md = runner.invoke(app, ["eval", "report", str(partial_run), "-f", "md"]).stdout
    assert md.splitlines()[2].startswith("> **INCOMPLETE: 13 of 28 planned trials")
    table = runner.invoke(app, ["eval", "report", str(partial_run), "-f", "table"]).stdout
    assert "INCOMPLETE: 13 of 28" in table.split("\n")[0]
    html = runner.invoke(app, ["eval", "report", str(partial_run), "-f", "html", "-o", "-"]).stdout
    assert html.startswith("<!doctype html>") and "INCOMPLETE" in html
    # rerunning the same command resumes and completes it; the report stops warning
    res = runner.invoke(app, run_args(task_dirs, partial_run))
    assert res.exit_code == 0, res.output
    assert "15 trial(s) run, 13 already done" in res.stderr
    res = runner.invoke(app, ["eval", "report", str(partial_run)])
    data = orjson.loads(res.stdout)
    assert (data["complete"], data["trials_done"]) == (True, 28) and "resume" not in data
    assert "INCOMPLETE" not in res.stderr


def test_publish_refuses_an_incomplete_run_unless_allowed(partial_run, tmp_path):
    from apexrl.engine.tiny import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", num_layers=1, hidden_size=32)
    runner = eval_runner(passing_trial)
    args = ["publish", "model", str(ckpt), "--repo", "me/m", "--eval", str(partial_run)]
    res = runner.invoke(app, [*args, "--dry-run"])
    assert res.exit_code == 1, res.output
    assert "is incomplete (13 of 28 trials" in res.stderr and "--allow-incomplete" in res.stderr
    stage = tmp_path / "stage"
    res = runner.invoke(
        app, [*args, "--dry-run", "--allow-incomplete", "--stage", str(stage), "--json"]
    )
    assert res.exit_code == 0, res.output
    card = (stage / "README.md").read_text()
    assert "INCOMPLETE" in card and "13 of 28" in card


def test_publish_refuses_an_interrupted_run_from_before_the_fields(partial_run, tmp_path):
    """A summary.json written before `complete` existed: run.json's selection tells."""
    from apexrl.engine.tiny import make_tiny_checkpoint

    summary = orjson.loads((partial_run / "summary.json").read_bytes())
    for key in ("complete", "trials_planned", "trials_done"):
        summary.pop(key)
    (partial_run / "summary.json").write_bytes(orjson.dumps(summary))
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", num_layers=1, hidden_size=32)
    args = ["publish", "model", str(ckpt), "--repo", "me/m", "--eval", str(partial_run)]
    res = eval_runner(passing_trial).invoke(app, [*args, "--dry-run"])
    assert res.exit_code == 1 and "is incomplete (13 of 28 trials" in res.stderr, res.output


def test_publish_says_how_many_trials_were_graded_not_n_of_n(task_dirs, tmp_path):
    """Every planned trial ran but one ended in an engine error (ungraded): the refusal and
    the card say 27 of 28 graded, with the class, never "28 of 28 trials"."""
    from apexrl.artifacts.models import TrialResult
    from apexrl.engine.tiny import make_tiny_checkpoint
    from apexrl.trial.config import TrialOutcome

    first = sorted(p.name for p in task_dirs.iterdir() if p.is_dir())[0]

    def trial(task_dir, config):
        if task_dir.name == first and config.attempt == 1:
            out = passing_trial(task_dir, config).result
            bad = {"status": "error", "error_class": "llm_transient", "reward": 0.0}
            return TrialOutcome(result=TrialResult(**{**out.model_dump(), **bad}))
        return passing_trial(task_dir, config)

    run_dir = tmp_path / "run"
    res = eval_runner(trial).invoke(app, run_args(task_dirs, run_dir))
    assert res.exit_code == 4, res.output
    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", num_layers=1, hidden_size=32)
    runner = eval_runner(passing_trial)
    args = ["publish", "model", str(ckpt), "--repo", "me/m", "--eval", str(run_dir)]
    res = runner.invoke(app, [*args, "--dry-run"])
    assert res.exit_code == 1, res.output
    said = " ".join(res.stderr.split())
    assert "27 of 28 planned trials graded (1 ended in an infrastructure error" in said
    assert "llm_transient 1" in said and "28 of 28" not in said and "--retry-errors" in said
    stage = tmp_path / "stage"
    res = runner.invoke(
        app, [*args, "--dry-run", "--allow-incomplete", "--stage", str(stage), "--json"]
    )
    assert res.exit_code == 0, res.output
    card = (stage / "README.md").read_text()
    assert "INCOMPLETE: 27 of 28 planned trials graded" in card and "28 of 28" not in card


def test_report_of_an_incomplete_run_exits_partial_unless_allowed(partial_run, tmp_path):
    """`eval report` on an interrupted run writes its report (saying INCOMPLETE) and exits
    5 (partial), so a pipeline reading the exit code never takes part of a plan for the
    run; --allow-incomplete exits 0. A comparison with an incomplete side is partial too."""
    runner = eval_runner(passing_trial)
    target = tmp_path / "r.md"
    res = runner.invoke(app, ["eval", "report", str(partial_run), "-o", str(target)])
    assert res.exit_code == 5, res.output
    assert "INCOMPLETE: 13 of 28" in target.read_text()  # written all the same
    assert "--allow-incomplete" in res.stderr
    res = runner.invoke(app, ["eval", "report", str(partial_run), "-f", "json"])
    assert res.exit_code == 5 and orjson.loads(res.stdout)["complete"] is False
    res = runner.invoke(app, ["eval", "report", str(partial_run), "--allow-incomplete"])
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout)["complete"] is False
    res = runner.invoke(app, ["eval", "report", str(partial_run), str(partial_run), "-f", "md"])
    assert res.exit_code == 5 and "INCOMPLETE" in res.stdout


def test_report_of_a_run_with_ungraded_trials_exits_partial(task_dirs, tmp_path):
    """A run whose judge was unavailable for some trials: `eval run` exits 4, and its report
    exits 5 (not 0) while saying which trials are ungraded."""

    def judge_down_on_attempt_1(task_dir, config):
        out = passing_trial(task_dir, config)
        if config.attempt == 1:
            r = out.result.model_copy(
                update={"status": "no_verifier_result", "error_class": "judge_unavailable"}
            )
            out = out.model_copy(update={"result": r})
        return out

    run_dir = tmp_path / "run"
    runner = eval_runner(judge_down_on_attempt_1)
    assert runner.invoke(app, run_args(task_dirs, run_dir)).exit_code == 4
    res = runner.invoke(app, ["eval", "report", str(run_dir), "-f", "json"])
    assert res.exit_code == 5, res.output
    data = orjson.loads(res.stdout)
    assert data["complete"] is False and data["summary"]["trials_ungraded"] == 14
    assert "ended in an infrastructure error (judge_unavailable 14)" in res.stderr
    res = runner.invoke(app, ["eval", "report", str(run_dir), "--allow-incomplete"])
    assert res.exit_code == 0, res.output


def test_a_broken_task_is_reported_apart_and_exits_partial(task_dirs, tmp_path):
    """Trials of a task whose rubric is broken: `eval run` exits 5 (not 4: no
    infrastructure failed; not 0: they are ungraded), says it is the task's and how to
    fix it, and the report shows them in their own row, apart from infrastructure."""

    def broken_memo(task_dir, config):
        out = passing_trial(task_dir, config)
        if "memo" in task_dir.name:
            r = out.result.model_copy(
                update={"status": "no_verifier_result", "error_class": "bad_task_rubric"}
            )
            out = out.model_copy(update={"result": r})
        return out

    run_dir = tmp_path / "run"
    runner = eval_runner(broken_memo)
    res = runner.invoke(app, run_args(task_dirs, run_dir))
    assert res.exit_code == 5, res.output
    assert "ended in a task error (bad_task_rubric" in res.stderr
    assert "--retry-errors does not rerun them" in res.stderr
    assert "infrastructure error" not in res.stderr
    md = runner.invoke(app, ["eval", "report", str(run_dir), "-f", "md"]).stdout
    assert "| ungraded (task errors) |" in md and "| ungraded (infrastructure) |" not in md
    page = runner.invoke(app, ["eval", "report", str(run_dir), "-f", "html", "-o", "-"]).stdout
    assert "bad_task_rubric (task error: ungraded)" in page
    # publish model refuses it, naming the task error and its fix (not --retry-errors)
    from apexrl.engine.tiny import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", num_layers=1, hidden_size=32)
    args = ["publish", "model", str(ckpt), "--repo", "me/m", "--eval", str(run_dir), "--dry-run"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    assert "a task error: bad_task_rubric 4" in res.stderr
    assert "--retry-task-errors" in res.stderr and "--retry-errors`" not in res.stderr
