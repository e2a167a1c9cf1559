"""The contract between trial runners (eval, the SkyRL generator) and the trial machinery.

`apexrl.trial.run.run_trial(task_dir, config) -> TrialOutcome` runs one trial and
never raises for a trial-level failure: the outcome's `result.status` and
`result.error_class` classify it (docs/facts.md section 5), and non-completed trials
score 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from apexrl.agent.registry import agent_names

# the agent's settings, defined with the agent that reads them (apexrl.agent.settings)
from apexrl.agent.settings import AgentBudgets, Sampling
from apexrl.artifacts.models import TrialResult
from apexrl.envs.registry import check_runtime, environment_names

# the names the registries hold (apexrl.agent.registry.AGENTS, apexrl.envs.registry.ENVIRONMENTS)
AgentName = Literal[agent_names()]  # type: ignore[valid-type]
EnvironmentName = Literal[environment_names()]  # type: ignore[valid-type]


class SandboxSettings(BaseModel):
    """What a remote sandbox (Modal) gets: the recipe used 2 CPUs, 4 GB and 6000 s.
    None: the environment's default. image_profile: how the world image starts
    (apexrl.envs.profiles; None: what the task's metadata records)."""

    model_config = ConfigDict(extra="forbid")
    cpus: float | None = None
    memory_mb: int | None = None
    timeout_s: int | None = None
    image_profile: str | None = None

    def environment_kwargs(self) -> dict:
        """The remote environment's keyword arguments: the names above, set ones only (the
        environment turns them into its backend's own keywords, e.g. Modal's `memory`)."""
        return {k: v for k, v in self.model_dump().items() if v is not None and v != ""}


class TrialSpec(BaseModel):
    """How trials run, the same for every trial of an eval or a training run: agent,
    environment, judge, reward, budgets, sampling, sandbox. Defined once here and
    embedded (as fields) by eval's request and run.json (apexrl.eval.models), the
    training generator's settings (apexrl.train.generator) and every TrialConfig.

    Prompts are carried by the embedding record: texts in TrialConfig and the
    generator's settings, PromptInfo (path, sha256, text) in eval's request and run.json."""

    model_config = ConfigDict(extra="forbid")
    agent: AgentName = "apexrl"
    environment: EnvironmentName = "local"
    worlds_dir: Path | None = None  # world store: <world_id>/ folders or <world_id>.zip
    tokenizer: str | None = None  # tokenizer path or id (defaults to the model's)
    chat_template: str | None = None  # file or built-in name
    judge: str | None = (
        None  # LiteLLM model for non-deterministic criteria; None: deterministic only
    )
    judge_api_base: str | None = None  # OpenAI-compatible base URL for the judge (openai/<name>)
    reward: Literal["pass", "score"] = "pass"  # trial reward: all criteria met, or fraction met
    # who grades: apexrl's grader, or archipelago's own grading runner from a checkout
    grader: Literal["apexrl", "archipelago"] = "apexrl"
    archipelago: str | None = None  # that checkout (default: $APEXRL_ARCHIPELAGO)
    # whose MCP servers serve the world: apexrl's own, or archipelago's own from the
    # checkout above (the local environment only; apexrl.peer.gateway)
    runtime: Literal["apexrl", "archipelago"] = "apexrl"
    grader_options: list[str] = Field(default_factory=list)  # apexrl.grading.grader.GRADER_OPTIONS
    budgets: AgentBudgets = Field(default_factory=AgentBudgets)
    sampling: Sampling = Field(default_factory=Sampling)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    # the world's tools the agent is offered, by name (None: all it lists): a short tool
    # list is a short prompt; a name the world does not list fails the trial
    tools: list[str] | None = None
    # host environment variables a task's [environment.env] `${NAME}` may read (--pass-env);
    # any other `${NAME}` resolves to its default or is dropped
    pass_env: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _combination(self) -> TrialSpec:
        """Settings that cannot run together, refused once for every spec (eval's request,
        the generator's settings, each trial's config): a UsageError, exit 2."""
        check_runtime(self.runtime, self.environment)
        return self

    def spec(self) -> TrialSpec:
        """Only the TrialSpec fields of this record (an embedding one has more)."""
        return TrialSpec.model_validate(self.model_dump(include=set(TrialSpec.model_fields)))

    def trial_config(
        self,
        *,
        logs_dir: Path,
        endpoint: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        extra_prompt: str | None = None,
        attempt: int = 0,
        **more,
    ) -> TrialConfig:
        """The config of one trial of this spec (`more`: retries, verifier_timeout_s, or
        TrialSpec fields to replace)."""
        fields = {k: getattr(self, k) for k in TrialSpec.model_fields}
        fields.update(more)
        return TrialConfig(
            **fields,
            logs_dir=logs_dir,
            endpoint=endpoint,
            model=model,
            system_prompt=system_prompt,
            extra_prompt=extra_prompt,
            attempt=attempt,
        )


class TrialConfig(TrialSpec):
    """One trial: the spec plus what differs per trial (engine URL, attempt, folder)."""

    endpoint: str | None = None  # engine base URL (OpenAI-compatible, /v1/completions)
    model: str | None = None  # served model name
    system_prompt: str | None = None  # text; None: the agent's default
    extra_prompt: str | None = None  # text appended to the task instruction
    verifier_timeout_s: float | None = None  # None: the task's [verifier] timeout
    retries: int = 2  # reruns of a trial whose sandbox failed to start (not of agent failures)
    attempt: int = 0
    logs_dir: Path  # this trial's folder: agent/, verifier/, trajectory files


class TrialOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid")
    result: TrialResult
    trajectory_path: Path | None = None  # ATIF JSON
    tokens_path: Path | None = None  # apexrl token records (ids, mask, logprobs per turn)
    verdicts: list[dict] = Field(default_factory=list)  # per-criterion verdicts from grading
    timings: dict[str, float] = Field(default_factory=dict)  # seconds per phase (environment_setup,
    # agent_setup, agent_execution, verifier, total)
    error_message: str | None = None  # the failure, for non-completed trials
