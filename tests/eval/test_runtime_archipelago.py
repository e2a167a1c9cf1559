"""`--runtime archipelago`: evals whose worlds are served by archipelago's own MCP servers
(the checkout's, built by `make peer`) inside the local sandbox: the oracle, and apexrl's
agent driven by the scripted engine, whose tool calls reach the peer's servers and read
back their text. run.json records the runtime and the checkout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apexrl.cli.app import app
from tests.scripted_engine import ScriptedEngine, tool_call_text

pytestmark = [pytest.mark.integration, pytest.mark.peer]

ATLAS = "project-atlas-update-fy2025e-revenue"  # a text task whose world has a workbook


def _tasks(example_dirs, tmp_path: Path, *parts: str) -> Path:
    """A folder holding only the named example tasks."""
    import shutil

    out = tmp_path / "tasks"
    for t in sorted(example_dirs[1].iterdir()):
        if any(p in t.name for p in parts):
            shutil.copytree(t, out / t.name)
    assert len(list(out.iterdir())) == len(parts)
    return out


def _run_json(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


@pytest.fixture(scope="module")
def checkout() -> Path:
    from apexrl.peer.runtime import find_checkout

    return find_checkout()


def test_oracle_eval_through_the_peers_servers(runner, example_dirs, tmp_path, checkout):
    tasks = _tasks(example_dirs, tmp_path, ATLAS, "steerco-40fc")  # two worlds
    run = tmp_path / "run"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run)]
    args += ["--worlds", str(example_dirs[0] / "world_files_zipped"), "-n", "2"]
    res = runner.invoke(app, [*args, "--runtime", "archipelago", "--archipelago", str(checkout)])
    assert res.exit_code == 0, res.output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["trials_done"] == 2 and summary["pass_at_1"]["value"] == 1.0, summary
    cfg = _run_json(run)
    assert cfg["runtime"] == "archipelago" and cfg["archipelago"] == str(checkout)
    from apexrl.artifacts.checkout import checkout_commit
    from apexrl.peer.runtime import checkout_key

    assert cfg["runtime_key"] == checkout_key(checkout)
    assert cfg["runtime_commit"] == checkout_commit(checkout)  # None: not a git checkout
    # each trial's gateway ran the checkout's servers
    logs = sorted(run.rglob("gateway.log"))
    assert len(logs) == 2, sorted(p.relative_to(run) for p in run.rglob("*"))
    for log in logs:
        text = log.read_text("utf-8", "replace")
        assert "apexrl: archipelago's servers (filesystem, documents, spreadsheets" in text
        assert f"key {cfg['runtime_key']}" in text


def test_scripted_agent_eval_reads_the_peers_text(runner, example_dirs, tmp_path, checkout):
    tasks = _tasks(example_dirs, tmp_path, ATLAS)
    gold = json.loads(next(tasks.iterdir()).joinpath("tests", "golden_responses.json").read_text())[
        "gold_response"
    ]
    script = [
        tool_call_text("filesystem_list_files", {"path": "/Deal_Model"}),
        # archipelago's envelope ({"input": {...}}) is off: the recipe's flat arguments
        tool_call_text(
            "excel_read_tab", {"file_path": "/Deal_Model/Project_Atlas_Model.xlsx", "tab_index": 0}
        ),
        tool_call_text("code_execution_code_exec", {"code": "pwd && ls inputs"}),
        gold,
    ]
    run = tmp_path / "run"
    # archipelago's 73 tool descriptions and schemas take about 33k tokens of the prompt
    with ScriptedEngine(script, max_model_len=65536) as eng:
        args = ["eval", "run", "scripted", "--endpoint", eng.url, "--tokenizer", "qwen3"]
        args += ["--tasks", str(tasks), "--worlds", str(example_dirs[0] / "world_files_zipped")]
        args += ["-o", str(run), "--no-judge", "--max-steps", "6", "--runtime", "archipelago"]
        res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    import pyarrow.parquet as pq

    (row,) = pq.read_table(run / "results.parquet").to_pylist()
    assert row["status"] == "complete" and row["tool_calls"] == 3, row
    # the two figures are checked deterministically (the third criterion needs a judge)
    verdicts = json.loads(next(run.rglob("verdicts.json")).read_text())
    assert [v["met"] for v in verdicts if v["source"] == "deterministic"] == [True, True]
    assert _run_json(run)["runtime"] == "archipelago"
    traj = "\n".join(_strings(json.loads(next(run.rglob("trajectory.json")).read_text())))
    # archipelago's own text, as its servers write it
    assert "'Project_Atlas_Model.xlsx' (application/vnd.openxmlformats" in traj, traj[:3000]
    assert "Range: all\nTable:\n\tA\tB" in traj, traj[:6000]
    # its code server, in the sandbox: the world at /filesystem, with the task's input file
    assert '{"success":true,"output":"/filesystem\\nmanagement_case_v2.csv' in traj, traj
