"""A run is its plan: run.json records the selected tasks and k; a rerun with another
selection is refused (or extends the plan with --extend), and every figure is computed
over the planned trials only."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from apexrl.eval.models import EvalRunConfig
from tests.eval.conftest import eval_runner, passing_trial


def run_args(tasks: Path, run_dir: Path, *extra: str) -> list[str]:
    return ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run_dir), *extra]


def summary(run_dir: Path) -> dict:
    return orjson.loads((run_dir / "summary.json").read_bytes())


def fails_on(bad: set[tuple[str, int]]):
    """A trial function whose (task dir name, attempt) pairs in `bad` fail every criterion."""

    def trial(task_dir, config):
        out = passing_trial(task_dir, config)
        if (task_dir.name, config.attempt) in bad:
            out.result.criteria_met, out.result.reward = 0, 0.0
        return out

    return trial


@pytest.fixture
def numbered(task_dirs) -> tuple[Path, list[str]]:
    names = sorted(p.name for p in task_dirs.iterdir() if p.is_dir())
    return task_dirs, names


def test_rerun_with_another_limit_or_k_is_refused_and_done_never_exceeds_the_plan(
    task_dirs, tmp_path
):
    runner = eval_runner(passing_trial)
    run_dir = tmp_path / "run"
    first = runner.invoke(app, run_args(task_dirs, run_dir, "--limit", "5", "-k", "2"))
    assert first.exit_code == 0, first.output
    for extra in (["--limit", "4"], ["--limit", "5"], ["--limit", "6", "-k", "2"], ["-k", "3"]):
        res = runner.invoke(app, run_args(task_dirs, run_dir, *extra))
        assert res.exit_code == 2, (extra, res.output)
        assert "planned as 5 task(s) x 2 attempt(s)" in res.stderr and "--extend" in res.stderr
    s = summary(run_dir)
    assert (s["trials_done"], s["trials_planned"], s["complete"]) == (10, 10, True)
    # the same selection resumes; --extend grows the plan, never past what it ran
    res = runner.invoke(app, run_args(task_dirs, run_dir, "--limit", "5", "-k", "2"))
    assert res.exit_code == 0 and "0 trial(s) run, 10 already done" in res.stderr
    res = runner.invoke(app, run_args(task_dirs, run_dir, "--limit", "6", "-k", "3", "--extend"))
    assert res.exit_code == 0, res.output
    s = summary(run_dir)
    assert (s["trials_done"], s["trials_planned"]) == (18, 18)
    assert s["pass_hat_k"]["3"]["value"] == 1.0  # every trial passed: so does every metric
    plan = EvalRunConfig.model_validate_json((run_dir / "run.json").read_bytes()).plan
    assert plan is not None and len(plan.tasks) == 6 and plan.attempts == 3
    # a smaller selection with --extend keeps the plan as it is
    res = runner.invoke(app, run_args(task_dirs, run_dir, "--limit", "2", "--extend"))
    assert res.exit_code == 0 and summary(run_dir)["trials_planned"] == 18


def test_pass_hat_k_on_a_mixed_rerun_matches_the_hand_computed_value(numbered, tmp_path):
    """Run 1: 5 tasks x 1 attempt, all pass. Run 2 (--force: the selection replaces the
    plan, results of trials in both are kept): 3 tasks x 3 attempts where task 0 fails
    attempt 1 and task 1 fails attempt 2. Tasks 3 and 4 (one attempt each) are outside
    the plan: counted, they would drag Pass^k down with "missing" attempts.

    Per task (n = 3): c = 2, 2, 3.
      Pass@1 = (2/3 + 2/3 + 1) / 3 = 7/9
      Pass^2 = (C(2,2) + C(2,2) + C(3,2)) / C(3,2) / 3 = (1/3 + 1/3 + 1) / 3 = 5/9
      Pass^3 = (0 + 0 + 1) / 3 = 1/3
      Pass@2 = Pass@3 = 1 (every task passed at least once)"""
    tasks, names = numbered
    run_dir = tmp_path / "run"
    first = eval_runner(passing_trial).invoke(app, run_args(tasks, run_dir, "--limit", "5"))
    assert first.exit_code == 0, first.output
    mixed = eval_runner(fails_on({(names[0], 1), (names[1], 2)}))
    res = mixed.invoke(app, run_args(tasks, run_dir, "--limit", "3", "-k", "3", "--force"))
    assert res.exit_code == 1, res.output  # the oracle did not pass everything: exit 1
    assert "6 trial(s) run, 3 already done" in res.stderr
    s = summary(run_dir)
    assert (s["trials_done"], s["trials_planned"], s["n_tasks"]) == (9, 9, 3)
    assert s["pass_at_1"]["value"] == pytest.approx(7 / 9)
    assert s["pass_hat_k"]["2"]["value"] == pytest.approx(5 / 9)
    assert s["pass_hat_k"]["3"]["value"] == pytest.approx(1 / 3)
    assert s["pass_at_k"]["2"]["value"] == s["pass_at_k"]["3"]["value"] == 1.0
    assert len(pq.read_table(run_dir / "results.parquet")) == 9
    rep = eval_runner(passing_trial).invoke(app, ["eval", "report", str(run_dir), "-f", "json"])
    assert orjson.loads(rep.stdout)["summary"]["pass_hat_k"]["2"]["value"] == pytest.approx(5 / 9)


def test_task_id_selects_repeatably_with_a_did_you_mean(numbered, tmp_path):
    tasks, names = numbered
    runner = eval_runner(passing_trial)
    run_dir = tmp_path / "run"
    res = runner.invoke(app, run_args(tasks, run_dir, "--task-id", names[2], "--task-id", names[5]))
    assert res.exit_code == 0, res.output
    plan = EvalRunConfig.model_validate_json((run_dir / "run.json").read_bytes()).plan
    assert plan is not None and plan.tasks == [names[2], names[5]]
    res = runner.invoke(app, run_args(tasks, tmp_path / "r2", "--task-id", names[2] + "x"))
    assert res.exit_code == 2 and f"did you mean {names[2]!r}" in res.stderr


def test_shuffle_is_fixed_by_the_seed(numbered, tmp_path):
    tasks, names = numbered
    runner = eval_runner(passing_trial)

    def planned(name: str, *extra: str) -> list[str]:
        res = runner.invoke(app, run_args(tasks, tmp_path / name, "--limit", "4", *extra))
        assert res.exit_code == 0, res.output
        cfg = EvalRunConfig.model_validate_json((tmp_path / name / "run.json").read_bytes())
        return cfg.plan.tasks

    assert planned("plain") == names[:4]
    a = planned("a", "--shuffle", "--seed", "7")
    assert a == planned("b", "--shuffle", "--seed", "7") != names[:4]
    assert planned("c", "--shuffle", "--seed", "8") != a
