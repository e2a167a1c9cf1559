"""`eval regrade` into an existing folder: only a regrade of the same source run, with
the same graders, judge (model and URL), reward and options, may reuse its grades;
anything else is refused. A new --judge never inherits the old run's judge URL."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from apexrl.cli.app import app
from apexrl.errors import UsageError
from apexrl.eval.regrade import RegradeRequest, judge_settings, regrade
from apexrl.eval.resume import load_config
from apexrl.eval.runner import EvalRequest, run_eval
from apexrl.grading.inputs import GradingInputs, write_inputs
from tests.eval.conftest import eval_runner, passing_trial


def kept_evidence(task_dir, config):
    """A passing trial that keeps grading evidence, as apexrl's verifier does."""
    out = passing_trial(task_dir, config)
    inputs = GradingInputs(task_id=out.result.task_id, task_prompt="t", answer="an answer")
    write_inputs(Path(config.logs_dir) / "verifier" / "inputs", inputs, None, None)
    return out


def source_run(task_dirs: Path, run_dir: Path) -> Path:
    req = EvalRequest(tasks=str(task_dirs), run_dir=run_dir, agent="oracle", limit=2, judge="none")
    run_eval(req, trial_fn=kept_evidence)
    return run_dir


def test_regrade_output_must_belong_to_the_same_run_judge_and_options(task_dirs, tmp_path):
    a, b = source_run(task_dirs, tmp_path / "a"), source_run(task_dirs, tmp_path / "b")
    out = tmp_path / "out"
    runner = eval_runner(passing_trial)
    res = runner.invoke(app, ["eval", "regrade", str(a), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout.splitlines()[-1])["graded"] == 2
    held = orjson.loads((out / "regrade.json").read_bytes())
    assert held["source"] == str(a.resolve()) and held["reward"] == "pass"
    # the same regrade again: its grades are reused
    res = runner.invoke(app, ["eval", "regrade", str(a), "-o", str(out)])
    assert res.exit_code == 0 and orjson.loads(res.stdout.splitlines()[-1])["reused"] == 2
    # another source run, reward or option into the same folder: refused, nothing mixed
    for extra, what in (
        ([str(b)], "source"),
        ([str(a), "--reward", "score"], "reward"),
        ([str(a), "--grader-option", "evidence_caps"], "grader_options"),
    ):
        res = runner.invoke(app, ["eval", "regrade", *extra, "-o", str(out)])
        assert res.exit_code == 2, (extra, res.output)
        assert "holds a regrade of another run, judge or options" in res.stderr
        assert f"{what}:" in res.stderr
    with pytest.raises(UsageError, match="judge_api_base"):
        regrade(
            RegradeRequest(
                run_dir=a,
                out=out,
                graders=["apexrl"],
                judge="openai/j",
                judge_api_base="http://127.0.0.1:9/v1",
            )
        )
    # a folder regrade did not write is refused too
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    res = runner.invoke(app, ["eval", "regrade", str(a), "-o", str(foreign)])
    assert res.exit_code == 2 and "holds no regrade.json" in res.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]


def test_a_new_judge_in_regrade_does_not_inherit_the_old_runs_api_base(task_dirs, tmp_path):
    old = load_config(source_run(task_dirs, tmp_path / "a")).model_copy(
        update={"judge": "openai/old", "judge_api_base": "http://old.invalid/v1"}
    )

    def settings(**kw):
        return judge_settings(
            RegradeRequest(run_dir=tmp_path, out=tmp_path, graders=["apexrl"], **kw), old
        )

    assert settings().model == "openai/old"
    assert settings().api_base == "http://old.invalid/v1"  # the run's own judge: its URL
    new = settings(judge="gemini/gemini-2.5-flash")
    assert new.model == "gemini/gemini-2.5-flash" and new.api_base is None
    given = settings(judge="openai/new", judge_api_base="http://new.invalid/v1")
    assert given.api_base == "http://new.invalid/v1"
    moved = settings(judge_api_base="http://moved.invalid/v1")  # the same judge, moved
    assert moved.model == "openai/old" and moved.api_base == "http://moved.invalid/v1"
