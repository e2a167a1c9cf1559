"""Run one trial on Harbor's Trial API: sandbox, agent, grading, teardown.

    outcome = run_trial(task_dir, TrialConfig(agent="oracle", worlds_dir=..., logs_dir=...))

The trial folder is `config.logs_dir` (Harbor's layout: agent/, verifier/,
result.json, trial.log). The agent is apexrl's (`apexrl.agent:ApexAgent`) or the
oracle; the environment is `local` (bubblewrap), `modal`, or Harbor's own
`podman`/`docker`; grading is always apexrl's host-side verifier
(`apexrl.grading.verifier:ApexVerifier`), so a reward file the agent writes counts
for nothing.

Never raises for a trial-level failure: the outcome's status is one of complete,
agent_timeout, context_length, length, error, no_verifier_result, with an
error_class; a trial that did not complete scores 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apexrl.agent.registry import AGENTS
from apexrl.artifacts.models import TrialResult
from apexrl.envs.registry import get_environment
from apexrl.trial.config import TrialConfig, TrialOutcome

VERIFIER = "apexrl.grading.verifier:ApexVerifier"

# Harbor exception type -> (status, error_class)
VERIFIER_ERRORS = {
    "VerifierTimeoutError": "verifier_timeout",
    "RewardFileNotFoundError": "no_reward_file",
    "RewardFileEmptyError": "no_reward_file",
    "VerifierOutputParseError": "bad_reward_file",
    "DownloadVerifierDirError": "verifier_download",
    "AddTestsDirError": "verifier_upload",
    "VerifierInputError": "bad_task_rubric",
    "JudgeError": "judge_error",
}
ERROR_CLASSES = {
    "SandboxDiedError": "sandbox_died",
    "SandboxExecTimeoutError": "exec_timeout",
    "OracleError": "oracle_failed",
    "EnvironmentStartTimeoutError": "sandbox_start_timeout",
    "AgentSetupTimeoutError": "agent_setup_timeout",
    "RefusedEnvError": "task_env_refused",
    "WorldStoreError": "world_store",  # the store's zip missing or corrupt: not the task's
}
RETRYABLE = {"sandbox_start", "sandbox_gateway", "sandbox_start_timeout"}
AGENT_STATUSES = {"complete", "agent_timeout", "context_length", "length", "error"}


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out).removesuffix("_error") or "error"


def harbor_config(task_dir: Path, config: TrialConfig) -> Any:
    """The Harbor TrialConfig for one apexrl trial."""
    from harbor.models.trial.config import (
        AgentConfig,
        TaskConfig,
        VerifierConfig,
    )
    from harbor.models.trial.config import TrialConfig as HarborTrialConfig

    logs = Path(config.logs_dir).resolve()
    b = config.budgets
    entry = AGENTS[config.agent]
    if not entry.uses_model:  # the oracle replays the task's gold output
        agent = AgentConfig(
            import_path=entry.import_path,
            kwargs={"task_dir": str(Path(task_dir).resolve())},
            override_timeout_sec=b.agent_timeout_s,
        )
    else:
        agent = AgentConfig(
            import_path=entry.import_path,
            model_name=config.model,
            kwargs={
                "endpoint": config.endpoint,
                "model": config.model,
                "tokenizer": config.tokenizer,
                "chat_template": config.chat_template,
                **({"system_prompt": config.system_prompt} if config.system_prompt else {}),
                "extra_prompt": config.extra_prompt,
                **({"tools": list(config.tools)} if config.tools is not None else {}),
                "budgets": b.model_dump(mode="json"),
                "sampling": config.sampling.model_dump(mode="json"),
            },
            override_timeout_sec=b.agent_timeout_s,
        )
    worlds = str(Path(config.worlds_dir).resolve()) if config.worlds_dir else None
    env = environment_config(config, worlds)
    if get_environment(config.environment).harbor_owned:
        env.extra_docker_compose = profile_overlays(Path(task_dir), config, logs)
    verifier = VerifierConfig(
        import_path=VERIFIER,
        kwargs={
            "judge": config.judge,
            "judge_api_base": config.judge_api_base,
            "worlds_dir": worlds,
            "reward": config.reward,
            "grader": config.grader,
            "archipelago": config.archipelago,
            "grader_options": list(config.grader_options),
        },
        override_timeout_sec=config.verifier_timeout_s,
    )
    return HarborTrialConfig(
        task=TaskConfig(path=Path(task_dir).resolve()),
        trial_name=logs.name,
        trials_dir=logs.parent,
        agent=agent,
        environment=env,
        verifier=verifier,
    )


def environment_config(config: TrialConfig, worlds: str | None) -> Any:
    """Harbor's EnvironmentConfig for the trial's environment (apexrl.envs.registry)."""
    from harbor.models.trial.config import EnvironmentConfig

    entry = get_environment(config.environment)
    if entry.harbor_owned:  # Harbor's own podman/docker: keep the world image (shared)
        return EnvironmentConfig(type=entry.name, delete=False)
    # graded on the host: the agent's code is online only where the task's [agent] asks
    kwargs: dict[str, Any] = {
        "worlds_dir": worlds,
        "pass_env": config.pass_env,
        "agent_network": "explicit",
    }
    if config.runtime != "apexrl":  # archipelago's own servers (the local environment)
        kwargs.update(runtime=config.runtime, archipelago=config.archipelago)
    if entry.remote_sandbox:
        kwargs.update(config.sandbox.environment_kwargs())
    elif config.sandbox.image_profile:  # the local sandbox shows the world as the profile does
        kwargs["image_profile"] = config.sandbox.image_profile
    return EnvironmentConfig(import_path=entry.import_path, kwargs=kwargs)


def profile_overlays(task_dir: Path, config: TrialConfig, logs: Path) -> list[Path]:
    """Harbor's podman/docker environments start the world image as its profile says
    (apexrl.envs.profiles): a Compose overlay written into the trial folder, or none."""
    from apexrl.envs.profiles import compose_override, profile_for_task
    from apexrl.tasks.meta import find_task_meta

    meta = find_task_meta(task_dir, require_world=False)
    profile = profile_for_task(config.sandbox.image_profile, meta.image_profile if meta else None)
    overlay = compose_override(profile, meta.task_slug if meta else None)
    if overlay is None:
        return []
    import hashlib

    from apexrl.artifacts.atomic import write_text_atomic

    text = json.dumps(overlay, indent=2) + "\n"  # JSON is YAML
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    # beside the trial folder (Harbor makes that one itself), named by its content
    path = logs.parent / ".apexrl-compose" / f"{profile.name}-{digest}.yaml"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return [path]


def agent_meta(hr: Any) -> dict:
    """What the agent reported in AgentContext.metadata (apexrl's agent: under "apexrl")."""
    meta = (hr.agent_result.metadata or {}) if hr.agent_result is not None else {}
    inner = meta.get("apexrl")
    return inner if isinstance(inner, dict) else meta


def classify(hr: Any) -> tuple[str, str | None, str | None]:
    """(status, error_class, message) of a Harbor TrialResult."""
    meta = agent_meta(hr)
    agent_status = meta.get("trial_status") or meta.get("status")
    exc = hr.exception_info
    if exc is not None:
        t, msg = exc.exception_type, exc.exception_message
        if t == "AgentTimeoutError":
            return "agent_timeout", "agent_timeout", msg
        if t in VERIFIER_ERRORS:
            cls = VERIFIER_ERRORS[t]
            if t == "JudgeError":
                cls = "judge_bad_json" if "valid JSON" in msg else "judge_unavailable"
                if "refused" in msg:
                    cls = "judge_bad_request"
            return "no_verifier_result", cls, msg
        if agent_status in AGENT_STATUSES and agent_status != "complete":
            return agent_status, meta.get("error_class") or agent_status, msg
        low = t.lower()
        if "contextlength" in low or "contextwindow" in low:
            return "context_length", "context_length", msg
        if t == "SandboxError":
            kind = "start"
            if "gateway" in msg:
                kind = "gateway"
            return "error", f"sandbox_{kind}", msg
        return "error", ERROR_CLASSES.get(t, _snake(t)), msg
    if agent_status in AGENT_STATUSES and agent_status != "complete":
        return agent_status, meta.get("error_class") or agent_status, meta.get("error")
    vr = hr.verifier_result
    if vr is None or not vr.rewards or "reward" not in vr.rewards:
        return "no_verifier_result", "no_reward", None
    return "complete", None, None


def _secs(t: Any) -> float | None:
    if t is None or t.started_at is None or t.finished_at is None:
        return None
    return (t.finished_at - t.started_at).total_seconds()


def outcome_from(
    hr: Any, task_dir: Path, config: TrialConfig, started: datetime, wall_s: float
) -> TrialOutcome:
    from apexrl.artifacts.nofollow import is_regular, read_regular, scrub
    from apexrl.worlds.store import task_world

    status, error_class, message = classify(hr)
    if status == "length" and error_class == "max_steps" and _graded_at_max_steps(hr, config):
        status, message = "complete", None  # the recipe grades a max_steps ending
    logs = Path(config.logs_dir)
    # the sandbox could write under logs/: links and special files it left are removed
    # (recorded in refused_links.json), never followed by anything that reads the run
    scrub(logs)
    verdicts: list[dict] = []
    grading = logs / "verifier" / "grading.json"
    met = total = unjudged = 0
    if is_regular(grading) and status == "complete":
        g = json.loads(read_regular(grading))
        verdicts = g.get("verdicts", [])
        met, total = int(g.get("criteria_met", 0)), int(g.get("criteria_total", 0))
        unjudged = sum(1 for v in verdicts if v.get("source") == "unjudged")
    reward = 0.0
    if status == "complete":
        reward = float(hr.verifier_result.rewards.get("reward", 0.0))
    ctx = hr.agent_result
    meta = agent_meta(hr)
    tool_calls = int(meta.get("tool_calls", 0) or 0)
    rate = meta.get("tool_call_success_rate")
    try:
        tw = task_world(task_dir)
        task_id, world_id = tw.task_id, tw.world_id
    except Exception:
        task_id, world_id = Path(task_dir).name, ""
    domain = str(_task_meta(task_dir).get("domain") or "")
    result = TrialResult(
        task_id=task_id,
        domain=domain,
        world_id=world_id,
        attempt=config.attempt,
        status=status,  # type: ignore[arg-type]
        error_class=error_class,
        reward=reward,
        criteria_met=met,
        criteria_total=total or int(_task_meta(task_dir).get("n_criteria", 0) or 0),
        turns=int(meta.get("steps", meta.get("turns", 0)) or 0),
        tokens_in=int((ctx.n_input_tokens if ctx else 0) or 0),
        tokens_out=int((ctx.n_output_tokens if ctx else 0) or 0),
        tool_calls=tool_calls,
        tool_call_success_rate=float(rate) if rate is not None else None,
        started_at=started.isoformat(),
        duration_s=wall_s,
        criteria_unjudged=unjudged,
    )
    timings = {
        k: v
        for k, v in {
            "environment_setup": _secs(hr.environment_setup),
            "agent_setup": _secs(hr.agent_setup),
            "agent_execution": _secs(hr.agent_execution),
            "verifier": _secs(hr.verifier),
            "total": wall_s,
        }.items()
        if v is not None
    }
    agent_dir = logs / "agent"
    traj = next(
        (p for p in (agent_dir / "trajectory.json", agent_dir / "atif.json") if is_regular(p)),
        None,
    )
    tokens = next(
        (p for p in (agent_dir / "tito.json", agent_dir / "tokens.jsonl") if is_regular(p)), None
    )
    return TrialOutcome(
        result=result,
        trajectory_path=traj,
        tokens_path=tokens,
        verdicts=verdicts,
        timings=timings,
        error_message=(message or None) if status != "complete" else None,
    )


def _graded_at_max_steps(hr: Any, config: TrialConfig) -> bool:
    from apexrl.agent.outcomes import outcome_policy

    vr = hr.verifier_result
    has_reward = vr is not None and bool(vr.rewards) and "reward" in vr.rewards
    return outcome_policy(config.budgets.outcome_policy).grade_at_max_steps and has_reward


_META_CACHE: dict[str, dict] = {}


def _task_meta(task_dir: Path) -> dict:
    key = str(task_dir)
    if key not in _META_CACHE:
        from apexrl.tasks.meta import try_task_meta

        meta = try_task_meta(Path(task_dir))  # [metadata] or archipelago.json
        _META_CACHE[key] = meta.model_dump(mode="json") if meta else {}
    return _META_CACHE[key]


def _refuse_task_env(task_dir: Path) -> None:
    """No trial of a task whose task.toml sets a name that changes how programs load."""
    import tomllib

    from apexrl.tasks.envnames import RefusedEnvError, task_env_problems

    try:
        raw = tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return  # Harbor's own load names what is wrong
    problems = task_env_problems(raw)
    if problems:
        raise RefusedEnvError(f"task {task_dir.name}: " + "; ".join(problems))


def _failed_outcome(
    task_dir: Path, config: TrialConfig, started: datetime, wall_s: float, e: BaseException
) -> TrialOutcome:
    meta = _task_meta(task_dir)
    return TrialOutcome(
        result=TrialResult(
            task_id=str(meta.get("task_id") or Path(task_dir).name),
            domain=str(meta.get("domain") or ""),
            world_id=str(meta.get("world_id") or ""),
            attempt=config.attempt,
            status="error",
            error_class=ERROR_CLASSES.get(type(e).__name__, _snake(type(e).__name__)),
            criteria_total=int(meta.get("n_criteria", 0) or 0),
            started_at=started.isoformat(),
            duration_s=wall_s,
        ),
        error_message=f"{type(e).__name__}: {e}",
    )


async def arun_trial(
    task_dir: Path, config: TrialConfig, *, agent_config: Any = None
) -> TrialOutcome:
    """run_trial for callers already in an event loop.

    agent_config: a Harbor AgentConfig to run instead of config.agent (custom agents)."""
    from apexrl.trial.task_memo import trial_class

    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    task_dir = Path(task_dir)
    attempts = max(0, config.retries) + 1
    outcome: TrialOutcome | None = None
    for i in range(attempts):
        started = datetime.now(UTC)
        t0 = time.monotonic()
        logs = Path(config.logs_dir)
        if i > 0:
            shutil.rmtree(logs, ignore_errors=True)
        try:
            _refuse_task_env(task_dir)
            hc = harbor_config(task_dir, config)
            if agent_config is not None:
                if agent_config.override_timeout_sec is None:
                    agent_config = agent_config.model_copy(
                        update={"override_timeout_sec": hc.agent.override_timeout_sec}
                    )
                hc.agent = agent_config
            trial = await trial_class().create(hc)  # Harbor's, task work memoised
            hr = await trial.run()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the trial could not even be set up (bad task, bad config)
            return _failed_outcome(task_dir, config, started, time.monotonic() - t0, e)
        outcome = outcome_from(hr, task_dir, config, started, time.monotonic() - t0)
        if outcome.result.error_class not in RETRYABLE:
            break
    assert outcome is not None
    return outcome


def run_trial(task_dir: Path, config: TrialConfig) -> TrialOutcome:
    """Run one trial to the end; never raises for a trial-level failure."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun_trial(task_dir, config))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["v"] = asyncio.run(arun_trial(task_dir, config))
        except BaseException as e:  # re-raised in the caller's thread
            box["e"] = e

    t = threading.Thread(target=target, name="apexrl-trial")
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]
