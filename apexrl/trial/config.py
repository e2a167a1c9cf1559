"""The contract between trial runners (eval, the SkyRL generator) and the trial machinery.

`apexrl.trial.run.run_trial(task_dir, config) -> TrialOutcome` runs one trial and
never raises for a trial-level failure: the outcome's `result.status` and
`result.error_class` classify it (FACTS.md section 5), and non-completed trials
score 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apexrl.artifacts.models import TrialResult
from apexrl.envs.registry import environment_names
from apexrl.trial.agents import agent_names

# the names the registries hold (apexrl.trial.agents.AGENTS, apexrl.envs.registry.ENVIRONMENTS)
AgentName = Literal[agent_names()]  # type: ignore[valid-type]
EnvironmentName = Literal[environment_names()]  # type: ignore[valid-type]


class AgentBudgets(BaseModel):
    """Recipe defaults worth keeping (FACTS.md section 5)."""

    model_config = ConfigDict(extra="forbid")
    max_steps: int = 100
    agent_timeout_s: float = 3600.0
    tool_timeout_s: float = 600.0
    llm_timeout_s: float = 1800.0
    tool_result_max_chars: int = 42_000
    max_tool_call_repairs: int = 2
    nudge_ratio: float = 0.2  # tell the model to wrap up below this share of context left
    context_window: int | None = None  # None: from the model config
    # nudge: off | once (one user message, never repeated) | recipe (appended to the last
    # tool result on every step below nudge_ratio; the recipe's training behaviour)
    nudge: Literal["off", "once", "recipe"] = "recipe"
    # outcome policy (apexrl.trial.outcomes): recipe (the training default) | strict
    outcome_policy: Literal["recipe", "strict"] = "recipe"


class Sampling(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = None  # per turn; None: what the context has left
    seed: int | None = None


class SandboxSettings(BaseModel):
    """What a remote sandbox (Modal) gets: the recipe used 2 CPUs, 4 GB and 6000 s.
    None: the environment's default. image_profile: how the world image starts
    (apexrl.envs.profiles; None: what the task's metadata records)."""

    model_config = ConfigDict(extra="forbid")
    cpus: float | None = None
    memory_mb: int | None = None
    timeout_s: int | None = None
    image_profile: str | None = None

    def modal_kwargs(self) -> dict:
        kw: dict = {}
        if self.cpus is not None:
            kw["cpu"] = self.cpus
        if self.memory_mb is not None:
            kw["memory_mb"] = self.memory_mb
        if self.timeout_s is not None:
            kw["sandbox_timeout_s"] = self.timeout_s
        if self.image_profile:
            kw["image_profile"] = self.image_profile
        return kw


class TrialConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: AgentName = "apexrl"
    environment: EnvironmentName = "local"
    worlds_dir: Path | None = None  # world store: <world_id>/ folders or <world_id>.zip
    endpoint: str | None = None  # engine base URL (OpenAI-compatible, /v1/completions)
    model: str | None = None  # served model name
    tokenizer: str | None = None  # tokenizer path or id (defaults to the model's)
    chat_template: str | None = None  # file or built-in name
    system_prompt: str | None = None  # text; None: the agent's default
    extra_prompt: str | None = None  # text appended to the task instruction
    judge: str | None = (
        None  # LiteLLM model for non-deterministic criteria; None: deterministic only
    )
    judge_api_base: str | None = None  # OpenAI-compatible base URL for the judge (openai/<name>)
    reward: Literal["pass", "score"] = "pass"  # trial reward: all criteria met, or fraction met
    verifier_timeout_s: float | None = None  # None: the task's [verifier] timeout
    retries: int = 2  # reruns of a trial whose sandbox failed to start (not of agent failures)
    budgets: AgentBudgets = Field(default_factory=AgentBudgets)
    sampling: Sampling = Field(default_factory=Sampling)
    attempt: int = 0
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    logs_dir: Path  # this trial's folder: agent/, verifier/, trajectory files
    # host environment variables a task's [environment.env] `${NAME}` may read (--pass-env);
    # any other `${NAME}` resolves to its default or is dropped
    pass_env: list[str] = Field(default_factory=list)


class TrialOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")
    result: TrialResult
    trajectory_path: Path | None = None  # ATIF JSON
    tokens_path: Path | None = None  # apexrl token records (ids, mask, logprobs per turn)
    verdicts: list[dict] = Field(default_factory=list)  # per-criterion verdicts from grading
    timings: dict[str, float] = Field(default_factory=dict)  # seconds per phase (environment_setup,
    # agent_setup, agent_execution, verifier, total)
    error_message: str | None = None  # the failure, for non-completed trials
