"""End to end on the example data: real trials (Harbor, local environment, apexrl
grading), the oracle and the tiny local model, through the CLI."""

from __future__ import annotations

import shutil

import orjson
import pyarrow.parquet as pq

from apexrl.cli.app import app
from apexrl.eval.models import EvalRunConfig


def test_oracle_on_the_example_data_passes_everything(runner, example_dirs, tmp_path):
    expert, tasks = example_dirs
    run_dir = tmp_path / "run"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks)]
    args += ["--worlds", str(expert / "world_files_zipped"), "-o", str(run_dir), "-k", "2"]
    res = runner.invoke(app, [*args, "-n", "4"])
    assert res.exit_code == 0, res.output
    s = orjson.loads(res.stdout.strip().splitlines()[-1])
    assert s["n_tasks"] == 14 and s["n_trials"] == 28
    assert s["pass_at_1"]["value"] == 1.0
    assert s["pass_at_k"]["2"]["value"] == s["pass_hat_k"]["2"]["value"] == 1.0
    assert set(s["per_domain"]) == {"investment-banking", "law", "management-consulting"}
    rows = pq.read_table(run_dir / "results.parquet").to_pylist()
    assert len({r["trial_id"] for r in rows}) == 28
    assert all(r["status"] == "complete" and r["criteria_met"] == r["criteria_total"] for r in rows)
    for r in rows:  # trajectory and per-criterion verdicts of every trial
        d = run_dir / "trajectories" / r["trial_id"]
        verdicts = orjson.loads((d / "verdicts.json").read_bytes())["verdicts"]
        assert len(verdicts) == r["criteria_total"]
    # the same command again resumes: nothing to run
    res = runner.invoke(app, [*args, "-n", "4"])
    assert res.exit_code == 0 and "0 trial(s) run, 28 already done" in res.stderr
    md = runner.invoke(app, ["eval", "report", str(run_dir), "--format", "md"])
    assert md.exit_code == 0 and "| Pass@2 | 100.0% [100.0, 100.0] |" in md.stdout


def test_missing_world_stops_the_run_at_the_preflight(runner, example_dirs, tmp_path):
    """A world the store lacks used to fail each of its trials one by one; the preflight
    now names it before any trial starts (exit 2)."""
    expert, tasks = example_dirs
    store = tmp_path / "worlds"
    store.mkdir()
    by_domain = {
        r["domain"]: r["world_id"]
        for r in orjson.loads((expert / "tasks_and_rubrics.json").read_bytes())
    }
    law = by_domain["law"]
    shutil.copy(expert / "world_files_zipped" / f"{law}.zip", store)
    run_dir = tmp_path / "run"
    res = runner.invoke(
        app,
        ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "--worlds", str(store)]
        + ["-o", str(run_dir), "--domain", "law", "--domain", "management-consulting"]
        + ["--limit", "3", "--json"],
    )
    assert res.exit_code == 2, res.output
    assert "preflight failed" in res.stderr
    assert by_domain["management-consulting"] in res.stderr and law not in res.stderr
    assert not (run_dir / "results.parquet").exists()


def test_tiny_local_model_through_the_local_engine(runner, example_dirs, tiny_model, tmp_path):
    expert, tasks = example_dirs
    run_dir = tmp_path / "run"
    args = ["eval", "run", str(tiny_model), "--tasks", str(tasks), "-o", str(run_dir)]
    args += ["--worlds", str(expert / "world_files_zipped"), "--limit", "1"]
    args += ["--max-steps", "2", "--max-tokens", "8", "--temperature", "0", "--json"]
    # the example rubrics have free-text criteria: no judge configured -> refused up front
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "--judge" in res.stderr and "--no-judge" in res.stderr
    assert not (run_dir / "results.parquet").exists() and not (run_dir / "trajectories").exists()
    res = runner.invoke(app, [*args, "--no-judge"])
    assert res.exit_code == 0, res.output
    cfg = EvalRunConfig.model_validate_json((run_dir / "run.json").read_bytes())
    assert cfg.engine.kind == "local" and cfg.engine.version.startswith("transformers")
    assert cfg.model.path == str(tiny_model.resolve()) and cfg.tokenizer == cfg.model.path
    assert cfg.chat_template_hash.startswith("sha256:") and cfg.sampling.max_tokens == 8
    (row,) = pq.read_table(run_dir / "results.parquet").to_pylist()
    assert row["tokens_in"] > 0 and row["turns"] >= 1
    traj = run_dir / "trajectories" / row["trial_id"]
    assert (traj / "trajectory.json").is_file() and (traj / "tokens.jsonl").is_file()
    atif = orjson.loads((traj / "trajectory.json").read_bytes())
    assert atif.get("steps")
    if row["status"] == "complete":
        assert row["criteria_unjudged"] > 0 and "criteria unjudged" in res.stderr
        assert orjson.loads(res.stdout)["criteria_unjudged"] == row["criteria_unjudged"]
    assert cfg.judge == "none"
