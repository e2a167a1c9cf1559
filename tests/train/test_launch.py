"""`apexrl train` against a local Ray instance: job submitted, followed, manifest written."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from apexrl.errors import UsageError
from apexrl.train.launch import check_resume, follow
from apexrl.train.recipe import load_recipe
from apexrl.train.render import render


def test_train_submits_a_ray_job_and_writes_the_manifest(runner, tmp_path, monkeypatch):
    from apexrl.cli.app import app
    from apexrl.train import launch

    tasks = tmp_path / "tasks"
    for name in ("task-a", "task-b"):
        (tasks / name).mkdir(parents=True)
        (tasks / name / "task.toml").write_text("")
        (tasks / name / "instruction.md").write_text(f"Do {name}.")
    secret = "hf_" + "zz9SecretValue" * 3
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    real = launch.LocalRay
    monkeypatch.setattr(launch, "LocalRay", lambda: real(num_cpus=1, timeout_s=120))
    run = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "train",
            "smoke-1gpu",
            "--data",
            str(tasks),
            "--check-only",
            "--no-ship-code",
            "--json",
            "--set",
            f'checkpoint.path="{run}/ckpts"',
            "--set",
            'run_name="t1"',
        ],
    )
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout.strip().splitlines()[-1])
    assert rec["status"] == "SUCCEEDED" and rec["job_id"].startswith("apexrl-t1-")
    assert "status       RUNNING" in res.stderr or "status       PENDING" in res.stderr
    assert "preflight passed" in res.stderr  # the job's own log, streamed
    assert "forwarded variables present: HF_TOKEN" in res.stderr
    manifest = json.loads((run / "apexrl_manifest.json").read_text())
    assert manifest["job_id"] == rec["job_id"]
    assert manifest["recipe"] == "smoke-1gpu" and len(manifest["recipe_sha256"]) == 64
    assert manifest["overrides"] == [f'checkpoint.path="{run}/ckpts"', 'run_name="t1"']
    assert manifest["dataset"] == str(tasks) and manifest["dataset_digest"].startswith("sha256:")
    assert manifest["git_revision"] and manifest["env_forwarded"] == ["HF_TOKEN"]
    assert secret not in (run / "apexrl_manifest.json").read_text()
    table = pq.read_table(run / "data" / "train.parquet").to_pylist()
    assert [r["task_path"] for r in table] == [str(tasks / "task-a"), str(tasks / "task-b")]
    assert {r["data_source"] for r in table} == {"apexrl"}  # no domain in these task.toml
    assert table[0]["prompt"] == [{"role": "user", "content": "Do task-a."}]


def test_resume_needs_a_checkpoint_and_fresh_runs_refuse_to_overwrite(tmp_path):
    ckpt = tmp_path / "ckpts"
    loaded = load_recipe("smoke-1gpu", [f'checkpoint.path="{ckpt}"'])
    with pytest.raises(UsageError, match="no checkpoint"):
        check_resume(render(loaded, resume=True))
    assert check_resume(render(loaded)) == "fresh run"
    ckpt.mkdir()
    (ckpt / "latest_ckpt_global_step.txt").write_text("10")
    with pytest.raises(UsageError, match="--resume"):
        check_resume(render(loaded))
    spec = render(loaded, resume=True)
    assert check_resume(spec) == "resume from global_step_10"
    assert spec.skyrl["trainer.resume_mode"] == "latest"


def test_follow_streams_new_log_text_and_status_changes():
    class Jobs:
        statuses = iter(["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"])
        logs_seq = iter(["", "a\n", "a\nb\n", "a\nb\nc\n"])

        def status(self, job_id):
            return next(self.statuses)

        def logs(self, job_id):
            return next(self.logs_seq)

    out, seen = [], []
    status = follow(Jobs(), "j", write=out.append, on_status=seen.append, poll_s=0)
    assert status == "SUCCEEDED"
    assert "".join(out) == "a\nb\nc\n" and out == ["a\n", "b\n", "c\n"]
    assert seen == ["PENDING", "RUNNING", "SUCCEEDED"]
