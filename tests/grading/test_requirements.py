"""Does a rubric need the judge, and is one configured: checked before any trial."""

from __future__ import annotations

import json

import pytest

from apexrl.cli.app import app
from apexrl.errors import AuthError, BadRecordError, ExitCode, UsageError
from apexrl.grading.requirements import (
    NO_JUDGE,
    check_judge,
    criterion_needs_judge,
    judge_credentials,
    judge_model,
    judge_needs,
)


def _task(root, name, criteria):
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "tests" / "verifiers.json").write_text(json.dumps(criteria))
    return d


FREE = {"verifier_id": "v1", "criteria": "States the 2023 EBITDA margin as 23.4%"}
CHECKED = {
    "verifier_id": "v2",
    "criteria": "answer has 42",
    "check": {"kind": "contains", "value": "42"},
}


def test_which_criteria_need_a_judge(tmp_path, task_dirs):
    assert criterion_needs_judge(FREE) and not criterion_needs_judge(CHECKED)
    a = _task(tmp_path, "a", [FREE, CHECKED])
    b = _task(tmp_path, "b", [CHECKED])
    n = judge_needs([a, b])
    assert (n.n_tasks, n.n_criteria, n.n_judge_criteria, n.tasks_needing) == (2, 3, 1, ["a"])
    assert not judge_needs([b]).needed
    # the converted example data (real-shape rubrics): free-text criteria need the judge
    ex = judge_needs(sorted(p for p in task_dirs.iterdir() if p.is_dir()))
    assert ex.n_tasks == 14 and ex.needed
    assert judge_model(None) is None and judge_model(NO_JUDGE) is None
    assert judge_model("None") is None and judge_model("openai/j") == "openai/j"


def test_no_judge_configured_is_refused_naming_both_flags(tmp_path):
    a = _task(tmp_path, "a", [FREE, CHECKED])
    with pytest.raises(UsageError) as e:
        check_judge([a], None)
    text = f"{e.value} {e.value.hint}"
    assert "--judge" in text and "--no-judge" in text and "1 of 2 rubric criteria" in text
    assert e.value.code == ExitCode.USAGE
    assert check_judge([a], NO_JUDGE).n_judge_criteria == 1  # explicitly off: runs
    assert not check_judge([_task(tmp_path, "b", [CHECKED])], None).needed  # nothing to judge


def test_judge_credentials(tmp_path):
    a = _task(tmp_path, "a", [FREE])
    with pytest.raises(AuthError) as e:
        check_judge([a], "gemini/gemini-2.5-flash", environ={})
    assert "GOOGLE_API_KEY" in str(e.value) and e.value.code == ExitCode.AUTH
    judge_credentials("gemini/gemini-2.5-flash", environ={"GOOGLE_API_KEY": "k"})
    judge_credentials("gemini/gemini-2.5-flash", environ={"GEMINI_API_KEY": "k"})
    with pytest.raises(AuthError, match="OPENAI_API_KEY"):
        judge_credentials("openai/gpt-4.1", environ={})
    judge_credentials("openai/my-judge", "http://127.0.0.1:1/v1", environ={})  # own server
    with pytest.raises(UsageError, match="not a LiteLLM model"):
        judge_credentials("no-such-provider-model-xyz", environ={})


def test_bad_rubric_names_the_file(tmp_path):
    d = tmp_path / "t"
    (d / "tests").mkdir(parents=True)
    with pytest.raises(BadRecordError, match="no rubric"):
        judge_needs([d])
    (d / "tests" / "verifiers.json").write_text('{"not": "a list"}')
    with pytest.raises(BadRecordError, match="verifiers.json"):
        judge_needs([d])


def test_eval_run_refuses_before_any_trial(runner, task_dirs, tmp_path, monkeypatch):
    from tests.eval.conftest import eval_runner

    ran = []
    runner = eval_runner(lambda *a: ran.append(a))
    for k in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    base = ["eval", "run", "--agent", "oracle", "-t", str(task_dirs)]
    res = runner.invoke(app, [*base, "-o", str(tmp_path / "r1"), "--judge", "x", "--no-judge"])
    assert res.exit_code == 2 and "exclude each other" in res.stderr
    res = runner.invoke(
        app, [*base, "-o", str(tmp_path / "r2"), "--judge", "gemini/gemini-2.5-flash"]
    )
    assert res.exit_code == 3 and "GOOGLE_API_KEY" in res.stderr, res.output
    assert not ran and not (tmp_path / "r2" / "results.parquet").exists()


def test_packed_dataset_rubrics_read_in_memory(runner, task_dirs, tmp_path):
    from apexrl.grading.requirements import dataset_judge_needs

    out = tmp_path / "ds"
    res = runner.invoke(app, ["tasks", "pack", str(task_dirs), "-o", str(out)])
    assert res.exit_code == 0, res.output
    packed = dataset_judge_needs(str(out))
    direct = judge_needs(sorted(p for p in task_dirs.iterdir() if p.is_dir()))
    assert (packed.n_tasks, packed.n_criteria, packed.n_judge_criteria) == (
        direct.n_tasks,
        direct.n_criteria,
        direct.n_judge_criteria,
    )
    assert dataset_judge_needs("hf://org/name") is None  # checked when the trials run


def test_train_refuses_without_a_judge(runner, task_dirs, monkeypatch):
    base = ["train", "smoke-1gpu", "--data", str(task_dirs), "--dry-run", "--json"]
    res = runner.invoke(app, base)
    assert res.exit_code == 2, res.output
    assert "agent.judge=none" in res.stderr and "--judge" in res.stderr
    res = runner.invoke(app, [*base, "--set", 'agent.judge="none"'])
    assert res.exit_code == 0, res.output
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    res = runner.invoke(app, [*base, "--set", 'agent.judge="openai/gpt-4.1"'])
    assert res.exit_code == 3 and "OPENAI_API_KEY" in res.stderr


def test_eval_defaults_and_unjudged_warning(runner, task_dirs, tmp_path, monkeypatch):
    from apexrl.eval.models import EvalRunConfig, EvalSummary
    from apexrl.eval.report import summary_rows
    from tests.eval.conftest import eval_runner, passing_trial

    runner = eval_runner(passing_trial)
    run = tmp_path / "run"
    args = ["eval", "run", "--agent", "oracle", "-t", str(task_dirs), "-o", str(run)]
    res = runner.invoke(app, [*args, "--limit", "2", "--reward", "score"])
    assert res.exit_code == 0, res.output
    cfg = EvalRunConfig.model_validate_json((run / "run.json").read_bytes())
    assert cfg.budgets.max_steps == 250 and cfg.budgets.nudge == "off"  # the recipe's eval
    assert cfg.budgets.outcome_policy == "recipe" and cfg.reward == "score"
    s = EvalSummary.model_validate_json((run / "summary.json").read_bytes())
    rows = summary_rows(s.model_copy(update={"criteria_unjudged": 7}))
    assert rows[0] == (
        "WARNING",
        "7 criteria unjudged (free text, run with --no-judge): counted as unmet, "
        "so Pass@1 and mean score understate the run",
    )
    assert summary_rows(s)[0][0] != "WARNING"


def test_train_jax_backend_refuses_without_a_judge_before_any_trial(runner, task_dirs, tmp_path):
    """The JAX backend is chosen by the library (apexrl.train.job.run_train), so the judge
    check covers it as it covers the Ray backend: exit 2 before any trial or folder."""
    runs = tmp_path / "runs"
    recipe = tmp_path / "jax.toml"
    recipe.write_text(
        'name = "jax-judge"\n[model]\npath = "synthetic:letters"\n'
        '[training]\nbackend = "jax"\nmax_steps = 1\n'
        '[algorithm]\npolicy_loss = "ppo"\n'
        f'[checkpoint]\npath = "{runs}/{{run_name}}/ckpts"\n'
    )
    for extra in ([], ["--dry-run"]):
        res = runner.invoke(app, ["train", str(recipe), "--data", str(task_dirs), *extra])
        assert res.exit_code == 2, res.output
        assert "no judge is configured" in res.stderr and "agent.judge=none" in res.stderr
        assert not runs.exists()  # nothing started: no run folder, no trial
