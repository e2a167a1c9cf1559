"""The eval runner with scripted trial functions: layout, resume, retry, refusal,
journal repair, crash safety (SIGKILL of a subprocess run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from apexrl.errors import ApexError, UsageError
from apexrl.eval import resume
from apexrl.eval.metrics import summarize
from apexrl.eval.models import EvalRunConfig, EvalSummary
from apexrl.eval.runner import EvalRequest, run_eval
from apexrl.trial.config import Sampling
from tests.eval.conftest import passing_trial, scripted_trial

REPO = Path(__file__).resolve().parents[2]


def req(tasks: Path, run_dir: Path, **kw) -> EvalRequest:
    kw.setdefault("agent", "oracle")
    return EvalRequest(tasks=str(tasks), run_dir=run_dir, **kw)


def parquet_ids(run_dir: Path) -> list[str]:
    return pq.read_table(run_dir / "results.parquet").column("trial_id").to_pylist()


def test_run_dir_layout_and_resume(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    report, cfg = run_eval(
        req(task_dirs, run_dir, attempts=2, concurrency=3), trial_fn=scripted_trial
    )
    assert (report.ran, report.planned, report.skipped) == (28, 28, 0)
    for name in ("run.json", "results.parquet", "results.jsonl", "summary.json"):
        assert (run_dir / name).is_file(), name
    ids = parquet_ids(run_dir)
    assert len(ids) == len(set(ids)) == 28
    table = pq.read_table(run_dir / "results.parquet")
    assert table.column_names[0] == "trial_id"
    assert {"task_id", "domain", "world_id", "attempt", "status", "error_class", "reward"} <= set(
        table.column_names
    )
    for tid in ids:
        files = sorted(p.name for p in (run_dir / "trajectories" / tid).iterdir())
        assert files == ["tokens.jsonl", "trajectory.json"]
    on_disk = EvalRunConfig.model_validate_json((run_dir / "run.json").read_bytes())
    assert on_disk.dataset.n_tasks == 14 and on_disk.dataset.digest.startswith("sha256:")
    assert on_disk.attempts == 2 and on_disk.agent == "oracle"
    summary = EvalSummary.model_validate_json((run_dir / "summary.json").read_bytes())
    assert summary == summarize(resume.load_journal(run_dir).values(), planned=28)
    # engine errors are the infrastructure's: counted apart, never scored
    assert summary.infra_errors.get("llm_transient", 0) == summary.trials_ungraded > 0
    assert summary.n_trials + summary.trials_ungraded == 28 and not summary.complete
    # rerun: nothing left to do, nothing duplicated
    report2, _ = run_eval(req(task_dirs, run_dir, attempts=2), trial_fn=scripted_trial)
    assert (report2.ran, report2.skipped) == (0, 28)
    assert sorted(parquet_ids(run_dir)) == sorted(ids)


def test_more_attempts_and_limit_extend_the_same_run(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    r1, _ = run_eval(req(task_dirs, run_dir, limit=5), trial_fn=passing_trial)
    assert r1.ran == 5
    r2, cfg = run_eval(
        req(task_dirs, run_dir, limit=5, attempts=3, extend=True), trial_fn=passing_trial
    )
    assert (r2.ran, r2.skipped) == (10, 5)
    assert r2.summary.pass_at_k["3"].value == r2.summary.pass_hat_k["3"].value == 1.0
    assert len(set(parquet_ids(run_dir))) == 15


def test_domain_filter(task_dirs, tmp_path):
    r, _ = run_eval(req(task_dirs, tmp_path / "run", domains=["law"]), trial_fn=passing_trial)
    assert set(r.summary.per_domain) == {"law"} and r.summary.n_tasks == 4
    with pytest.raises(UsageError, match="no task has domain"):
        run_eval(req(task_dirs, tmp_path / "run2", domains=["astrology"]), trial_fn=passing_trial)


def test_retry_errors_reruns_only_errored_trials(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    r1, _ = run_eval(req(task_dirs, run_dir, attempts=2), trial_fn=scripted_trial)
    errored = {r.trial_id for r in resume.load_journal(run_dir).values() if r.status == "error"}
    assert errored
    calls = []

    def fixed(task_dir, config):
        calls.append(config.logs_dir.name)
        return passing_trial(task_dir, config)

    r2, _ = run_eval(req(task_dirs, run_dir, attempts=2), trial_fn=fixed)
    assert r2.ran == 0 and calls == []  # without --retry-errors errors are results
    r3, _ = run_eval(req(task_dirs, run_dir, attempts=2, retry_errors=True), trial_fn=fixed)
    assert set(calls) == errored and r3.ran == len(errored)
    ids = parquet_ids(run_dir)
    assert len(ids) == len(set(ids)) == 28
    assert r3.summary.errors == r3.summary.infra_errors == {} and r3.summary.complete


def test_retry_errors_leaves_broken_tasks_to_their_author(task_dirs, tmp_path):
    """A trial whose task's rubric is broken ends `bad_task_rubric`: ungraded, counted as a
    task error, and --retry-errors does not run it again (it would fail the same way,
    forever), while it does rerun the infrastructure's errors."""
    run_dir = tmp_path / "run"

    def broken_memo(task_dir, config):
        out = passing_trial(task_dir, config)
        if "memo" in task_dir.name:
            r = out.result.model_copy(
                update={"status": "no_verifier_result", "error_class": "bad_task_rubric"}
            )
            return out.model_copy(update={"result": r})
        if config.attempt == 1:
            r = out.result.model_copy(update={"status": "error", "error_class": "llm_transient"})
            return out.model_copy(update={"result": r})
        return out

    r1, _ = run_eval(req(task_dirs, run_dir, attempts=2), trial_fn=broken_memo)
    rows = resume.load_journal(run_dir).values()
    task_err = {r.trial_id for r in rows if r.error_class == "bad_task_rubric"}
    infra = {r.trial_id for r in rows if r.error_class == "llm_transient"}
    assert task_err and infra
    assert r1.summary.task_errors == {"bad_task_rubric": len(task_err)}
    assert r1.summary.infra_errors == {"llm_transient": len(infra)}
    calls = []

    def fixed(task_dir, config):
        calls.append(config.logs_dir.name)
        return passing_trial(task_dir, config)

    r2, _ = run_eval(req(task_dirs, run_dir, attempts=2, retry_errors=True), trial_fn=fixed)
    assert set(calls) == infra and r2.ran == len(infra)
    assert r2.summary.infra_errors == {} and r2.summary.exit_code == 5
    assert r2.summary.task_errors == {"bad_task_rubric": len(task_err)}
    # the task's world fixed: --retry-task-errors reruns those trials, and only those
    calls.clear()
    r3, _ = run_eval(
        req(task_dirs, run_dir, attempts=2, retry_errors=True, retry_task_errors=True),
        trial_fn=fixed,
    )
    assert set(calls) == task_err and r3.ran == len(task_err)
    assert r3.summary.task_errors == {} and r3.summary.complete and r3.summary.exit_code == 0


def test_trial_function_exception_is_classified_and_run_goes_on(task_dirs, tmp_path):
    def flaky(task_dir, config):
        if "memo" in task_dir.name:
            raise RuntimeError("boom")
        return passing_trial(task_dir, config)

    r, _ = run_eval(req(task_dirs, tmp_path / "run"), trial_fn=flaky)
    rows = resume.load_journal(tmp_path / "run")
    bad = [x for x in rows.values() if x.error_class == "runner_exception"]
    assert len(rows) == 14 and bad and all(x.status == "error" and x.reward == 0 for x in bad)
    assert all(x.task_id.startswith("task_") and x.domain for x in bad)
    assert r.summary.infra_errors == {"runner_exception": len(bad)} and r.summary.errors == {}


def test_other_configuration_refused_unless_force(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    run_eval(req(task_dirs, run_dir, limit=2), trial_fn=passing_trial)
    hot = req(task_dirs, run_dir, limit=2, sampling=Sampling(temperature=0.2))
    with pytest.raises(UsageError, match=r"different configuration \(sampling.temperature"):
        run_eval(hot, trial_fn=passing_trial)
    hot.force = True
    r, cfg = run_eval(hot, trial_fn=scripted_trial)
    assert r.ran == 2 and r.skipped == 0  # started over
    assert cfg.sampling.temperature == 0.2
    assert len(resume.load_journal(run_dir)) == 2


def test_foreign_directory_and_empty_dataset_refused(task_dirs, tmp_path):
    foreign = tmp_path / "notarun"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("x")
    with pytest.raises(UsageError, match="holds no run.json"):
        run_eval(req(task_dirs, foreign), trial_fn=passing_trial)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ApexError, match="has no tasks"):
        run_eval(req(empty, tmp_path / "run"), trial_fn=passing_trial)
    with pytest.raises(UsageError, match="does not exist"):
        run_eval(req(tmp_path / "nope", tmp_path / "run"), trial_fn=passing_trial)


def test_packed_dataset_is_unpacked_into_the_run_dir(task_dirs, tmp_path):
    from apexrl.tasks.dataset import write_dataset
    from apexrl.tasks.pack import find_task_dirs, pack_dirs

    write_dataset(pack_dirs(find_task_dirs(task_dirs), workers=1), tmp_path / "ds")
    r, cfg = run_eval(req(tmp_path / "ds", tmp_path / "run"), trial_fn=passing_trial)
    assert r.ran == 14 and (tmp_path / "run" / "tasks").is_dir()
    # the same tasks give the same digest whether packed or as folders
    _, cfg2 = run_eval(req(task_dirs, tmp_path / "run2", limit=1), trial_fn=passing_trial)
    assert cfg.dataset.digest == cfg2.dataset.digest


def test_journal_partial_last_line_is_cut_and_rerun(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    run_eval(req(task_dirs, run_dir, limit=3), trial_fn=passing_trial)
    journal = run_dir / "results.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    lost = orjson.loads(lines[-1])["trial_id"]
    journal.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # a crash mid-append
    assert lost not in resume.load_journal(run_dir)
    r, _ = run_eval(req(task_dirs, run_dir, limit=3), trial_fn=passing_trial)
    assert r.ran == 1
    rows = [orjson.loads(x) for x in journal.read_bytes().splitlines()]
    assert [x["trial_id"] for x in rows].count(lost) == 1
    assert sorted(parquet_ids(run_dir)) == sorted(x["trial_id"] for x in rows)


def test_corrupt_journal_line_in_the_middle_is_an_error(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    run_eval(req(task_dirs, run_dir, limit=3), trial_fn=passing_trial)
    journal = run_dir / "results.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(lines[0] + b"{not json\n" + b"".join(lines[1:]))
    with pytest.raises(ApexError, match=r"results.jsonl:2: corrupt journal line"):
        run_eval(req(task_dirs, run_dir, limit=3), trial_fn=passing_trial)


def test_a_second_runner_on_the_same_dir_is_refused(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    with resume.run_lock(run_dir), pytest.raises(UsageError, match="in use"):
        run_eval(req(task_dirs, run_dir), trial_fn=passing_trial)


SLOW_RUN = """
import sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from apexrl.eval.runner import EvalRequest, run_eval
from tests.eval.conftest import scripted_trial

def slow(task_dir, config):
    time.sleep(0.03)
    return scripted_trial(task_dir, config)

run_eval(EvalRequest(tasks={tasks!r}, run_dir=Path({run!r}), agent="oracle", attempts=4,
                     concurrency=3), trial_fn=slow)
"""


def test_sigkill_mid_run_then_resume_gives_every_trial_exactly_once(task_dirs, tmp_path):
    run_dir = tmp_path / "run"
    script = SLOW_RUN.format(repo=str(REPO), tasks=str(task_dirs), run=str(run_dir))
    for kill_after_rows in (3, 17, 30):
        proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO)
        journal = run_dir / "results.jsonl"
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                n = journal.read_bytes().count(b"\n") if journal.exists() else 0
                if n >= kill_after_rows:
                    break
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        rows = resume.load_journal(run_dir)  # readable after every kill
        assert len(rows) >= kill_after_rows - 1
    report, _ = run_eval(
        req(task_dirs, run_dir, attempts=4, concurrency=3), trial_fn=scripted_trial
    )
    assert report.ran + report.skipped == 56 and report.skipped >= 29
    ids = parquet_ids(run_dir)
    assert len(ids) == len(set(ids)) == 56
    lines = [orjson.loads(x) for x in (run_dir / "results.jsonl").read_bytes().splitlines()]
    assert len(lines) == 56  # no trial appended twice
    for tid in ids:  # every journaled trial has its complete trajectory
        d = run_dir / "trajectories" / tid
        assert sorted(p.name for p in d.iterdir()) == ["tokens.jsonl", "trajectory.json"]
    assert sorted(p.name for p in (run_dir / "trajectories").iterdir()) == sorted(ids)


def test_concurrency_is_bounded(task_dirs, tmp_path):
    import threading

    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def slow(task_dir, config):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return passing_trial(task_dir, config)

    r, _ = run_eval(req(task_dirs, tmp_path / "run", attempts=2, concurrency=3), trial_fn=slow)
    assert r.ran == 28 and state["max"] == 3
