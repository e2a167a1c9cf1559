"""Grading: deterministic checks, the reference match, the LLM judge (fake server)."""

from __future__ import annotations

import asyncio
import csv
import hashlib
from pathlib import Path

import openpyxl
import pytest

from apexrl.artifacts.models import DeterministicCheck
from apexrl.grading.evidence import changes_text, diff_world
from apexrl.grading.grader import grade, host_cell_reader
from apexrl.grading.judge import JudgeError, JudgeSettings, parse_verdict
from apexrl.tasks.vendored import grade as runner
from apexrl.worlds.store import WorldState, stats_of, walk_files
from tests.trial.fake_judge import BAD, GOOD_FALSE, GOOD_TRUE, fake_judge


@pytest.fixture
def fs(tmp_path: Path) -> Path:
    root = tmp_path / "world" / "filesystem"
    (root / "outputs").mkdir(parents=True)
    (root / "outputs" / "memo.md").write_text("# Memo\nSterling Rowe Holdings leads.\n")
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Model"
    ws["A1"], ws["B1"], ws["B2"], ws["B3"] = "Revenue", 100, 250.5, "=B1+B2"
    wb.create_sheet("Notes")["C4"] = "final"
    wb.save(root / "outputs" / "model.xlsx")
    with open(root / "outputs" / "t.csv", "w", newline="") as f:
        csv.writer(f).writerows([["region", "size"], ["West", "31.0"]])
    return root


def check(kind: str, **kw) -> dict:
    return DeterministicCheck(kind=kind, **kw).model_dump(exclude_none=True)


@pytest.mark.parametrize(
    ("c", "answer", "ok"),
    [
        (check("exact", value="Sterling Rowe"), "The winner is sterling  rowe holdings.", True),
        (check("contains", value="90 days"), "Notice: 90 DAYS.", True),
        (check("contains", value="90 days"), "Notice: 10 days.", False),
        (check("equals", value="West"), " west ", True),
        (check("equals", value="West"), "West region", False),
        (check("number", value=1213.6, tolerance=0.05), "USD 1,213.6 million", True),
        (check("number", value=1213.6, tolerance=0.05), "USD 1,213.7 million", False),
        (check("number", value=-5, tolerance=0), "a change of -5.", True),
        (check("file_exists", path="outputs/memo.md"), "", True),
        (check("file_exists", path="outputs/none.md"), "", False),
        (check("file_exists", path="../../etc/passwd"), "", False),
        (check("file_exists", path="/outputs/memo.md"), "", True),
        (check("file_contains", path="outputs/memo.md", value="sterling rowe"), "", True),
        (check("file_contains", path="outputs/t.csv", value="West,31.0"), "", True),
        (check("sheet_cell", path="outputs/model.xlsx", cell="B2", value=250.5), "", True),
        (check("sheet_cell", path="outputs/model.xlsx", cell="B3", value=350.5), "", True),
        (
            check("sheet_cell", path="outputs/model.xlsx", sheet="Notes", cell="C4", value="Final"),
            "",
            True,
        ),
        (check("sheet_cell", path="outputs/model.xlsx", cell="B1", value=101), "", False),
        (check("sheet_cell", path="outputs/t.csv", cell="B2", value=31, tolerance=0.01), "", True),
    ],
)
def test_deterministic_checks(fs, c, answer, ok):
    assert runner.run_check(c, answer, fs, host_cell_reader) is ok


def test_uncached_formula_needs_the_host_evaluator(fs):
    """The in-sandbox runner reads cached values only; openpyxl writes none."""
    p = fs / "outputs" / "model.xlsx"
    assert runner.sheet_cell_value(p, None, "B3") is None
    assert host_cell_reader(p, None, "B3") == pytest.approx(350.5)


def test_broken_check_is_unmet_with_a_reason(fs):
    crit = [{"verifier_id": "v1", "criteria": "x", "check": {"kind": "sheet_cell", "cell": "ZZ"}}]
    crit[0]["check"]["path"] = "outputs/model.xlsx"
    (v,) = runner.grade_deterministic(crit, "", {}, fs)
    assert v["met"] is False and "not a cell reference" in v["error"]


def _gold(fs: Path, answer: str) -> dict:
    digest = hashlib.sha256((fs / "outputs" / "memo.md").read_bytes()).hexdigest()
    return {"gold_response": answer, "gold_files": {"outputs/memo.md": digest}}


def test_reference_match_needs_answer_and_gold_bytes(fs):
    gold = _gold(fs, "Saved the memo.")
    assert runner.reference_match("saved  the memo.", gold, fs)
    assert not runner.reference_match("Saved a memo.", gold, fs)
    (fs / "outputs" / "memo.md").write_text("changed")
    assert not runner.reference_match("Saved the memo.", gold, fs)
    assert not runner.reference_match("", {}, fs)


CRITERIA = [
    {"verifier_id": "v1", "criteria": "Names the bidder", "check": check("exact", value="Rowe")},
    {"verifier_id": "v2", "criteria": "Explains why"},
    {"verifier_id": "v3", "criteria": "Mentions the memo"},
]


def test_grade_without_judge_marks_judge_criteria_unjudged(fs):
    res = asyncio.run(grade(CRITERIA, answer="Rowe wins", fs_root=fs))
    assert (res.reward, res.criteria_met, res.criteria_total) == (0.0, 1, 3)
    assert [v.source for v in res.verdicts] == ["deterministic", "unjudged", "unjudged"]
    assert res.judge_model is None


def test_grade_reference_match_meets_judge_criteria(fs):
    res = asyncio.run(
        grade(CRITERIA, answer="Rowe wins.", fs_root=fs, gold=_gold(fs, "Rowe wins."))
    )
    assert res.reward == 1.0 and res.score == 1.0
    assert [v.source for v in res.verdicts] == ["deterministic", "reference", "reference"]


def test_judge_bad_json_is_retried_then_verdict_recorded(fs):
    with fake_judge([BAD, GOOD_TRUE]) as j:
        settings = JudgeSettings(model="openai/judge-model", api_base=j.url, concurrency=1)
        res = asyncio.run(
            grade(CRITERIA[:2], answer="Rowe wins", fs_root=fs, judge=settings, task_prompt="T?")
        )
    assert res.reward == 1.0
    v = res.verdicts[1]
    assert (v.source, v.met, v.attempts, v.judge_model) == ("judge", True, 2, "openai/judge-model")
    assert v.rationale == "The answer states it."
    assert v.prompt_sha256 and len(v.prompt_sha256) == 64
    assert res.judge_model == "openai/judge-model" and res.judge_prompt_version
    assert "is_criteria_true" in res.judge_system_prompt
    assert len(j.requests) == 2
    first = j.requests[0]["messages"]
    assert "Explains why" in first[1]["content"] and "Rowe wins" in first[1]["content"]
    retry = j.requests[1]["messages"]
    assert retry[2]["role"] == "assistant" and "not valid" in retry[3]["content"]


def test_judge_false_verdict_fails_the_trial_reward(fs):
    with fake_judge([GOOD_FALSE]) as j:
        settings = JudgeSettings(model="openai/judge-model", api_base=j.url)
        res = asyncio.run(grade(CRITERIA, answer="Rowe", fs_root=fs, judge=settings))
    assert (res.reward, res.criteria_met) == (0.0, 1)


def test_judge_always_bad_json_raises_classified(fs):
    with fake_judge([BAD]) as j:
        settings = JudgeSettings(model="openai/jm", api_base=j.url, max_attempts=3)
        with pytest.raises(JudgeError) as ei:
            asyncio.run(grade(CRITERIA[:2], answer="Rowe", fs_root=fs, judge=settings))
    assert ei.value.kind == "bad_json" and len(j.requests) == 3


def test_judge_server_errors_raise_unavailable(fs):
    with fake_judge([500]) as j:
        settings = JudgeSettings(
            model="openai/jm", api_base=j.url, transport_retries=0, timeout_s=10
        )
        with pytest.raises(JudgeError) as ei:
            asyncio.run(grade(CRITERIA[:2], answer="Rowe", fs_root=fs, judge=settings))
    assert ei.value.kind == "unavailable" and ei.value.retryable


@pytest.mark.parametrize(
    ("text", "met"),
    [
        ('{"rationale": "ok", "is_criteria_true": true}', True),
        ('```json\n{"rationale": "no", "is_criteria_true": false}\n```', False),
        ('Verdict: {"rationale": "ok", "is_criteria_true": "TRUE"} done', True),
    ],
)
def test_parse_verdict_accepts(text, met):
    assert parse_verdict(text)[0] is met


@pytest.mark.parametrize(
    "text",
    ["", "yes", '{"rationale": "x"}', '{"is_criteria_true": true}', "[1]", '{"a": 1'],
)
def test_parse_verdict_rejects(text):
    with pytest.raises(ValueError):
        parse_verdict(text)


def test_world_diff_and_judge_view(tmp_path):
    before = tmp_path / "before"
    (before / "filesystem").mkdir(parents=True)
    (before / "filesystem" / "a.txt").write_text("a")
    (before / "filesystem" / "b.txt").write_text("b")
    (before / "filesystem" / "gone.txt").write_text("x")
    after = tmp_path / "after"
    import shutil

    shutil.copytree(before, after)
    stats = stats_of(walk_files(after))
    (after / "filesystem" / "b.txt").write_text("B changed")
    (after / "filesystem" / "new.md").write_text("new file text")
    (after / "filesystem" / "gone.txt").unlink()
    state = WorldState(after_root=after, before=walk_files(before), before_stats=stats)
    d = diff_world(state)
    assert d.created == ["filesystem/new.md"]
    assert d.modified == ["filesystem/b.txt"]
    assert d.deleted == ["filesystem/gone.txt"]
    text = changes_text(state, d)
    assert '<FILE path="new.md" change="created">' in text and "new file text" in text
    assert '<FILE path="gone.txt" change="deleted">' in text
    assert diff_world(WorldState(after_root=after)) is None
