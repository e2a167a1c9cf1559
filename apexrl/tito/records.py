"""Records written by `apexrl tito verify` (light: pydantic only)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

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
    # an input record that could not be read (not JSON, not a trajectory): the input's
    # fault, not the template's; not written (the record stays as it was)
    _unreadable_input: bool = PrivateAttr(default=False)

    @property
    def unreadable_input(self) -> bool:
        return self._unreadable_input

    @classmethod
    def unreadable(cls, mode: Literal["replay"], where: str, error: Exception) -> TitoFinding:
        f = cls(
            mode=mode,
            case=where,
            ok=False,
            status="error",
            message=f"{where}: not a trajectory record: {error}".strip()[:2000],
        )
        f._unreadable_input = True
        return f
