"""`--grader archipelago` and `eval regrade`: real oracle trials (Harbor, the local
sandbox), graded by apexrl and by archipelago's own grading runner (built from the
checkout), both judged by one scripted OpenAI-compatible server; a rerun is served
from the judge cache (zero judge calls, counted by the server)."""

from __future__ import annotations

import shutil
import zipfile

import orjson
import pytest

from apexrl.cli.app import app
from apexrl.grading.inputs import GradingInputs, read_inputs, write_inputs
from apexrl.grading.judge_cache import JudgeCache
from apexrl.grading.models import GradeResult
from tests.trial.fake_judge import GOOD_TRUE, fake_judge


@pytest.fixture(scope="module")
def oracle_run(example_dirs, tmp_path_factory):
    """An oracle eval of 4 example tasks (a file-output task among them), run once."""
    from typer.testing import CliRunner

    expert, tasks = example_dirs
    run_dir = tmp_path_factory.mktemp("regrade") / "run"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "--limit", "4"]
    args += ["--worlds", str(expert / "world_files_zipped"), "-o", str(run_dir), "-n", "2"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    return run_dir


def test_every_graded_trial_keeps_what_regrading_needs(oracle_run):
    logs = sorted((oracle_run / "logs").iterdir())
    assert len(logs) == 4
    created = 0
    for trial in logs:
        inputs, before, after = read_inputs(trial / "verifier" / "inputs")
        assert inputs.task_prompt and inputs.answer and inputs.changes is not None
        assert set(after) == {*inputs.changes.created, *inputs.changes.modified}
        created += len(inputs.changes.created)
    assert created >= 1  # the file-output task's new file is kept, bytes and all


@pytest.mark.peer
def test_regrade_with_both_graders_then_again_with_no_judge_call(
    oracle_run, archipelago_checkout, runner, tmp_path
):
    out = tmp_path / "regraded"
    with fake_judge([GOOD_TRUE]) as judge:
        args = ["eval", "regrade", str(oracle_run), "-o", str(out), "--grader", "apexrl"]
        args += ["--grader", "archipelago", "--archipelago", archipelago_checkout]
        args += ["--judge", "openai/judge", "--judge-api-base", judge.url]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        first = len(judge.requests)
        rec = orjson.loads(res.stdout.strip().splitlines()[-1])
        assert rec["graded"] == 8 and rec["judge_calls"] == first > 0
        # archipelago's runner asks the judge once per criterion, with a response schema
        schema_calls = [r for r in judge.requests if r.get("response_format")]
        assert schema_calls and all("temperature" not in r for r in schema_calls)
        rows = [orjson.loads(x) for x in (out / "comparison.jsonl").read_bytes().splitlines()]
        assert len(rows) == rec["criteria_compared"] >= 8
        assert {tuple(sorted(r["verdicts"])) for r in rows} == {("apexrl", "archipelago")}
        assert all(
            r["same"] == (r["verdicts"]["apexrl"] == r["verdicts"]["archipelago"]) for r in rows
        )
        peer = [
            GradeResult.model_validate_json(p.read_bytes())
            for p in (out / "grades" / "archipelago").iterdir()
        ]
        assert all(g.grader == "archipelago" and g.grader_commit for g in peer)
        assert all(v.rationale for g in peer for v in g.verdicts)
        # the same command again: every grade is reused
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and orjson.loads(res.stdout.splitlines()[-1])["reused"] == 8
        assert len(judge.requests) == first
        # graded again from scratch: every judge prompt is answered from the cache
        shutil.rmtree(out / "grades")
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        rec = orjson.loads(res.stdout.strip().splitlines()[-1])
        assert rec["graded"] == 8 and rec["judge_calls"] == 0
        assert len(judge.requests) == first  # counted by the judge server itself
    report = runner.invoke(app, ["eval", "report", str(out), "--format", "json"])
    assert report.exit_code == 0, report.output


@pytest.mark.peer
def test_eval_run_graded_by_archipelago(example_dirs, archipelago_checkout, runner, tmp_path):
    expert, tasks = example_dirs
    run_dir = tmp_path / "run"
    with fake_judge([GOOD_TRUE]) as judge:
        args = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "--limit", "2"]
        args += ["--worlds", str(expert / "world_files_zipped"), "-o", str(run_dir)]
        args += ["--grader", "archipelago", "--archipelago", archipelago_checkout]
        args += ["--judge", "openai/judge", "--judge-api-base", judge.url]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        assert judge.requests and all(r.get("response_format") for r in judge.requests)
    run = orjson.loads((run_dir / "run.json").read_bytes())
    assert run["grader"] == "archipelago" and run["archipelago"]
    for trial in (run_dir / "logs").iterdir():
        g = GradeResult.model_validate_json((trial / "verifier" / "grading.json").read_bytes())
        assert g.grader == "archipelago" and g.passed
        assert all(v.source == "judge" and v.rationale for v in g.verdicts)


def test_grader_archipelago_needs_a_judge_and_a_checkout(example_dirs, runner, tmp_path):
    _, tasks = example_dirs
    base = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(tmp_path / "r")]
    res = runner.invoke(app, [*base, "--grader", "archipelago"])
    assert res.exit_code == 2 and "needs --judge" in res.output
    res = runner.invoke(
        app,
        [*base, "--grader", "archipelago", "--judge", "openai/j", "--archipelago", str(tmp_path)],
    )
    assert res.exit_code == 2 and "not a checkout of archipelago" in res.output


def test_kept_inputs_refuse_hostile_archive_entries(tmp_path):
    folder = tmp_path / "inputs"
    write_inputs(folder, GradingInputs(task_id="t", answer="a"), None, None)
    with zipfile.ZipFile(folder / "changes.zip", "w") as z:
        z.writestr("after/filesystem/../../etc/passwd", b"x")
    with pytest.raises(ValueError, match="unexpected entry"):
        read_inputs(folder)


def test_judge_cache_is_keyed_by_model_and_prompt(tmp_path):
    cache = JudgeCache(tmp_path)
    cache.put("m1", "a" * 64, GOOD_TRUE)
    assert cache.get("m1", "a" * 64) == GOOD_TRUE
    assert cache.get("m2", "a" * 64) is None and cache.get("m1", "b" * 64) is None
