"""The judge path end to end: `eval run` on real-shape tasks with free-text criteria,
the judge served by the local engine's /v1/chat/completions (the model's own chat
template) and reached through LiteLLM's openai/<name> with --judge-api-base."""

from __future__ import annotations

import re

import orjson
import pyarrow.parquet as pq

from apexrl.cli.app import app
from apexrl.engine.cpu import EngineServer, LocalEngine
from apexrl.grading.requirements import judge_needs
from tests.grading.chain_model import make_chain_checkpoint

VERDICT = '{"rationale":"Met.","is_criteria_true":true}'


def test_eval_run_needs_a_judge_and_uses_the_served_one(runner, example_dirs, tmp_path):
    expert, tasks = example_dirs
    first = sorted(p for p in tasks.iterdir() if p.is_dir())[0]
    assert judge_needs([first]).needed  # free-text criteria, as in the published rubrics
    agent = make_chain_checkpoint(tmp_path / "agent", "The answer is 42.")
    judge = make_chain_checkpoint(tmp_path / "judge", VERDICT)
    run_dir = tmp_path / "run"
    args = ["eval", "run", str(agent), "--tasks", str(tasks), "-o", str(run_dir)]
    args += ["--worlds", str(expert / "world_files_zipped"), "--limit", "1"]
    args += ["--max-steps", "3", "--temperature", "0", "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--no-judge" in res.stderr, res.output
    assert not (run_dir / "results.parquet").exists()
    with EngineServer(LocalEngine(judge, served_model_name="verdict")) as srv:
        res = runner.invoke(
            app, [*args, "--judge", "openai/verdict", "--judge-api-base", srv.url + "/v1"]
        )
    assert res.exit_code == 0, res.output
    (row,) = pq.read_table(run_dir / "results.parquet").to_pylist()
    assert row["status"] == "complete", row
    assert row["criteria_unjudged"] == 0 and orjson.loads(res.stdout)["criteria_unjudged"] == 0
    verdicts = orjson.loads(
        (run_dir / "trajectories" / row["trial_id"] / "verdicts.json").read_bytes()
    )["verdicts"]
    judged = [v for v in verdicts if v["source"] == "judge"]
    assert len(judged) == judge_needs([first]).n_judge_criteria
    for v in judged:
        assert v["judge_model"] == "openai/verdict" and v["met"] and v["attempts"] == 1
        assert re.fullmatch(r"[0-9a-f]{64}", v["prompt_sha256"]) and v["rationale"] == "Met."
    assert len({v["prompt_sha256"] for v in judged}) == len(judged)  # one prompt per criterion
    grading = orjson.loads(
        (run_dir / "logs" / row["trial_id"] / "verifier" / "grading.json").read_bytes()
    )
    assert grading["judge_prompt_version"] == "apexrl-judge-v3"
    assert "STRICT MATCHING" in grading["judge_system_prompt"]
    cfg = orjson.loads((run_dir / "run.json").read_bytes())
    assert cfg["judge"] == "openai/verdict"
