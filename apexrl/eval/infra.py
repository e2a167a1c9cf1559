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

A broken task (its rubric or gold output unreadable, a task file that is not a readable
record, a task.toml setting apexrl refuses) is no infrastructure failure either: kind
`task`. Its trials are ungraded too, but counted apart (`task_errors`), not rerun by
`--retry-errors` (the same task fails the same way), and a run whose only ungraded
trials are the tasks' exits 5 (partial, as `tasks convert` and `tasks pack` do on a bad
task): the task's author fixes it (`apexrl tasks validate`).

A world store that cannot give the task's world (its zip missing or corrupt) is the
environment's failure, not the task's: class `world_store`, kind `world`, counted with
the infrastructure (exit 4) and rerun by `--retry-errors` once the store is fixed.
"""

from __future__ import annotations

from apexrl.errors import ExitCode

INFRA_EXIT = ExitCode.REMOTE  # a run with ungraded trials: remote or transient failure
TASK_EXIT = ExitCode.PARTIAL  # a run whose only ungraded trials are broken tasks'

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
    # the task's own fault: its rubric or gold output, a task file that is not a readable
    # record (BadRecordError), a task.toml environment apexrl refuses
    "bad_task_rubric": "task",
    "bad_record": "task",
    "task_env_refused": "task",
    # the world store could not give the world (its zip missing or corrupt): the
    # environment's failure, rerun by --retry-errors once the store is fixed
    "world_store": "world",
    "runner_exception": "apexrl",
    "internal": "apexrl",
}


def infra_kind(status: str | None, error_class: str | None) -> str | None:
    """judge | engine | sandbox | world | grader | apexrl | other for an infrastructure ending,
    task for a broken task; None for a graded trial (complete, or a model failure)."""
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


def is_ungraded(status: str | None, error_class: str | None) -> bool:
    """Never a score: an infrastructure ending or a broken task."""
    return infra_kind(status, error_class) is not None


def is_task_error(status: str | None, error_class: str | None) -> bool:
    """The task is broken: the task's author fixes it; rerunning does not."""
    return infra_kind(status, error_class) == "task"


def is_infra(status: str | None, error_class: str | None) -> bool:
    """An infrastructure ending (judge, engine, sandbox, grader, apexrl): what
    `--retry-errors` runs again."""
    return infra_kind(status, error_class) not in (None, "task")
