"""A recipe-style trial: a tiny Qwen3 checkpoint whose own chat template teaches XML tool
calls (Qwen3.5/3.6 style), a scripted engine writing XML calls with archipelago's tool
names, the real `local` sandbox and apexrl's grading. The agent takes the template from
the checkpoint and parses the format the template teaches."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import run_trial
from tests.scripted_engine import ScriptedEngine, tool_call_text, tool_call_xml

os.environ["HARBOR_TELEMETRY"] = "0"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="module")
def tiny_xml(tmp_path_factory) -> Path:
    """A tiny random-weight Qwen3 checkpoint with an XML-tool-call chat template."""
    from apexrl.engine.tiny import make_tiny_checkpoint
    from apexrl.tito.template import builtin_template

    d = make_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "qwen3-xml")
    (d / "chat_template.jinja").write_text(builtin_template("qwen3-xml-verbatim"))
    return d


@pytest.fixture(scope="module")
def converted(tmp_path_factory, example_data) -> Path:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all

    root = tmp_path_factory.mktemp("converted-xml")
    outcomes = list(convert_all(load_source(example_data), root / "tasks", {}, strict=True))
    assert all(o.record for o in outcomes)
    return root


def _text_task(tasks: Path) -> Path:
    for t in sorted(tasks.iterdir()):
        gold = json.loads((t / "tests" / "golden_responses.json").read_text())
        if gold["gold_response_type"] == "text":
            return t
    raise AssertionError("no text task in the example data")


def test_xml_tool_calls_by_archipelago_names_complete_and_are_graded(
    tmp_path, example_data, converted, tiny_xml, monkeypatch
):
    from apexrl.tito.tokenizer import load_tokenizer

    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(converted / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(converted / "cache"))
    task = _text_task(converted / "tasks")
    gold = json.loads((task / "tests" / "golden_responses.json").read_text())["gold_response"]
    script = [
        tool_call_xml("filesystem_list_files", {"path": "/"}, think="Look around first."),
        tool_call_xml("filesystem_get_directory_tree", {"path": "/", "max_depth": 2})
        + "\n"
        + tool_call_xml("filesystem_search_files", {"pattern": "*.md", "recursive": True}),
        tool_call_text("filesystem_list_files", {}),  # Hermes JSON: not this model's format
        gold,
    ]
    cfg = TrialConfig(
        agent="apexrl",
        environment="local",
        worlds_dir=example_data / "world_files_zipped",
        model="scripted",
        tokenizer=str(tiny_xml),
        system_prompt="You are the deal team's analyst.",
        extra_prompt="Note: you are a text-only agent.",
        logs_dir=tmp_path / "trial",
    )
    with ScriptedEngine(script) as eng:
        cfg.endpoint = eng.url
        out = run_trial(task, cfg)
        requests = list(eng.requests)
    r = out.result
    assert (r.status, r.error_class) == ("complete", None), out.error_message
    assert r.reward == 1.0 and r.criteria_met == r.criteria_total > 0
    agent_dir = tmp_path / "trial" / "agent"
    rec = json.loads((agent_dir / "apexrl_agent.json").read_text())
    assert rec["status"] == "complete" and rec["tool_outcomes"] == {"ok": 3}
    assert rec["repairs"] == 1  # the JSON call was answered with the XML format to use
    traj = json.loads((agent_dir / "tito.json").read_text())
    assert traj["chat_template"] == "tokenizer"  # the checkpoint's own template
    names = [t["function"]["name"] for t in traj["tools"]]
    assert "filesystem_search_files" in names and "excel_read_tab" in names
    calls = [c for m in traj["messages"] if m.get("tool_calls") for c in m["tool_calls"]]
    assert [c["function"]["name"] for c in calls] == [
        "filesystem_list_files",
        "filesystem_get_directory_tree",
        "filesystem_search_files",
    ]
    assert calls[1]["function"]["arguments"] == {"path": "/", "max_depth": "2"}  # as written
    tool_msgs = [m for m in traj["messages"] if m["role"] == "tool"]
    assert "├── " in tool_msgs[1]["content"]  # max_depth reached the tool as an integer
    repair = next(
        m for m in traj["messages"] if m["role"] == "user" and "<function=" in m["content"]
    )
    assert "could not be parsed" in repair["content"]
    # the prompt the engine saw teaches XML calls; each prompt extends the previous turn
    tok = load_tokenizer(str(tiny_xml))
    first = tok.decode(requests[0]["prompt"])
    assert "<parameter=PARAMETER_NAME>" in first and '"name": "excel_read_tab"' in first
    assert first.startswith("<|im_start|>system\nYou are the deal team's analyst.\n\n# Tools")
    instruction = (task / "instruction.md").read_text()
    assert f"{instruction}\n\nNote: you are a text-only agent.<|im_end|>" in first
    for a, b in zip(requests, requests[1:], strict=False):
        assert b["prompt"][: len(a["prompt"])] == a["prompt"]
    # up to the malformed turn, the token stream is one render of the conversation (no
    # drift from re-rendering XML calls); the malformed turn itself cannot be re-rendered
    k = next(
        i
        for i, m in enumerate(traj["messages"])
        if m["role"] == "user" and "<function=" in m["content"]
    )
    before = tok.encode(
        tok.apply_chat_template(
            traj["messages"][: k - 1], tools=traj["tools"], add_generation_prompt=True
        )
    )
    stream = traj["prompt_ids"] + [i for t in traj["turns"] for i in t["token_ids"]]
    assert len(before) > len(traj["prompt_ids"]) + 50
    assert stream[: len(before)] == before
