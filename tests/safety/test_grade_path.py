"""The grading path (`apexrl.grading.grader.grade`) between the deterministic checks and
the judge: which criteria go to the judge, what each verdict records, the reward per
setting, the options and what they change. The judge's own I/O is replaced by a fake
`Judge.judge` that records what it was asked (its transport, retries and parsing are
tests/grading/test_judge_faults.py and tests/safety/test_verdicts.py); everything else
is the real grader. A wrong number here is a wrong reward: nothing may default to met."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from apexrl.grading import grader
from apexrl.grading.judge import JudgeSettings, JudgeVerdict, system_prompt
from apexrl.grading.models import FileChangeSummary


class _FakeJudge:
    """Judge.judge: met when the criterion's text says so; records each call."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def __call__(self, judge, task, criterion, answer, shown, **kw):
        self.calls.append({"settings": judge.settings, "task": task, "criterion": criterion,
                           "answer": answer, "shown": shown, **kw})  # fmt: skip
        met = "MET" in criterion
        return JudgeVerdict(met=met, rationale=f"r:{criterion}", attempts=2, prompt_sha256="ab")


@pytest.fixture
def fake(monkeypatch):
    f = _FakeJudge()
    monkeypatch.setattr(grader.Judge, "judge", lambda self, *a, **k: f(self, *a, **k))
    return f


CRIT = [
    {"verifier_id": "d1", "criteria": "has 42", "check": {"kind": "contains", "value": "42"}},
    {"verifier_id": "d2", "criteria": "has 7", "check": {"kind": "contains", "value": "7"}},
    {"verifier_id": "j1", "criteria": "judge says MET"},
    {"verifier_id": "j2", "criteria": "judge says no", "check": None},
]
JUDGE = JudgeSettings(model="openai/j", api_base="http://127.0.0.1:9/v1")


def _grade(tmp_path, crit=CRIT, **kw):
    kw.setdefault("answer", "the answer is 42")
    return asyncio.run(grader.grade(crit, fs_root=tmp_path, **kw))


def test_without_a_judge_judge_criteria_are_unmet_and_say_why(tmp_path, fake):
    r = _grade(tmp_path, task_id="t9")
    by = {v.verifier_id: v for v in r.verdicts}
    assert [v.verifier_id for v in r.verdicts] == ["d1", "d2", "j1", "j2"]
    assert (by["d1"].met, by["d1"].source, by["d1"].error) == (True, "deterministic", None)
    assert (by["d2"].met, by["d2"].source) == (False, "deterministic")
    for v in (by["j1"], by["j2"]):
        assert (v.met, v.source) == (False, "unjudged")
        assert v.error == "needs the LLM judge and none was configured"
        assert v.criteria in ("judge says MET", "judge says no")
    assert fake.calls == []
    assert (r.criteria_met, r.criteria_total, r.passed, r.reward) == (1, 4, False, 0.0)
    assert r.task_id == "t9" and r.judge_calls is None and r.judge_model is None
    assert r.judge_prompt_version is None and r.judge_system_prompt is None
    assert r.answer_chars == len("the answer is 42") and r.grader_options == []


def test_the_judge_decides_each_criterion_without_a_check(tmp_path, fake):
    changes = FileChangeSummary()
    r = _grade(
        tmp_path, judge=JUDGE, task_prompt="do it", changes_text="CHANGES", changes=changes,
        reward="score",
    )  # fmt: skip
    by = {v.verifier_id: v for v in r.verdicts}
    assert [c["criterion"] for c in fake.calls] == ["judge says MET", "judge says no"]
    for c in fake.calls:
        assert c["task"] == "do it" and c["answer"] == "the answer is 42"
        assert c["shown"] == "CHANGES"  # no files given: the change text, whole
        assert c["scope"] == "both" and c["answer_cap"] is None
        assert c["system"] == system_prompt()
        assert c["settings"] == JUDGE  # no option: the settings as given
    j1, j2 = by["j1"], by["j2"]
    assert (j1.met, j1.source, j1.rationale) == (True, "judge", "r:judge says MET")
    assert (j1.judge_model, j1.attempts, j1.prompt_sha256) == ("openai/j", 2, "ab")
    assert (j2.met, j2.source) == (False, "judge")
    assert by["d1"].source == "deterministic" and by["d1"].attempts == 0
    assert r.judge_calls == 4  # two criteria, two attempts each
    assert (r.criteria_met, r.criteria_total) == (2, 4)
    assert r.reward == 0.5 and r.score == 0.5 and r.reward_mode == "score"
    assert r.judge_model == "openai/j" and r.judge_system_prompt == system_prompt()
    assert r.judge_prompt_version == grader.PROMPT_VERSION and r.changes is changes
    assert r.duration_s >= 0


def test_a_reference_match_goes_to_the_judge_unless_the_option_says_so(tmp_path, fake):
    crit = [{"verifier_id": "f", "criteria": "free text"}]
    gold = {"gold_response": "the answer is 42"}
    r = _grade(tmp_path, crit, gold=gold)  # no judge: the reference decides
    assert (r.verdicts[0].met, r.verdicts[0].source) == (True, "reference") and r.passed
    r = _grade(tmp_path, crit, gold=gold, judge=JUDGE)  # archipelago asks the judge
    assert (r.verdicts[0].met, r.verdicts[0].source) == (False, "judge") and not r.passed
    assert len(fake.calls) == 1
    opts = frozenset({"reference_shortcut"})
    r = _grade(tmp_path, crit, gold=gold, judge=JUDGE, options=opts)
    assert (r.verdicts[0].met, r.verdicts[0].source) == (True, "reference") and r.passed
    assert len(fake.calls) == 1 and r.judge_calls == 0 and r.grader_options == sorted(opts)


def test_a_files_criterion_without_such_a_file_fails_without_the_judge(tmp_path, fake):
    crit = [
        {
            "verifier_id": "x",
            "criteria": "sheet MET",
            "expected_file_type": "Spreadsheets (.xlsx, .xls, .xlsm)",
        }
    ]
    r = _grade(tmp_path, crit, judge=JUDGE, files=[])
    v = r.verdicts[0]
    assert (v.met, v.source, v.judge_model) == (False, "judge", "openai/j")
    assert v.rationale.startswith("no created or changed file of the expected type (")
    assert v.rationale.endswith("): not met without asking the judge")
    assert fake.calls == [] and r.judge_calls == 0
    # without the file list (no evidence collected) the judge is asked
    r = _grade(tmp_path, crit, judge=JUDGE)
    assert fake.calls[0]["scope"] == "files" and r.verdicts[0].met is True


def test_options_change_what_they_name_only(tmp_path, fake):
    assert grader.check_options(None) == frozenset()
    assert grader.check_options(["free_json"]) == frozenset({"free_json"})
    with pytest.raises(ValueError, match=r"unknown grader option 'nope': one of last_assi"):
        grader.check_options(["free_json", "nope"])
    with pytest.raises(ValueError, match="unknown grader option"):
        _grade(tmp_path, options=frozenset({"nope"}))
    assert grader.apply_options(None, frozenset({"fixed_sampling"})) is None
    assert grader.apply_options(JUDGE, frozenset()) is JUDGE
    assert grader.apply_options(JUDGE, frozenset({"fixed_sampling"})) == dataclasses.replace(
        JUDGE, temperature=0.0, max_tokens=1024
    )
    assert grader.apply_options(JUDGE, frozenset({"few_retries"})) == dataclasses.replace(
        JUDGE, max_attempts=3, timeout_s=120.0
    )
    assert grader.apply_options(JUDGE, frozenset({"free_json"})) == dataclasses.replace(
        JUDGE, response_schema=False
    )
    every = frozenset({"fixed_sampling", "few_retries", "free_json", "evidence_caps"})
    _grade(tmp_path, judge=JUDGE, options=every, changes_text="C")
    sent = fake.calls[0]
    assert sent["settings"] == dataclasses.replace(
        JUDGE, temperature=0.0, max_tokens=1024, max_attempts=3, timeout_s=120.0,
        response_schema=False,
    )  # fmt: skip
    capped = system_prompt(grader.MAX_FILE_CHARS, grader.MAX_TOTAL_CHARS)
    assert sent["system"] == capped and sent["answer_cap"] == grader.MAX_ANSWER_CHARS
    assert sent["shown"] == "C"


def test_the_final_answer_graded():
    msgs = [{"role": "assistant", "content": "mine"}, {"role": "user", "content": "last"}]
    assert grader.final_answer("txt", msgs, frozenset()) == "last"  # archipelago's rule
    assert grader.final_answer("txt", msgs, frozenset({"last_assistant_answer"})) == "txt"
    assert grader.final_answer("txt", None, frozenset()) == "txt"
    assert grader.final_answer("txt", [], frozenset()) == "txt"
    parts = [{"role": "tool", "content": [{"type": "text", "text": "a"}]}]
    assert grader.final_answer("txt", parts, frozenset()) == "a"


def test_database_criteria_are_told_apart():
    from apexrl.grading.db_judge import DB_LABEL

    assert grader._is_db_criterion({"expected_file_type": DB_LABEL})
    assert grader._is_db_criterion({"verifier_values": {"expected_file_type": DB_LABEL}})
    assert not grader._is_db_criterion({"verifier_values": {"expected_file_type": "Documents"}})
    assert not grader._is_db_criterion({"verifier_values": "x", "expected_file_type": None})
    assert not grader._is_db_criterion({})
