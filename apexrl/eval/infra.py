"""Which trial endings are the infrastructure's, not the model's.

A trial that ended because the judge, the engine, the sandbox or apexrl itself failed
says nothing about the model: it is never a score. Such trials are *ungraded*: the
metrics leave them out (with their count beside), the run exits non-zero
(`INFRA_EXIT`), `eval run --retry-errors` runs them again and `eval regrade` grades
those whose agent finished.

Model failures are results and count as failures: the agent's timeout, a full
context window, the per-turn token cap, the step budget, tool calls it could not
write (`unparsed_tool_call`), and the oracle's gold output failing (`oracle_failed`).
Any other ending with status `error` or `no_verifier_result` is infrastructure: an
unknown class is never taken for a score.
"""

from __future__ import annotations

from apexrl.errors import ExitCode

INFRA_EXIT = ExitCode.REMOTE  # a run with ungraded trials: remote or transient failure

# endings that are the model's own (or the oracle's): results, scored 0
MODEL_STATUSES = frozenset({"agent_timeout", "context_length", "length", "max_steps"})
MODEL_ERRORS = frozenset({"unparsed_tool_call", "oracle_failed"})

# error class -> which part of the infrastructure failed (prefixes, then exact names)
KIND_PREFIXES = (
    ("judge_", "judge"),
    ("llm_", "engine"),
    ("sandbox_", "sandbox"),
    ("verifier_", "grader"),
)
KINDS = {
    "no_endpoint": "engine",
    "no_tokenizer": "engine",
    "no_gateway": "sandbox",
    "gateway_not_ready": "sandbox",
    "tools_not_offered": "sandbox",  # the allowlist names a tool the world does not list
    "fatal_mcp_error": "sandbox",
    "exec_timeout": "sandbox",
    "agent_setup_timeout": "sandbox",
    "setup": "sandbox",
    "no_reward": "grader",
    "no_reward_file": "grader",
    "bad_reward_file": "grader",
    "bad_task_rubric": "grader",
    "runner_exception": "apexrl",
    "internal": "apexrl",
}


def infra_kind(status: str | None, error_class: str | None) -> str | None:
    """judge | engine | sandbox | grader | apexrl | other for an infrastructure ending;
    None for a graded trial (complete, or a model failure)."""
    if status in (None, "complete") and not error_class:
        return None
    if status in MODEL_STATUSES or error_class in MODEL_ERRORS:
        return None
    if status not in ("error", "no_verifier_result"):
        return None  # a result status with a class the agent gave (e.g. max_steps)
    cls = error_class or ""
    for prefix, kind in KIND_PREFIXES:
        if cls.startswith(prefix):
            return kind
    return KINDS.get(cls, "grader" if status == "no_verifier_result" else "other")


def is_infra(status: str | None, error_class: str | None) -> bool:
    return infra_kind(status, error_class) is not None
