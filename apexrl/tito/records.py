"""Records written by `apexrl tito verify` (light: pydantic only)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Cause = Literal[
    "reasoning_pruned",
    "whitespace",
    "tool_argument_reserialization",
    "stop_token_overlap",
    "retokenization",
    "other",
]
CONTEXT_TOKENS = 12


class Divergence(BaseModel):
    index: int  # token index in the expected (incremental) stream
    cause: Cause
    expected: str  # decoded text around the index, special tokens visible
    actual: str
    step: str | None = None  # which render pair diverged (template mode)
    length: int = 1  # tokens affected (replay)


class TitoFinding(BaseModel):
    """One line of `apexrl tito verify` output: a case, trajectory or live conversation."""

    schema_version: str = "1"
    mode: Literal["template", "replay", "live"]
    case: str
    ok: bool
    status: Literal["pass", "mismatch", "error"]
    causes: list[str] = Field(default_factory=list)
    first_divergence: Divergence | None = None
    divergences: list[Divergence] = Field(default_factory=list)
    n_tokens: int = 0
    drift_tokens: int = 0
    drift_rate: float = 0.0
    n_turns: int = 0
    mean_abs_dlogprob: float | None = None
    max_abs_dlogprob: float | None = None
    message: str = ""
