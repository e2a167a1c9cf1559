"""Judge faults through LiteLLM against a scripted server: rate limits, stalls, bad JSON."""

from __future__ import annotations

import asyncio

import pytest

from apexrl.grading.grader import grade
from apexrl.grading.judge import JudgeError, JudgeSettings
from tests.trial.fake_judge import BAD, GOOD_TRUE, fake_judge

CRIT = [{"verifier_id": "v1", "criteria": "States the cap is USD 2.1 million"}]


def _grade(tmp_path, settings):
    return asyncio.run(grade(CRIT, answer="The cap is $2.07M", fs_root=tmp_path, judge=settings))


def test_rate_limit_is_retried_by_the_transport(tmp_path):
    with fake_judge([429, GOOD_TRUE]) as j:
        s = JudgeSettings(model="openai/jm", api_base=j.url, transport_retries=2, timeout_s=20)
        res = _grade(tmp_path, s)
    assert res.criteria_met == 1 and len(j.requests) == 2
    assert res.verdicts[0].attempts == 1  # a transport retry is not a bad-JSON attempt


def test_rate_limit_that_persists_is_unavailable(tmp_path):
    with fake_judge([429]) as j:
        s = JudgeSettings(model="openai/jm", api_base=j.url, transport_retries=0, timeout_s=10)
        with pytest.raises(JudgeError) as ei:
            _grade(tmp_path, s)
    assert ei.value.kind == "unavailable" and ei.value.retryable


def test_stalled_judge_times_out_as_unavailable(tmp_path):
    with fake_judge([5.0]) as j:
        s = JudgeSettings(model="openai/jm", api_base=j.url, transport_retries=0, timeout_s=1)
        with pytest.raises(JudgeError) as ei:
            _grade(tmp_path, s)
    assert ei.value.kind == "unavailable" and "Timeout" in str(ei.value)


def test_bad_json_then_valid_records_attempts_and_prompt(tmp_path):
    with fake_judge([BAD, GOOD_TRUE]) as j:
        s = JudgeSettings(model="openai/jm", api_base=j.url, timeout_s=20)
        res = _grade(tmp_path, s)
    (v,) = res.verdicts
    assert v.attempts == 2 and v.met and len(v.prompt_sha256) == 64
    sent = j.requests[0]["messages"]
    assert sent[0]["content"] == res.judge_system_prompt  # the prompt recorded is the one sent
    assert "EVALUATION SCOPE" in sent[1]["content"] and "$2.07M" in sent[1]["content"]
