"""SkyRL generator on apexrl trials: one Harbor trial per trajectory.

`TrialGenerator.generate(input_batch)` takes SkyRL's GeneratorInput (prompts,
env_extras with the task's `task_path`, trajectory_ids, batch_metadata) and
returns SkyRL's GeneratorOutput: per trajectory the prompt ids, response ids,
loss mask, rollout logprobs, reward and stop reason, all read from the agent's
token record (TITO: the exact ids the engine saw and sampled), plus
rollout_metrics, trajectory_ids and generation times. Lists are aligned:
len(response_ids[i]) == len(loss_masks[i]) == len(rollout_logprobs[i]).

Every trial runs in its own process (a fresh interpreter from `ProcessExecutor`,
or a Ray task from `RayExecutor` on a cluster; the executors live in
apexrl.trial.executors): the agent's asyncio loop, MCP streams and SSL contexts
never share a process (docs/facts.md section 5). `executor = "shards"` (`ShardExecutor`) is the
middle way at hundreds of concurrent trials: `shards` long-lived worker processes, each
running many trials in its own event loop
(apexrl.trial.shards): memory grows with the shards, not with the trials, and no
event loop carries more than concurrency/shards agent loops. A semaphore caps the
trials in flight (`concurrency`, set by the KV-cache planner) and an optional
rate limit spaces trial starts.

FAILURE SEMANTICS: the outcome policy table in `apexrl.agent.outcomes` (one table,
policies `recipe` -- the training default, the public recipe's semantics -- and
`strict`), chosen by `budgets.outcome_policy`. Per trajectory it gives the reward
(the verifier's, or 0), whether the loss mask is kept, and the stop reason:

| trial status          | recipe                      | strict                      |
|-----------------------|-----------------------------|-----------------------------|
| complete              | verifier reward, trained    | verifier reward, trained    |
| length / context_length | 0, trained                | 0, trained                  |
| agent_timeout         | 0, masked                   | 0, trained                  |
| error                 | 0, masked                   | 0, masked                   |
| no_verifier_result    | 0, masked                   | 0, masked                   |

Under `recipe` a GRPO group (the samples of one prompt: SkyRL's instance_id, else the
task) with >= 2 agent timeouts or any errored member is masked whole; max_steps
endings are graded and repairs end in a graded final answer (the agent and the trial
machinery apply those). The verifier's reward is `reward` ("score": fraction of
criteria met, the recipe's choice; "pass": 0/1). Infrastructure failures (sandbox,
engine, MCP, judge) keep reward 0 and every token masked. Sandbox-start failures are
retried by the trial machinery (`trial_retries`, default 2) before they count as
`error`; a trial whose process died or whose runner raised is retried once more here,
then counts as `error`. A trial with no token record (it failed before its first
engine call) yields one placeholder token, masked. Responses longer than the context
budget (`max_seq_len` in training, `eval_max_seq_len` in eval) are cut to fit.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from apexrl.agent.budgets import budget
from apexrl.agent.outcomes import OUTCOME_POLICIES, group_masked
from apexrl.agent.outcomes import outcome_policy as get_policy
from apexrl.trial.config import TrialConfig, TrialOutcome, TrialSpec
from apexrl.trial.executors import DEFAULT_TRIAL_FN, Executor, make_executor

PLACEHOLDER_TOKEN = 0


def outcome_policy(status: str, policy: str = "recipe") -> tuple[bool, bool, str]:
    """(reward kept, loss mask kept, stop reason) for a trial status; unknown = error."""
    r = get_policy(policy).rule(status)
    return r.keep_reward, r.train, r.stop_reason


# status -> (reward kept?, mask kept?, stop reason) under the default (recipe) policy
OUTCOME_POLICY: dict[str, tuple[bool, bool, str]] = {
    k: (r.keep_reward, r.train, r.stop_reason) for k, r in OUTCOME_POLICIES["recipe"].rules.items()
}


class GeneratorSettings(TrialSpec):
    """What the generator needs from the recipe (rendered into the run spec): the
    trials' TrialSpec (apexrl.trial.config) plus the training-side settings."""

    model_config = ConfigDict(extra="forbid")
    tasks_dir: str  # Harbor task dirs (unpacked dataset)
    logs_dir: str  # trial folders go under <logs_dir>/<phase>/step-<n>/<trajectory_id>
    model: str | None = None  # served model name
    system_prompt: str | None = None  # text (recipe agent.system_prompt file)
    system_prompt_sha256: str | None = None
    extra_prompt: str | None = None  # text appended to each instruction (agent.extra_prompt)
    extra_prompt_sha256: str | None = None
    reward: Literal["pass", "score"] = "score"  # the recipe trains on the fraction met
    eval_max_steps: int = budget("max_steps").eval_value  # agent steps per eval trial
    eval_nudge: Literal["off", "once", "recipe"] = "off"  # the recipe's eval: no nudge
    max_seq_len: int = 32768
    eval_max_seq_len: int | None = None
    max_tokens_per_turn: int | None = None
    concurrency: int = 64
    rate_limit_per_s: float = 0.0
    session_affinity: bool = True
    trial_retries: int = 2
    runner_retries: int = 1
    executor: Literal["process", "ray", "inline", "shards"] = "process"
    shards: int = Field(0, ge=0)  # executor "shards": worker processes (0: one per CPU)
    # event loops carrying many trials: exported to the trial processes' environment
    # (rollout_env); see apexrl.tito.workers and apexrl.agent.runtime
    tokenize_threads: int = Field(0, ge=0)
    tokenize_nice: int = Field(10, ge=0, le=19)
    loop_gc: Literal["tuned", "default"] = "tuned"
    trial_cpus: float = 0.5  # Ray CPUs reserved per trial task (the sandbox runs elsewhere)
    # the trial function, "module:function" (task_dir, TrialConfig) -> TrialOutcome; given as
    # `runner` by specs written before it had this name
    trial_fn: str = Field(DEFAULT_TRIAL_FN, validation_alias=AliasChoices("trial_fn", "runner"))
    endpoints: list[str] = Field(default_factory=list)  # engine URLs; empty: from SkyRL's client


class Sample(BaseModel):
    """One trajectory as the trainer sees it."""

    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    reward: float
    stop_reason: str
    status: str
    error_class: str | None = None
    turns: int = 0
    tool_calls: int = 0
    tool_call_success_rate: float | None = None
    duration_s: float = 0.0
    llm_s: float | None = None
    env_s: float | None = None
    group_masked: bool = False  # masked by the outcome policy's group rule


# --- token records ------------------------------------------------------------------------
def read_token_record(outcome: TrialOutcome, logs_dir: Path):
    """The agent's TitoTrajectory for this trial, or None.

    Looks at outcome.tokens_path (JSON object, or JSONL whose last line is the
    trajectory), then <logs_dir>/agent/tito.json; agent-written files are read without
    following links (a link or an invalid final record: no record, the sample is masked).
    """
    from apexrl.artifacts.nofollow import RefusedPath
    from apexrl.tito.trajectory import TitoTrajectory, last_token_record

    cands = [outcome.tokens_path, Path(logs_dir) / "agent" / "tito.json"]
    for p in cands:
        if p is None:
            continue
        try:
            data = last_token_record(Path(p))
            if data is not None:
                return TitoTrajectory.model_validate(data)
        except (RefusedPath, ValueError, TypeError):
            continue
    return None


def build_sample(
    outcome: TrialOutcome, traj, *, max_seq_len: int | None, policy: str = "recipe"
) -> Sample:
    """Apply the outcome policy to one outcome and its token record."""
    r = outcome.result
    keep_reward, keep_mask, stop = outcome_policy(r.status, policy)
    prompt: list[int] = []
    resp: list[int] = []
    mask: list[int] = []
    lps: list[float] = []
    if traj is not None:
        prompt = list(traj.prompt_ids)
        turns = list(traj.turns)
        while turns and turns[-1].kind == "observation":  # no signal after the last sample
            turns.pop()
        for t in turns:
            resp.extend(t.token_ids)
            if t.kind == "sampled":
                mask.extend([1] * len(t.token_ids))
                lps.extend(float(x) for x in (t.logprobs or [0.0] * len(t.token_ids)))
            else:
                mask.extend([0] * len(t.token_ids))
                lps.extend([0.0] * len(t.token_ids))
    if max_seq_len and prompt and len(prompt) + len(resp) > max_seq_len:
        keep = max(max_seq_len - len(prompt), 0)
        resp, mask, lps = resp[:keep], mask[:keep], lps[:keep]
        if r.status == "complete":
            stop = "length"
    if not prompt:
        prompt = [PLACEHOLDER_TOKEN]
    if not resp:
        resp, mask, lps = [PLACEHOLDER_TOKEN], [0], [0.0]
        keep_mask = False
    if not keep_mask:
        mask = [0] * len(resp)
    reward = float(r.reward) if keep_reward else 0.0
    t = outcome.timings or {}
    return Sample(
        prompt_ids=prompt,
        response_ids=resp,
        loss_mask=mask,
        logprobs=lps,
        reward=reward,
        stop_reason=stop,
        status=r.status,
        error_class=r.error_class,
        turns=r.turns,
        tool_calls=r.tool_calls,
        tool_call_success_rate=r.tool_call_success_rate,
        duration_s=r.duration_s,
        llm_s=t.get("llm"),
        env_s=t.get("env"),
    )


def to_generator_output(samples: list[Sample], trajectory_ids: list | None) -> dict[str, Any]:
    """SkyRL's GeneratorOutput (a TypedDict: a plain dict) from samples, in input order."""
    times = [s.duration_s for s in samples]
    splits = None
    if samples and all(s.llm_s is not None and s.env_s is not None for s in samples):
        splits = {"llm": [s.llm_s for s in samples], "env": [s.env_s for s in samples]}
    return {
        "prompt_token_ids": [s.prompt_ids for s in samples],
        "response_ids": [s.response_ids for s in samples],
        "rewards": [s.reward for s in samples],
        "loss_masks": [s.loss_mask for s in samples],
        "stop_reasons": [s.stop_reason for s in samples],
        "rollout_metrics": rollout_metrics(samples),
        "rollout_logprobs": [s.logprobs for s in samples],
        "trajectory_ids": trajectory_ids,
        "trajectory_generation_times": times,
        "trajectory_time_splits": splits,
    }


def rollout_metrics(samples: list[Sample]) -> dict[str, float]:
    n = len(samples) or 1
    statuses = Counter(s.status for s in samples)
    out: dict[str, float] = {f"apexrl/status/{k}": v / n for k, v in sorted(statuses.items())}
    out["apexrl/reward_mean"] = sum(s.reward for s in samples) / n
    out["apexrl/masked_frac"] = sum(1 for s in samples if not any(s.loss_mask)) / n
    out["apexrl/group_masked_frac"] = sum(1 for s in samples if s.group_masked) / n
    out["apexrl/turns_mean"] = sum(s.turns for s in samples) / n
    out["apexrl/response_tokens_mean"] = sum(len(s.response_ids) for s in samples) / n
    out["apexrl/trial_seconds_mean"] = sum(s.duration_s for s in samples) / n
    rates = [s.tool_call_success_rate for s in samples if s.tool_call_success_rate is not None]
    if rates:
        out["apexrl/tool_call_success"] = sum(rates) / len(rates)
    return out


class RateLimiter:
    """Spaces trial starts at most `per_s` per second (0: no limit)."""

    def __init__(self, per_s: float) -> None:
        self.interval = 1.0 / per_s if per_s > 0 else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


def pick_endpoint(endpoints: list[str], session: str, affinity: bool, i: int) -> str | None:
    """Session affinity: a trajectory always talks to the same engine (its KV prefix
    stays cached there); without affinity, round-robin."""
    if not endpoints:
        return None
    if not affinity:
        return endpoints[i % len(endpoints)]
    h = int.from_bytes(hashlib.sha256(session.encode()).digest()[:8], "big")
    return endpoints[h % len(endpoints)]


def _group_key(tid: Any, extras: dict | None) -> str:
    """The GRPO group of a trajectory: SkyRL's instance_id, else its task."""
    inst = getattr(tid, "instance_id", None)
    if inst is None and isinstance(tid, dict):
        inst = tid.get("instance_id")
    if inst is not None:
        return f"instance:{inst}"
    e = extras or {}
    return f"task:{e.get('task_path') or e.get('path') or e.get('task_id')}"


def mask_groups(samples: list[Sample], groups: list[str], policy: str) -> None:
    """The policy's group rule: mask every member of a group it condemns (in place)."""
    p = get_policy(policy)
    members: dict[str, list[Sample]] = {}
    for s, g in zip(samples, groups, strict=True):
        members.setdefault(g, []).append(s)
    for group in members.values():
        if len(group) > 0 and group_masked(p, [s.status for s in group]):
            for s in group:
                s.reward = 0.0
                s.loss_mask = [0] * len(s.response_ids)
                s.group_masked = True


# --- the generator -------------------------------------------------------------------------
def _tid_string(tid: Any, i: int) -> str:
    if tid is None:
        return f"traj-{i}"
    if hasattr(tid, "to_string"):
        return tid.to_string()
    if isinstance(tid, dict):
        return f"{tid.get('instance_id')}_{tid.get('repetition_id')}"
    return str(tid)


def rollout_env(settings: GeneratorSettings) -> dict[str, str]:
    """The environment that carries the [rollout] loop settings to trial processes (the
    shard workers and per-trial processes started after it is set inherit it)."""
    from apexrl.agent.runtime import GC_ENV
    from apexrl.tito.workers import NICE_ENV, THREADS_ENV

    return {
        THREADS_ENV: str(settings.tokenize_threads),
        NICE_ENV: str(settings.tokenize_nice),
        GC_ENV: settings.loop_gc,
    }


class TrialGenerator:
    """SkyRL's generator contract over apexrl trials (SkyRL itself is not imported here;
    `apexrl.train.entrypoint` mixes in SkyRL's GeneratorInterface)."""

    def __init__(self, settings: GeneratorSettings, executor: Executor | None = None) -> None:
        self.settings = settings
        os.environ.update(rollout_env(settings))  # before any trial process starts
        self.executor = executor or make_executor(
            settings.executor, settings.concurrency, settings.trial_cpus, settings.shards
        )
        self._sem: asyncio.Semaphore | None = None
        self._limiter: RateLimiter | None = None
        self._counter = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def _gates(self) -> tuple[asyncio.Semaphore, RateLimiter]:
        if self._sem is None:
            self._sem = asyncio.Semaphore(max(1, self.settings.concurrency))
            self._limiter = RateLimiter(self.settings.rate_limit_per_s)
        return self._sem, self._limiter  # type: ignore[return-value]

    def trial_config(self, *, phase: str, logs_dir: Path, endpoint: str | None) -> TrialConfig:
        s = self.settings
        budgets = s.budgets.model_copy()
        ctx = s.max_seq_len
        if phase == "eval":
            budgets.max_steps = s.eval_max_steps
            ctx = s.eval_max_seq_len or s.max_seq_len
        budgets.context_window = ctx
        if phase == "eval":
            budgets.nudge = s.eval_nudge
        sampling = s.sampling.model_copy()
        if s.max_tokens_per_turn:
            sampling.max_tokens = s.max_tokens_per_turn
        return s.trial_config(
            logs_dir=logs_dir,
            endpoint=endpoint,
            model=s.model,
            system_prompt=s.system_prompt,
            extra_prompt=s.extra_prompt,
            retries=s.trial_retries,
            budgets=budgets,
            sampling=sampling,
        )

    async def run_one(
        self, task_dir: Path, *, session: str, phase: str, step: int, sampling: dict | None
    ) -> Sample:
        sem, limiter = self._gates()
        i = self._counter
        self._counter += 1
        async with sem:
            await limiter.wait()
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                logs = Path(self.settings.logs_dir) / phase / f"step-{step}" / session
                endpoint = pick_endpoint(
                    self.settings.endpoints, session, self.settings.session_affinity, i
                )
                config = self.trial_config(phase=phase, logs_dir=logs, endpoint=endpoint)
                if sampling and sampling.get("temperature") is not None:
                    config.sampling.temperature = float(sampling["temperature"])
                outcome = await self._run_with_retries(task_dir, config)
                traj = read_token_record(outcome, logs)
                ctx = config.budgets.context_window
                return build_sample(
                    outcome, traj, max_seq_len=ctx, policy=config.budgets.outcome_policy
                )
            finally:
                self.in_flight -= 1

    async def _run_with_retries(self, task_dir: Path, config: TrialConfig) -> TrialOutcome:
        from apexrl.artifacts.models import TrialResult

        last: BaseException | None = None
        for attempt in range(self.settings.runner_retries + 1):
            try:
                return await self.executor.run(
                    self.settings.trial_fn, task_dir, config.model_copy(update={"attempt": attempt})
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the runner raised or its process died: infrastructure
                last = e
        return TrialOutcome(
            result=TrialResult(
                task_id=Path(task_dir).name,
                attempt=config.attempt,
                status="error",
                error_class="runner_crashed",
            ),
            error_message=f"{type(last).__name__}: {last}",
        )

    def _task_dir(self, extras: dict | None, i: int) -> Path:
        extras = extras or {}
        rel = extras.get("task_path") or extras.get("path") or extras.get("task_id")
        if not rel:
            raise ValueError(f"env_extras[{i}] has no task_path: the dataset was not prepared")
        return Path(self.settings.tasks_dir) / str(rel)

    async def generate(self, input_batch: dict) -> dict:
        prompts = input_batch.get("prompts") or []
        extras = input_batch.get("env_extras") or [None] * len(prompts)
        tids = input_batch.get("trajectory_ids")
        meta = input_batch.get("batch_metadata")
        phase = getattr(meta, "training_phase", None) or (meta or {}).get("training_phase", "train")
        step = getattr(meta, "global_step", None)
        if step is None:
            step = (meta or {}).get("global_step", 0) if isinstance(meta, dict) else 0
        sampling = input_batch.get("sampling_params")
        jobs = []
        groups: list[str] = []
        for i in range(len(prompts)):
            session = _tid_string(tids[i] if tids else None, i)
            groups.append(_group_key(tids[i] if tids else None, extras[i]))
            jobs.append(
                self.run_one(
                    self._task_dir(extras[i], i),
                    session=session,
                    phase=str(phase),
                    step=int(step or 0),
                    sampling=sampling,
                )
            )
        samples = list(await asyncio.gather(*jobs))
        mask_groups(samples, groups, self.settings.budgets.outcome_policy)
        return to_generator_output(samples, list(tids) if tids else None)

    def close(self) -> None:
        self.executor.close()
