"""What the agent writes next to its trajectory: per-step timings, tool outcomes, the run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AGENT_RECORD_FILE = "apexrl_agent.json"  # AgentRunRecord
TITO_FILE = "tito.json"  # TitoTrajectory: messages + the exact token stream
ATIF_FILE = "trajectory.json"  # Harbor ATIF (token ids, logprobs in step metrics)
ANSWER_NAME = "answer.txt"

AgentStatus = Literal["complete", "agent_timeout", "context_length", "length", "max_steps", "error"]

# The agent's status -> TrialResult.status (apexrl.artifacts.models.TrialResult)
TRIAL_STATUS: dict[str, str] = {
    "complete": "complete",
    "agent_timeout": "agent_timeout",
    "context_length": "context_length",
    "length": "length",
    "max_steps": "length",  # ran out of the step budget: a length budget too
    "error": "error",
}


class ToolCallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: int
    call_id: str
    name: str
    status: Literal["ok", "timeout", "mcp_error", "empty_content", "fatal_mcp_error"]
    duration_s: float
    chars: int  # result length before truncation
    truncated: bool = False
    reconnected: bool = False
    error: str | None = None


class StepRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    step: int
    prompt_tokens: int
    completion_tokens: int
    observation_tokens: int = 0
    finish_reason: str | None = None
    llm_s: float = 0.0
    tools_s: float = 0.0
    tokenize_s: float = 0.0
    n_tool_calls: int = 0
    parse_errors: list[str] = Field(default_factory=list)
    repair: bool = False  # this step's observation asked the model to fix its tool call
    nudge: bool = False  # this step's observation carried the context nudge


class AgentRunRecord(BaseModel):
    """One agent run: status (classified), counts and timings. Written as apexrl_agent.json."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = "1"
    status: AgentStatus = "error"
    error_class: str | None = None  # e.g. llm_timeout, fatal_mcp_error, unparsed_tool_call
    error: str | None = None  # message (redacted)
    final_answer: str | None = None
    model: str | None = None
    context_window: int | None = None
    steps: int = 0  # engine calls
    tokens_in: int = 0  # sum of prompt lengths over engine calls
    tokens_out: int = 0  # sampled tokens
    stream_tokens: int = 0  # length of the final token stream
    tool_calls: int = 0
    tool_outcomes: dict[str, int] = Field(default_factory=dict)
    repairs: int = 0
    reconnects: int = 0
    nudge_step: int | None = None
    gateway_ready_s: float | None = None
    llm_s: float = 0.0
    tools_s: float = 0.0
    duration_s: float = 0.0
    step_records: list[StepRecord] = Field(default_factory=list)
    tool_call_records: list[ToolCallRecord] = Field(default_factory=list)
    repairs_exhausted: bool = False  # the last reply failed to parse after every repair:
    # taken as the final answer (outcome policy "recipe")

    @property
    def trial_status(self) -> str:
        return TRIAL_STATUS[self.status]

    @property
    def tool_call_success_rate(self) -> float | None:
        if not self.tool_calls:
            return None
        return self.tool_outcomes.get("ok", 0) / self.tool_calls
