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
    assert v.rationale == (
        "no created or changed file of the expected type (.xlsx, .xls, .xlsm): "
        "not met without asking the judge"
    )
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


def test_checks_read_the_trials_files_and_computed_cells(tmp_path, fake):
    """File checks look in the trial's fs_root, and a formula no app computed (a file a
    library wrote) is evaluated on the host; a broken check is unmet with its reason."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active["A1"] = "=2+3"
    wb.save(tmp_path / "book.xlsx")
    (tmp_path / "memo.txt").write_text("hello")
    cell = {"kind": "sheet_cell", "path": "book.xlsx", "cell": "A1", "value": 5}
    crit = [
        {
            "verifier_id": "f",
            "criteria": "memo",
            "check": {"kind": "file_exists", "path": "memo.txt"},
        },
        {"verifier_id": "c", "criteria": "cell", "check": cell},
        {"verifier_id": "b", "criteria": "broken", "check": {"kind": "nope"}},
    ]
    r = _grade(tmp_path, crit)
    by = {v.verifier_id: v for v in r.verdicts}
    assert by["f"].met is True and by["c"].met is True
    assert (by["f"].criteria, by["c"].criteria, by["b"].criteria) == ("memo", "cell", "broken")
    assert by["b"].met is False and by["b"].source == "deterministic"
    assert by["b"].error == "ValueError: unknown check kind 'nope'"
    assert by["f"].error is None


def test_defaults_and_the_reward_setting(tmp_path, fake, monkeypatch):
    async def slow(judge, *a, **k):
        await asyncio.sleep(0.05)
        return await fake(judge, *a, **k)

    monkeypatch.setattr(grader.Judge, "judge", lambda self, *a, **k: slow(self, *a, **k))
    r = asyncio.run(grader.grade(CRIT, answer="x", fs_root=tmp_path, judge=JUDGE))
    assert r.task_id == ""
    assert [(c["task"], c["shown"]) for c in fake.calls] == [("", ""), ("", "")]
    assert 0.05 <= r.duration_s < 30  # measured, not a default
    assert {v.criteria for v in r.verdicts if v.source == "judge"} == {
        "judge says MET", "judge says no"
    }  # fmt: skip
    with pytest.raises(ValueError, match=r"^reward must be one of \('pass', 'score'\), not 'x'$"):
        _grade(tmp_path, reward="x")
    with pytest.raises(ValueError) as e:
        grader.check_options(["bad"])
    assert str(e.value) == f"unknown grader option 'bad': one of {', '.join(grader.GRADER_OPTIONS)}"


def _item(path: str, text: str, **kw) -> object:
    from apexrl.grading.evidence import FileEvidence

    return FileEvidence(change="created", path=path, text=text, **kw)


def test_file_criteria_see_their_file_types_only(tmp_path, fake):
    """Each criterion is shown the files of its expected type (with evidence caps: the
    rendered text); a criterion whose type has no file fails without the judge, and the
    ones after it are still judged; an unknown-case label is refused unless lenient."""
    files = [_item("a.docx", "DOCX-BODY"), _item("b.xlsx", "XLSX-BODY")]
    crit = [
        {"verifier_id": "p", "criteria": "pdf MET", "expected_file_type": "PDF Documents (.pdf)"},
        {"verifier_id": "s", "criteria": "sheet MET",
         "expected_file_type": "Spreadsheets (.xlsx, .xls, .xlsm)"},
    ]  # fmt: skip
    r = _grade(tmp_path, crit, judge=JUDGE, files=files, options=frozenset({"evidence_caps"}))
    by = {v.verifier_id: v for v in r.verdicts}
    assert (by["p"].met, by["p"].criteria) == (False, "pdf MET")
    assert by["p"].rationale == (
        "no created or changed file of the expected type (.pdf): not met without asking the judge"
    )
    assert [c["criterion"] for c in fake.calls] == ["sheet MET"]
    shown = fake.calls[0]["shown"]
    assert "XLSX-BODY" in shown and "DOCX-BODY" not in shown
    assert by["s"].met is True
    lower = [{"verifier_id": "l", "criteria": "MET", "expected_file_type": "pdf documents (.pdf)"}]
    from apexrl.artifacts.file_types import UnknownFileType

    with pytest.raises(UnknownFileType):
        _grade(tmp_path, lower, judge=JUDGE, files=files)
    r = _grade(tmp_path, lower, judge=JUDGE, files=files,
               options=frozenset({"lenient_file_types"}))  # fmt: skip
    assert r.verdicts[0].rationale.startswith("no created or changed file of the expected type")


def test_database_criteria_go_to_the_database_judge(tmp_path, fake, monkeypatch):
    """A 'Database Files (.db)' criterion with files known is judged on the databases
    (archipelago's tool judge), unless `db_as_file`; the criteria after it still go on."""
    from apexrl.grading import db_judge

    seen = []

    async def judge_databases(j, criterion, files):
        seen.append((j.settings, criterion, files))
        return JudgeVerdict(met=True, rationale="db", attempts=3)

    monkeypatch.setattr(db_judge, "judge_databases", judge_databases)
    files = [_item(".apps_data/app/x.db", "")]
    crit = [
        {"verifier_id": "d", "criteria": "db MET", "expected_file_type": db_judge.DB_LABEL},
        {"verifier_id": "a", "criteria": "answer MET", "evaluation_scope": "answer"},
    ]
    r = _grade(tmp_path, crit, judge=JUDGE, files=files, options=frozenset({"evidence_caps"}))
    assert seen == [(JUDGE, "db MET", files)]
    by = {v.verifier_id: v for v in r.verdicts}
    assert (by["d"].met, by["d"].rationale, by["d"].attempts) == (True, "db", 3)
    assert [c["criterion"] for c in fake.calls] == ["answer MET"]
    r = _grade(tmp_path, crit, judge=JUDGE, files=files,
               options=frozenset({"evidence_caps", "db_as_file"}))  # fmt: skip
    assert len(seen) == 1 and [c["criterion"] for c in fake.calls[1:]] == ["db MET", "answer MET"]
    r = _grade(tmp_path, crit, judge=JUDGE)  # no files known: no database judge either
    assert len(seen) == 1
