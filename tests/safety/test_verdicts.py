"""Grading edges no test checked (issue 42): a judge verdict given as the string "false"
(or "true"), and a rubric criterion whose `check` is null (only the judge can decide it:
never a deterministic pass, unjudged without a judge)."""

from __future__ import annotations

import asyncio

import pytest

from apexrl.grading.grader import grade
from apexrl.grading.judge import parse_verdict
from apexrl.grading.requirements import criterion_needs_judge


@pytest.mark.parametrize(
    "reply,met",
    [('{"is_criteria_true": "false", "rationale": "no"}', False),
     ('{"is_criteria_true": " FALSE ", "rationale": "no"}', False),
     ('{"is_criteria_true": "true", "rationale": "yes"}', True),
     ('<think>{"is_criteria_true": true}</think>```json\n{"is_criteria_true": false, '
      '"rationale": "r"}\n```', False),
     ('Verdict: {"is_criteria_true": true, "rationale": "ok"} done', True)],
)  # fmt: skip
def test_string_verdicts_are_read_as_their_value(reply, met):
    assert parse_verdict(reply)[0] is met


@pytest.mark.parametrize(
    "reply,why",
    [('{"is_criteria_true": "no", "rationale": "x"}', "not true/false"),
     ('{"is_criteria_true": 0, "rationale": "x"}', "not true/false"),
     ('{"is_criteria_true": false}', "rationale is missing"),
     ("[1]", "no JSON object"), ("{oops}", "not JSON"), ("", "no JSON object")],
)  # fmt: skip
def test_bad_verdicts_are_errors_not_scores(reply, why):
    with pytest.raises(ValueError, match=why):
        parse_verdict(reply)


def test_a_criterion_whose_check_is_null_is_never_a_deterministic_pass(tmp_path):
    crit = [
        {"verifier_id": "v1", "criteria": "The memo names the counterparty", "check": None},
        {"verifier_id": "v2", "criteria": "Mentions the deadline"},
    ]
    assert criterion_needs_judge(crit[0]) and criterion_needs_judge(crit[1])
    assert not criterion_needs_judge({"check": {"kind": "contains", "value": "x"}})
    res = asyncio.run(grade(crit, answer="The counterparty is Acme; deadline May 1.",
                            fs_root=tmp_path))  # fmt: skip
    assert [(v.verifier_id, v.met, v.source) for v in res.verdicts] == [
        ("v1", False, "unjudged"), ("v2", False, "unjudged")
    ]  # fmt: skip
    assert res.reward == 0.0


@pytest.mark.parametrize(
    "reply,met",
    [  # reasoning over several lines, holding a verdict of its own: never read
     ('<think>\n{"is_criteria_true": true, "rationale": "t"}\n</think>\n'
      '{"is_criteria_true": false, "rationale": "r"}', False),
     # a fenced verdict across lines wins over braces outside the fence
     ('Note {x}\n```json\n{"is_criteria_true": true,\n "rationale": "r"}\n```\nthen {y}', True),
     # the object from the first "{" to the last "}", braces in its strings included
     ('so: {"is_criteria_true": true, "rationale": "a {b} c"} ok', True),
     ('so: {"is_criteria_true": false, "rationale": "r"}done', False)],
)  # fmt: skip
def test_where_the_verdict_is_read_from(reply, met):
    assert parse_verdict(reply)[0] is met


@pytest.mark.parametrize(
    "reply,message",
    [("no braces here", "no JSON object in the reply"),
     ("only a closing } brace", "no JSON object in the reply"),
     ('{"is_criteria_true": true, "rationale": "r"} and more', "not JSON (Extra data)"),
     ('{"is_criteria_true": "yes", "rationale": "x"}',
      "is_criteria_true is missing or not true/false"),
     ('{"is_criteria_true": true, "rationale": 3}', "rationale is missing or not a string")],
)  # fmt: skip
def test_each_bad_verdict_says_what_is_wrong(reply, message):
    """A reply that starts as an object is read whole (text after it is an error, not a
    second guess); each refusal names its reason exactly."""
    with pytest.raises(ValueError) as e:
        parse_verdict(reply)
    assert str(e.value) == message
