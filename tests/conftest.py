"""Shared fixtures: a small hand-made APEX-layout dataset for fast, focused tests."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.engine.registry import ENGINES
from tests.acting_teacher import ENGINE as TEACHER_ENGINE
from tests.scripted_engine import ENGINE as SCRIPTED_ENGINE

# the tests' engine joins the registry as an outside package's would (start_engine by name)
ENGINES[SCRIPTED_ENGINE.name] = SCRIPTED_ENGINE
ENGINES[TEACHER_ENGINE.name] = TEACHER_ENGINE

WORLDS = [
    {
        "world_id": "world_a",
        "world_name": "law-alpha-llp",
        "world_description": "A law firm",
        "apps": ["files", "mail"],
    },
    {
        "world_id": "world_b",
        "world_name": "investment-banking-beta",
        "world_description": "A bank",
        "apps": ["files"],
    },
    {
        "world_id": "world_c",
        "world_name": "management-consulting-gamma",
        "world_description": "Consultants",
        "apps": ["files"],
    },
]


def make_task(i: int, world: str, domain: str, **extra) -> dict:
    task = {
        "task_id": f"task_{i:032x}",
        "task_name": f"Task number {i}",
        "domain": domain,
        "world_id": world,
        "prompt": f"What is the answer to question {i}?",
        "task_input_files": None,
        "rubric": [
            {
                "verifier_id": f"v{i}-1",
                "criteria": "States the answer 42",
                "check": {"kind": "number", "value": 42},
            },
            {"verifier_id": f"v{i}-2", "criteria": "Explains the reasoning"},
        ],
        "expected_output": None,
        "gold_response": "The answer is 42 because it is.",
        "gold_response_type": "text",
    }
    task.update(extra)
    return task


def write_apex(root: Path, tasks: list[dict], worlds: list[dict] = WORLDS) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tasks_and_rubrics.json").write_text(json.dumps(tasks, indent=2))
    (root / "world_descriptions.json").write_text(json.dumps(worlds, indent=2))
    zips = root / "world_files_zipped"
    zips.mkdir(exist_ok=True)
    for w in worlds:
        with zipfile.ZipFile(zips / f"{w['world_id']}.zip", "w") as zf:
            zf.writestr("filesystem/readme.txt", f"world {w['world_name']}\n")
            zf.writestr(".apps_data/mail/inbox.mbox", "")
    return root


@pytest.fixture(scope="session", autouse=True)
def _session_world_cache(tmp_path_factory):
    """Worlds extracted from zips are cached under the session's temp folder (removed
    with it), not in ~/.cache/apexrl/worlds: each test's fresh zip (a new mtime) is a
    new entry there, and nothing prunes them (~850 entries after a day of runs on one
    machine). A test or a caller that sets APEXRL_WORLD_CACHE keeps its own."""
    if os.environ.get("APEXRL_WORLD_CACHE"):
        yield
        return
    os.environ["APEXRL_WORLD_CACHE"] = str(tmp_path_factory.mktemp("world-cache"))
    try:
        yield
    finally:
        os.environ.pop("APEXRL_WORLD_CACHE", None)


@pytest.fixture
def mini_apex(tmp_path: Path) -> Path:
    tasks = [
        make_task(1, "world_a", "law", task_input_files=["brief.txt"]),
        make_task(2, "world_b", "investment-banking"),
        make_task(
            3,
            "world_c",
            "management-consulting",
            gold_response_type="file",
            expected_output="make_new_doc",
            required_env_keys=["FMP_API_KEY"],
        ),
        make_task(4, "world_a", "law", task_name="../../etc/passwd"),
    ]
    root = write_apex(tmp_path / "apex", tasks)
    (root / "task_files" / tasks[0]["task_id"]).mkdir(parents=True)
    (root / "task_files" / tasks[0]["task_id"] / "brief.txt").write_text("The brief.\n")
    gold = root / "gold_files" / tasks[2]["task_id"] / "outputs"
    gold.mkdir(parents=True)
    (gold / "memo.md").write_text("# Memo\nThe answer is 42.\n")
    return root


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()
