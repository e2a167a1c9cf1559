"""`eval regrade` into an existing folder: only a regrade of the same source run, with
the same graders, judge (model and URL), reward and options, may reuse its grades;
anything else is refused. A new --judge never inherits the old run's judge URL."""

from __future__ import annotations

import re
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


def test_the_identity_claimed_and_how_a_claim_is_checked(task_dirs, tmp_path):
    """What regrade.json records (each field a regrade's grades depend on), how it is
    written, and each refusal's words, named field by field."""
    from apexrl.eval.regrade import claim_output, regrade_identity
    from apexrl.grading.judge import JudgeSettings

    run = source_run(task_dirs, tmp_path / "a")
    old = load_config(run).model_copy(update={"archipelago": "/old/arch"})
    judge = JudgeSettings(model="openai/j", api_base="http://j.invalid/v1")

    def req(graders, archipelago=None):
        return RegradeRequest(run_dir=run, out=tmp_path, graders=graders, archipelago=archipelago)

    ident = regrade_identity(run, old, req(["apexrl"]), judge, "score", {"b", "a"})
    assert ident == {
        "source": str(run.resolve()),
        "source_created_at": old.created_at,
        "source_fingerprint": old.fingerprint(),
        "graders": ["apexrl"],
        "judge": "openai/j",
        "judge_api_base": "http://j.invalid/v1",
        "reward": "score",
        "grader_options": ["a", "b"],
        "archipelago": None,  # not graded by archipelago: its checkout does not matter
    }
    none = regrade_identity(run, old, req(["apexrl"]), None, "pass", set())
    assert none["judge"] is None and none["judge_api_base"] is None
    arch = regrade_identity(run, old, req(["archipelago", "apexrl"]), judge, "pass", set())
    assert arch["archipelago"] == "/old/arch"  # the run's checkout...
    given = req(["archipelago"], archipelago="/new/arch")
    assert regrade_identity(run, old, given, judge, "pass", set())["archipelago"] == "/new/arch"

    # a new folder, nested: made, and the claim written (indented, one line at the end)
    out = tmp_path / "new" / "deep" / "out"
    claim_output(out, ident)
    marker = out / "regrade.json"
    assert marker.read_bytes() == orjson.dumps(ident, option=orjson.OPT_INDENT_2) + b"\n"
    claim_output(out, ident)  # the same claim again: accepted
    other = {**ident, "reward": "pass", "judge": "openai/k"}
    with pytest.raises(UsageError) as e:
        claim_output(out, other)
    assert e.value.message.endswith(
        "holds a regrade of another run, judge or options "
        "(judge: 'openai/j' -> 'openai/k'; reward: 'score' -> 'pass')"
    )
    assert e.value.hint == (
        "pick a new -o NEW_RUN (its grades would otherwise be mixed with these)"
    )
    marker.write_bytes(b"{not json")  # a broken claim holds nothing: every field differs
    with pytest.raises(UsageError) as e:
        claim_output(out, {**ident, "archipelago": "x"})
    assert re.search(r"\(source: None -> .*; archipelago: None -> 'x'\)$", e.value.message)
    # an existing empty folder may be claimed; a file or a folder with things may not
    empty = tmp_path / "empty"
    empty.mkdir()
    claim_output(empty, ident)
    assert (empty / "regrade.json").is_file()
    for bad in (tmp_path / "a-file", tmp_path / "full"):
        if bad.name == "a-file":
            bad.write_text("x")
        else:
            bad.mkdir()
            (bad / "x").write_text("x")
        with pytest.raises(UsageError) as e:
            claim_output(bad, ident)
        assert e.value.message.endswith("holds no regrade.json: not a folder `eval regrade` wrote")
        assert e.value.hint == "pick a new or empty -o NEW_RUN"


def test_archipelagos_grader_needs_a_judge(task_dirs, tmp_path):
    old = load_config(source_run(task_dirs, tmp_path / "a"))
    assert old.judge in (None, "none")
    with pytest.raises(UsageError) as e:
        judge_settings(RegradeRequest(run_dir=tmp_path, out=tmp_path, graders=["archipelago"]), old)
    assert e.value.message == "archipelago's grader judges every criterion: it needs --judge"
    assert e.value.hint == "pass --judge openai/NAME --judge-api-base URL (or a provider model)"
    apexrl_only = RegradeRequest(run_dir=tmp_path, out=tmp_path, graders=["apexrl"])
    assert judge_settings(apexrl_only, old) is None  # apexrl's grader: unjudged criteria
