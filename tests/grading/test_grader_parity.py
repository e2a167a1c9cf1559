"""The grader parity tier: apexrl's grader and archipelago's own grading runner on the
fixed matrix (tests/grading/parity_matrix.py), one deterministic judge (the scripted
engine's marker judge): every criterion gets the same verdict from both. apexrl's own
choices, turned on by name, bring back the differences they make."""

from __future__ import annotations

import pytest

from tests.grading.parity_matrix import all_markers, lenient_row, matrix, run_matrix, table
from tests.scripted_engine import ScriptedEngine, marker_judge


@pytest.fixture(scope="module")
def judge():
    eng = ScriptedEngine([], chat=marker_judge(all_markers([*matrix(), lenient_row()]))).start()
    try:
        yield eng
    finally:
        eng.stop()


@pytest.mark.peer  # archipelago's grading runner (make peer-grader)
def test_both_graders_agree_on_every_criterion_of_the_matrix(archipelago_checkout, judge):
    results = run_matrix(archipelago_checkout, judge.url + "/v1")
    assert len(results) == 32
    assert all(r["same"] for r in results), table(results)
    # the matrix is not trivially agreed: both verdicts occur
    assert {r["apexrl"] for r in results} == {True, False}
    # both graders asked with a response schema (the database loop: with its tools) and
    # no sampling settings of their own
    asked = judge.chat_requests
    assert asked and all(r.get("response_format") or r.get("tools") for r in asked)
    assert any(r.get("tools") for r in asked)
    assert not any("temperature" in r or "max_tokens" in r for r in asked)


def test_named_options_bring_back_apexrl_choices(judge):
    from apexrl.eval.regrade import grade_kept
    from apexrl.grading.judge import JudgeSettings

    options = frozenset(
        {"evidence_caps", "workbook_whole", "last_assistant_answer", "lenient_file_types"}
    )
    j = JudgeSettings(model="openai/scripted", api_base=judge.url + "/v1")
    flipped = {}
    for r in [*matrix(), lenient_row()]:
        g = grade_kept(
            "apexrl", r.inputs, r.before, r.after, r.criteria, {}, judge=j, options=options
        )
        flipped.update({v.verifier_id: v.met for v in g.verdicts})
        assert g.grader_options == sorted(options)
    assert flipped["c-xlsx"] is False  # the table past 20,000 characters is cut off
    assert flipped["c-tool"] is False  # the last assistant text, not the tool result
    assert flipped["c-ft-case"] is False  # the lower-case label now filters to sheets
    assert flipped["c-ans"] is True and flipped["c-ins"] is True
