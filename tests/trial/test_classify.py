"""Trial status classification from Harbor's TrialResult (no sandbox needed)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from apexrl.trial.run import classify


def hr(exc=None, msg="", meta=None, rewards=None):
    return NS(
        exception_info=NS(exception_type=exc, exception_message=msg) if exc else None,
        agent_result=NS(metadata=meta) if meta is not None else None,
        verifier_result=NS(rewards=rewards) if rewards is not None else None,
    )


@pytest.mark.parametrize(
    ("result", "status", "error_class"),
    [
        (hr(rewards={"reward": 1.0}), "complete", None),
        (
            hr(rewards={"reward": 0.0}, meta={"apexrl": {"trial_status": "complete"}}),
            "complete",
            None,
        ),
        (hr(), "no_verifier_result", "no_reward"),
        (hr(rewards={}), "no_verifier_result", "no_reward"),
        (hr("AgentTimeoutError", "timed out"), "agent_timeout", "agent_timeout"),
        (hr("VerifierTimeoutError"), "no_verifier_result", "verifier_timeout"),
        (hr("RewardFileNotFoundError"), "no_verifier_result", "no_reward_file"),
        (hr("VerifierInputError"), "no_verifier_result", "bad_task_rubric"),
        (
            hr("JudgeError", "judge x gave no valid JSON verdict in 3 attempts"),
            "no_verifier_result",
            "judge_bad_json",
        ),
        (
            hr("JudgeError", "judge x unavailable: Timeout"),
            "no_verifier_result",
            "judge_unavailable",
        ),
        (
            hr("JudgeError", "judge x refused the request"),
            "no_verifier_result",
            "judge_bad_request",
        ),
        (hr("SandboxDiedError", "died"), "error", "sandbox_died"),
        (hr("SandboxError", "world w: the gateway did not start"), "error", "sandbox_gateway"),
        (hr("SandboxError", "bwrap missing"), "error", "sandbox_start"),
        (hr("OracleError"), "error", "oracle_failed"),
        (hr("ValueError"), "error", "value"),
        (
            hr(
                rewards={"reward": 0.0},
                meta={
                    "apexrl": {"trial_status": "context_length", "error_class": "context_window"}
                },
            ),
            "context_length",
            "context_window",
        ),
        (
            hr(rewards={"reward": 0.0}, meta={"apexrl": {"trial_status": "length"}}),
            "length",
            "length",
        ),
        (
            hr(
                rewards={"reward": 1.0},
                meta={"apexrl": {"trial_status": "error", "error_class": "llm_timeout"}},
            ),
            "error",
            "llm_timeout",
        ),
        (hr("ContextLengthExceededError"), "context_length", "context_length"),
    ],
)
def test_classify(result, status, error_class):
    assert classify(result)[:2] == (status, error_class)
