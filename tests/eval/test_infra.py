"""Infrastructure is never a score: a judge that cannot answer stops the run before any
trial (a real probe request), and one that dies midway leaves its trials ungraded (exit
4, named), which `eval regrade` then grades."""

from __future__ import annotations

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
    res = eval_runner(trial).invoke(app, args)
    assert res.exit_code == 4, res.output
    assert (
        "preflight failed" in res.stderr
        and "the judge openai/x at http://127.0.0.1:9/v1" in res.stderr
    )
    assert "does not answer" in res.stderr
    assert calls == [] and not run_dir.exists()  # no trial, no run folder left


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


def test_a_judge_dying_midway_exits_4_names_the_ungraded_and_regrade_grades_them_all(
    example_dirs, tmp_path
):
    """Real oracle trials (Harbor, the local sandbox, apexrl's verifier) judged by a
    scripted server that answers the probe and the first two trials, then fails every
    request. Those trials are ungraded (exit 4, named); `--retry-errors` with another
    judge URL is accepted (a grading-only change); `eval regrade` with a working judge
    grades every trial, the ungraded ones included."""
    from apexrl.trial.run import run_trial

    expert, tasks = example_dirs
    run_dir = tmp_path / "run"
    finished: list[str] = []
    with fake_judge([GOOD_TRUE]) as judge:

        def trial(task_dir, config):
            if len(finished) == 2:  # the judge dies
                judge.replies = [500]
            out = run_trial(task_dir, config)
            finished.append(task_dir.name)
            return out

        args = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run_dir)]
        args += ["--worlds", str(expert / "world_files_zipped"), "--limit", "4", "-n", "1"]
        args += ["--judge", "openai/judge", "--judge-api-base", judge.url]
        res = eval_runner(trial).invoke(app, args)
    assert res.exit_code == 4, res.output
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["trials_ungraded"] >= 1 and s["exit_code"] == 4 and not s["complete"]
    assert set(s["infra_errors"]) == {"judge_unavailable"}
    assert s["n_trials"] + s["trials_ungraded"] == 4
    assert all(t in res.stderr for t in s["ungraded_trials"]) and "eval regrade" in res.stderr
    ungraded = set(s["ungraded_trials"])
    with fake_judge([GOOD_TRUE]) as good:
        out = tmp_path / "regraded"
        args = ["eval", "regrade", str(run_dir), "-o", str(out)]
        args += ["--judge", "openai/judge", "--judge-api-base", good.url]
        res = eval_runner(passing_trial).invoke(app, args)
        assert res.exit_code == 0, res.output
        rec = orjson.loads(res.stdout.strip().splitlines()[-1])
        assert rec["graded"] == 4 and rec["kept"] == 0 and rec["missing"] == []
        r = rec["summary"]
        assert (r["n_trials"], r["trials_ungraded"], r["complete"]) == (4, 0, True)
        assert r["pass_at_1"]["value"] == 1.0  # the oracle, graded: every trial passes
        rows = {
            x["trial_id"]: x
            for x in (
                orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()
            )
        }
        assert all(rows[t]["status"] == "complete" and not rows[t]["error_class"] for t in ungraded)
        # --retry-errors with another judge URL: accepted, reruns only the ungraded trials
        reran: list[str] = []

        def again(task_dir, config):
            reran.append(config.logs_dir.name)
            return run_trial(task_dir, config)

        args = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run_dir)]
        args += ["--worlds", str(expert / "world_files_zipped"), "--limit", "4", "-n", "1"]
        args += ["--judge", "openai/judge", "--judge-api-base", good.url, "--retry-errors"]
        res = eval_runner(again).invoke(app, args)
        assert res.exit_code == 0, res.output
        assert set(reran) == ungraded
        s = orjson.loads((run_dir / "summary.json").read_bytes())
        assert s["complete"] and s["trials_ungraded"] == 0 and s["pass_at_1"]["value"] == 1.0
