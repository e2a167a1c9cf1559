"""Infrastructure is never a score: a judge that cannot answer stops the run before any
trial (a real probe request), and one that dies midway leaves its trials ungraded (exit
4, named), which `eval regrade` then grades."""

from __future__ import annotations

import time

import orjson

from apexrl.cli.app import app
from tests.eval.conftest import eval_runner, passing_trial
from tests.trial.fake_judge import GOOD_TRUE, fake_judge


def test_unreachable_judge_stops_the_run_before_any_trial(task_dirs, tmp_path):
    calls = []

    def trial(task_dir, config):
        calls.append(task_dir.name)
        return passing_trial(task_dir, config)

    run_dir = tmp_path / "run"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(task_dirs), "-o", str(run_dir)]
    args += ["--judge", "openai/x", "--judge-api-base", "http://127.0.0.1:9/v1", "--limit", "2"]
    t0 = time.monotonic()
    res = eval_runner(trial).invoke(app, args)
    assert res.exit_code == 4, res.output
    assert (
        "preflight failed" in res.stderr
        and "the judge openai/x at http://127.0.0.1:9/v1" in res.stderr
    )
    assert "does not answer" in res.stderr
    assert calls == [] and not run_dir.exists()  # no trial, no run folder left
    assert time.monotonic() - t0 < 60


def test_a_judge_that_answers_the_probe_lets_the_run_start(task_dirs, tmp_path):
    with fake_judge([GOOD_TRUE]) as judge:
        args = ["eval", "run", "--agent", "oracle", "--tasks", str(task_dirs)]
        args += ["-o", str(tmp_path / "run"), "--limit", "2"]
        args += ["--judge", "openai/judge", "--judge-api-base", judge.url]
        res = eval_runner(passing_trial).invoke(app, args)
        assert res.exit_code == 0, res.output
        assert len(judge.requests) == 1  # the probe: one request, as grading sends it
        probe = judge.requests[0]
        assert probe["model"] == "judge" and probe.get("response_format")
        assert orjson.loads((tmp_path / "run" / "summary.json").read_bytes())["complete"]
