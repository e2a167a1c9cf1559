"""Records of an eval run: run.json, results rows, summary.json."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, create_model

from apexrl.agent.prompts import PromptInfo
from apexrl.artifacts.models import SAFE_ID, Record, TrialResult
from apexrl.eval.metric_table import METRICS, MetricCI
from apexrl.trial.config import TrialSpec

RUN_FILE = "run.json"
JOURNAL_FILE = "results.jsonl"
RESULTS_FILE = "results.parquet"
SUMMARY_FILE = "summary.json"
TRAJECTORIES_DIR = "trajectories"
LOGS_DIR = "logs"
TASKS_DIR = "tasks"  # where a packed dataset is unpacked
LOCK_FILE = ".lock"


def trial_id_for(task_name: str, attempt: int) -> str:
    """The id of a task's attempt: `<task dir name>.a<attempt>`, one safe path segment."""
    tid = f"{task_name}.a{attempt}"
    if not SAFE_ID.match(tid):  # long names: keep the id one safe path segment
        tid = f"{task_name[:100]}-{hashlib.sha256(task_name.encode()).hexdigest()[:8]}.a{attempt}"
    return tid


class RunPlan(BaseModel):
    """What a run set out to do: these tasks (dir names, in run order), each attempted
    `attempts` times. A rerun into the same RUN_DIR must select the same plan, or extend
    it explicitly (`--extend`); every figure is computed over the planned trials only."""

    model_config = ConfigDict(extra="forbid")
    tasks: list[str]
    attempts: int

    def trial_ids(self) -> list[str]:
        return [trial_id_for(t, a) for a in range(self.attempts) for t in self.tasks]

    def extended(self, other: RunPlan) -> RunPlan:
        """This plan with the other's tasks added (after its own) and the larger k."""
        seen = set(self.tasks)
        tasks = self.tasks + [t for t in other.tasks if t not in seen]
        return RunPlan(tasks=tasks, attempts=max(self.attempts, other.attempts))

    def difference(self, other: RunPlan) -> str:
        """How `other` differs from this plan, in words."""
        parts = []
        if other.attempts != self.attempts:
            parts.append(f"attempts {self.attempts} -> {other.attempts}")
        added = [t for t in other.tasks if t not in set(self.tasks)]
        dropped = [t for t in self.tasks if t not in set(other.tasks)]
        if added:
            parts.append(f"{len(added)} task(s) not in the plan (e.g. {added[0]})")
        if dropped:
            parts.append(f"{len(dropped)} planned task(s) not selected (e.g. {dropped[0]})")
        if not parts and other.tasks != self.tasks:
            parts.append("the same tasks in another order")
        return "; ".join(parts)


class EvalResultRow(TrialResult):
    """One row of results.parquet: a TrialResult plus the trial's id."""

    trial_id: str
    error_message: str | None = None  # the failure's reason, for a trial that did not complete
    node_id: str | None = None  # the Ray node that ran it (--ray-address); None: this machine
    infra_retries: int = 0  # submissions lost to the cluster (a dead worker or node) before it ran


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None  # as given: HF id, local path, or served name
    path: str | None = None  # local checkpoint directory when there is one
    revision: str | None = None  # Hub commit when resolved from the Hub
    served_name: str | None = None  # the name the engine serves it under


class EngineInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = "none"  # none (oracle) | endpoint | local | vllm
    version: str | None = None
    endpoint: str | None = None  # not part of the run's identity (ports change)


class DatasetInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    digest: str  # sha256 over sorted (task path, packed task sha256)
    n_tasks: int


class EvalRunConfig(Record, TrialSpec):
    """run.json: everything that determines a trial's outcome, plus the selection.

    The trial settings (agent, environment, worlds_dir, tokenizer, chat_template, judge,
    reward, budgets, sampling, sandbox, pass_env) are apexrl.trial.config.TrialSpec's
    fields, recorded flat as before. `identity()` is what must match for a rerun to
    resume into the same RUN_DIR; the selection is compared through `plan` (a rerun that
    selects other tasks or attempts is refused unless it extends the plan); concurrency,
    endpoint URL, judge_api_base, sandbox resources and timestamps may change between
    reruns."""

    apexrl_version: str
    created_at: str
    model: ModelInfo = Field(default_factory=ModelInfo)
    engine: EngineInfo = Field(default_factory=EngineInfo)
    chat_template_hash: str | None = None
    system_prompt: PromptInfo | None = None  # --system-prompt FILE (text + sha256)
    extra_prompt: PromptInfo | None = None  # --extra-prompt FILE (text + sha256)
    dataset: DatasetInfo
    attempts: int = 1
    limit: int | None = None
    domains: list[str] = Field(default_factory=list)
    concurrency: int = 1
    ray_address: str | None = None
    trials_planned: int | None = None  # attempts x planned tasks
    plan: RunPlan | None = None  # None: a run dir from before plans were recorded
    # how the plan's tasks were chosen (--task-id, --shuffle with --seed), for the record
    task_ids: list[str] = Field(default_factory=list)
    shuffle: bool = False
    command: str | None = None  # the command line that ran it: rerun it to resume
    regraded_from: str | None = None  # `eval regrade`: the run whose trials were graded again
    # runtime = "archipelago": the checkout's commit (None: not a git checkout) and the
    # content key its servers' runtimes were built under
    runtime_commit: str | None = None
    runtime_key: str | None = None

    def identity(self) -> dict:
        return {
            "model": self.model.model_dump(exclude={"served_name"}),
            "engine_kind": self.engine.kind,
            "tokenizer": self.tokenizer,
            "chat_template_hash": self.chat_template_hash,
            "judge": self.judge,
            "reward": self.reward,
            "agent": self.agent,
            "environment": self.environment,
            "budgets": self.budgets.model_dump(mode="json"),
            "sampling": self.sampling.model_dump(mode="json"),
            "dataset_digest": self.dataset.digest,
            # only when set, so run dirs made before these options keep their identity
            **({"grader": self.grader} if self.grader != "apexrl" else {}),
            **(
                {"runtime": self.runtime, "runtime_key": self.runtime_key}
                if self.runtime != "apexrl"
                else {}
            ),
            **({"grader_options": sorted(self.grader_options)} if self.grader_options else {}),
            **({"system_prompt_sha256": self.system_prompt.sha256} if self.system_prompt else {}),
            **({"extra_prompt_sha256": self.extra_prompt.sha256} if self.extra_prompt else {}),
        }

    def fingerprint(self) -> str:
        blob = orjson.dumps(self.identity(), option=orjson.OPT_SORT_KEYS)
        return "sha256:" + hashlib.sha256(blob).hexdigest()


def _metric_fields() -> dict[str, Any]:
    """One field per metric of the table (apexrl/eval/metric_table.py), in its order: its
    MetricCI, or for a per-k metric one per k ("k" -> MetricCI)."""
    return {
        m.name: (dict[str, MetricCI], Field(default_factory=dict)) if m.per_k else (MetricCI, ...)
        for m in METRICS.values()
    }


class _GroupCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n_tasks: int
    n_trials: int
    # k -> tasks with fewer than k graded attempts, left out of Pass@k and Pass^k at that k
    tasks_short: dict[str, int] = Field(default_factory=dict)


GroupMetrics = create_model(
    "GroupMetrics",
    __base__=_GroupCounts,
    __module__=__name__,
    __doc__="The metric table's metrics (apexrl/eval/metric_table.py) over a set of tasks.",
    **_metric_fields(),
)


def run_label(run_dir: Path, config: EvalRunConfig | None) -> str:
    """How reports and the viewer name a run: its folder, and the model when recorded."""
    model = config.model.name if config else None
    return f"{run_dir.name} ({model})" if model else run_dir.name


def plan_ids(config: EvalRunConfig | None) -> set[str] | None:
    """The planned trials' ids; None when the run recorded no plan (older run dirs)."""
    if config is None or config.plan is None:
        return None
    return set(config.plan.trial_ids())


def planned_trials(config: EvalRunConfig | None) -> int | None:
    """Trials the run planned: its plan's, else run.json's count, else (run dirs from
    before it was recorded) attempts x tasks when no domain filter hides the count."""
    if config is None:
        return None
    if config.plan is not None:
        return len(config.plan.tasks) * config.plan.attempts
    if config.trials_planned is not None:
        return config.trials_planned
    if config.domains:
        return None
    n = (
        config.dataset.n_tasks
        if config.limit is None
        else min(config.limit, config.dataset.n_tasks)
    )
    return config.attempts * n


class _SummaryCounts(Record):
    complete: bool = True
    trials_planned: int | None = None  # None: not known (a run dir without run.json)
    trials_done: int = 0
    # trials that ended in an infrastructure error or a broken task: not in the metrics
    trials_ungraded: int = 0
    # k -> tasks with fewer than k graded attempts, left out of Pass@k and Pass^k at that k
    tasks_short: dict[str, int] = Field(default_factory=dict)
    n_tasks: int
    n_trials: int
    attempts_max: int
    attempts_min: int


class EvalSummary(create_model("_SummaryMetrics", __base__=_SummaryCounts, **_metric_fields())):
    """summary.json. Trials the model failed score 0 and are counted (never dropped);
    trials that ended in an infrastructure error (judge, engine, sandbox: see
    apexrl.eval.infra) are ungraded: left out of the metrics, counted in
    `trials_ungraded`, listed in `ungraded_trials`, and make `exit_code` 4. Trials of a
    broken task (kind `task`) are ungraded too, counted in `task_errors` apart from
    `infra_errors`; with no infrastructure error they make `exit_code` 5. `complete`
    is False while a planned trial has no graded result: rerunning the same command
    resumes an interrupted run; `--retry-errors` or `eval regrade` recovers ungraded ones.
    The metric fields, after the counts, are the metric table's
    (apexrl/eval/metric_table.py)."""

    per_domain: dict[str, GroupMetrics] = Field(default_factory=dict)
    status: dict[str, int] = Field(default_factory=dict)
    errors: dict[str, int] = Field(default_factory=dict)  # the model's failures: class -> trials
    # infrastructure errors (apexrl.eval.infra): class -> trials, never scored
    infra_errors: dict[str, int] = Field(default_factory=dict)
    # broken tasks (apexrl.eval.infra kind "task"): class -> trials, never scored, not retried
    task_errors: dict[str, int] = Field(default_factory=dict)
    ungraded_trials: list[str] = Field(default_factory=list)  # their trial ids
    # what `eval run` exits with for these results (4: infrastructure errors; 5: broken tasks)
    exit_code: int = 0
    # error class -> its distinct messages (first line, most frequent first) -> trials
    error_messages: dict[str, dict[str, int]] = Field(default_factory=dict)
    turns_mean: float = 0.0
    tokens_in_mean: float = 0.0
    tokens_out_mean: float = 0.0
    tokens_total: int = 0
    tool_calls_total: int = 0
    tool_call_success_rate: float | None = None
    duration_s_mean: float = 0.0
    criteria_unjudged: int = 0  # criteria that needed the judge in a --no-judge run (unmet)
    ci_method: str = "percentile bootstrap over tasks, 95%"
    ci_resamples: int = 2000
    ci_seed: int = 0
