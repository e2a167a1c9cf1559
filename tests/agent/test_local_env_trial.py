"""ApexAgent through the real `local` environment (bubblewrap) and apexrl's grading, driven
by a scripted engine: tool calls against the sandboxed world gateway, then the gold
answer, which passes the rubric; and an engine fault, classified at the trial level."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import run_trial
from tests.scripted_engine import Fault, ScriptedEngine, tool_call_text

os.environ["HARBOR_TELEMETRY"] = "0"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="module")
def converted(tmp_path_factory, example_data) -> Path:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all

    root = tmp_path_factory.mktemp("converted")
    outcomes = list(convert_all(load_source(example_data), root / "tasks", {}, strict=True))
    assert all(o.record for o in outcomes)
    return root


@pytest.fixture
def local_dirs(converted, monkeypatch):
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(converted / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(converted / "cache"))
    return converted


def _text_task(tasks: Path) -> Path:
    for t in sorted(tasks.iterdir()):
        gold = json.loads((t / "tests" / "golden_responses.json").read_text())
        if gold["gold_response_type"] == "text":
            return t
    raise AssertionError("no text task in the example data")


def _config(tmp_path, example_data, url, **kw) -> TrialConfig:
    return TrialConfig(
        agent="apexrl",
        environment="local",
        worlds_dir=example_data / "world_files_zipped",
        endpoint=url,
        model="scripted",
        tokenizer="qwen3",
        logs_dir=tmp_path / "trial",
        **kw,
    )


def test_scripted_agent_passes_the_rubric_in_the_local_sandbox(tmp_path, example_data, local_dirs):
    task = _text_task(local_dirs / "tasks")
    gold = json.loads((task / "tests" / "golden_responses.json").read_text())["gold_response"]
    script = [
        tool_call_text("filesystem_list_files", {"path": "/"}),
        tool_call_text("filesystem_read_text_file", {"file_path": "definitely-not-here.txt"}),
        gold,
    ]
    with ScriptedEngine(script) as eng:
        out = run_trial(task, _config(tmp_path, example_data, eng.url))
    r = out.result
    assert (r.status, r.error_class) == ("complete", None), out.error_message
    assert r.reward == 1.0 and r.criteria_met == r.criteria_total > 0
    rec = json.loads((tmp_path / "trial" / "agent" / "apexrl_agent.json").read_text())
    assert rec["status"] == "complete" and rec["tool_outcomes"] == {"ok": 1, "mcp_error": 1}
    assert (tmp_path / "trial" / "agent" / "trajectory.json").is_file()


def test_engine_failure_is_an_error_trial_scoring_zero(tmp_path, example_data, local_dirs):
    task = _text_task(local_dirs / "tasks")
    bad = Fault("status", status=400, message="bad request")
    with ScriptedEngine([tool_call_text("filesystem_list_files", {}), bad]) as eng:
        out = run_trial(task, _config(tmp_path, example_data, eng.url))
    r = out.result
    assert r.status == "error" and r.reward == 0.0
