"""`publish model --eval RUN`: `.eval_results/<benchmark>.yaml` beside the card (issue 44)."""

from __future__ import annotations

import json

import yaml

from apexrl.cli.app import app
from tests.publish.hub_formats import check_eval_results


def _dry(runner, ckpt, stage, *args):
    return runner.invoke(
        app,
        ["publish", "model", str(ckpt), "--repo", "acme/m", "--dry-run", "--stage", str(stage),
         "--json", *args],
    )  # fmt: skip


def test_dry_run_stages_a_valid_eval_results_file(runner, ckpt, run_dir, tmp_path):
    stage = tmp_path / "stage"
    r = _dry(runner, ckpt, stage, "--eval", str(run_dir))
    assert r.exit_code == 0, r.stderr
    staged = {json.loads(x)["path"] for x in r.stdout.splitlines()}
    assert ".eval_results/apex-tasks.yaml" in staged
    (res,) = check_eval_results(stage / ".eval_results" / "apex-tasks.yaml")
    assert res["dataset"] == {"id": "acme/apex-tasks", "task_id": "default"}
    assert res["value"] == 50.0  # Pass@1 in percent, as the card's table
    assert res["date"] == "2026-01-01T00:00:00Z"
    assert res["source"]["url"] == "https://huggingface.co/acme/m"
    assert "95% CI [40.00, 60.00]" in res["notes"] and "2 attempt(s)" in res["notes"]
    assert "model-index:" in (stage / "README.md").read_text()  # the older way stays


def test_benchmark_and_source_flags(runner, ckpt, run_dir, tmp_path):
    run = json.loads((run_dir / "run.json").read_text())
    run["dataset"]["source"] = str(tmp_path / "local-tasks")  # not a Hub dataset
    (run_dir / "run.json").write_text(json.dumps(run))
    stage = tmp_path / "s1"
    r = _dry(runner, ckpt, stage, "--eval", str(run_dir))
    assert r.exit_code == 0, r.stderr
    assert not (stage / ".eval_results").exists()
    assert "no .eval_results file" in r.stderr and "--benchmark" in r.stderr
    stage = tmp_path / "s2"
    url = "https://huggingface.co/datasets/acme/traces"
    r = _dry(runner, ckpt, stage, "--eval", str(run_dir), "--benchmark",
             "mercor/apex-agents:apex", "--eval-source", url)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (res,) = check_eval_results(stage / ".eval_results" / "apex-agents.yaml")
    assert res["dataset"] == {"id": "mercor/apex-agents", "task_id": "apex"}
    assert res["source"] == {"url": url, "name": f"apexrl eval run {run_dir.name}"}


def test_bad_benchmark_and_source_are_usage_errors(runner, ckpt, run_dir, tmp_path):
    r = _dry(runner, ckpt, tmp_path / "s1", "--eval", str(run_dir), "--benchmark", "nope")
    assert r.exit_code == 2 and "--benchmark" in r.stderr
    r = _dry(runner, ckpt, tmp_path / "s2", "--eval", str(run_dir), "--eval-source", "ftp://x")
    assert r.exit_code == 2 and "--eval-source" in r.stderr


def test_two_runs_on_one_benchmark_share_its_file(runner, ckpt, run_dir, tmp_path):
    import shutil

    other = tmp_path / "run2"
    shutil.copytree(run_dir, other)
    stage = tmp_path / "stage"
    r = _dry(runner, ckpt, stage, "--eval", str(run_dir), "--eval", str(other))
    assert r.exit_code == 0, r.stderr
    data = yaml.safe_load((stage / ".eval_results" / "apex-tasks.yaml").read_text())
    assert [x["notes"].rsplit("apexrl eval run ", 1)[1] for x in data] == ["run", "run2"]
