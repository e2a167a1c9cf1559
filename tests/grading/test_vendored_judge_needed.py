"""A converted task's own tests/ (the stdlib runner Harbor's default verifier runs) never
scores the judge's criteria 0 in silence: when the outcome hangs on them it writes no
reward and says a judge is needed; when a failed check decides it, reward 0 is exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def run_grade(task, answer: str, tmp_path):
    out = tmp_path / "verifier"
    ans = tmp_path / "answer.txt"
    ans.write_text(answer)
    env = {
        **os.environ,
        "APEXRL_TESTS_DIR": str(task / "tests"),
        "APEXRL_ANSWER_FILE": str(ans),
        "APEXRL_VERIFIER_DIR": str(out),
        "APEXRL_WORLD_FS": str(tmp_path / "fs"),
    }
    r = subprocess.run(
        [sys.executable, str(task / "tests" / "grade.py")], env=env, capture_output=True, text=True
    )
    return r, out


@pytest.fixture
def task(task_dirs):
    return next(p for p in task_dirs.iterdir() if "highest-indication" in p.name)


def test_judge_needed_is_said_not_scored(task, tmp_path):
    right = "Sterling Rowe Holdings at USD 1213.6 million."  # the checks pass, not the gold
    r, out = run_grade(task, right, tmp_path)
    assert r.returncode == 3 and "need an LLM judge" in r.stderr
    assert not (out / "reward.json").exists() and (out / "judge_needed.txt").is_file()
    verdicts = json.loads((out / "verdicts.json").read_text())
    assert [v.get("needs_judge", False) for v in verdicts] == [False, False, True, True]
    assert all(v["met"] is None for v in verdicts if v.get("needs_judge"))


def test_a_failed_check_decides_the_reward(task, tmp_path):
    r, out = run_grade(task, "I do not know.", tmp_path)
    assert r.returncode == 0, r.stderr
    reward = json.loads((out / "reward.json").read_text())
    assert reward["reward"] == 0.0 and reward["criteria_needing_judge"] == 2
    assert "score" not in reward  # the fraction met is not known without the judge


def test_the_gold_answer_needs_no_judge(task, tmp_path):
    gold = json.loads((task / "tests" / "golden_responses.json").read_text())["gold_response"]
    r, out = run_grade(task, gold, tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "reward.json").read_text())["reward"] == 1.0
