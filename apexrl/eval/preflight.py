"""Preflight: check, before any trial starts, what would make every trial fail the same way.

An eval of 480 tasks x 8 attempts whose sandbox tool is missing used to start all of
them and report 3,840 identical errors. These checks run in seconds and stop the run
with one message naming each problem and its fix:

- the environment's tools: `bwrap` that can create a sandbox and a place for trial
  folders (local, `apexrl.envs.local.scratch`), `podman` /
  `docker` with a daemon, the `modal` package and its credentials;
- the world store: every selected task's world is there (local);
- the engine: the local CPU engine's libraries when one will be started
  (an `--endpoint` is probed by `eval.endpoint.resolve_model`);
- credentials: every env key a selected task declares (`required_env_keys`) is set.

Problems are gathered, not stopped at the first, and raised as one `PreflightError`
whose exit code is 2 (usage: install or pass something) or 3 (credentials) when only
credentials are missing.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.envs.preflight import (  # the environment checks live with the environments
    PreflightError,
    Problem,
    check_environment,
)
from apexrl.errors import ApexError, ExitCode


@dataclass(frozen=True)
class TaskNeeds:
    """What one selected task needs from the host."""

    name: str
    world_id: str
    required_env_keys: tuple[str, ...] = ()


@dataclass
class PreflightRequest:
    environment: str
    tasks: list[TaskNeeds]
    worlds_dir: Path | None = None
    engine_kind: str | None = None  # "local" / "vllm" when one will be started, else None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    # trials run on a Ray cluster: its nodes' own checks (apexrl.eval.cluster.preflight_nodes)
    # replace this host's environment and env-key checks
    nodes: Callable[[], list[Problem]] | None = None


def run_preflight(req: PreflightRequest) -> None:
    """Raise PreflightError listing every problem found; return quietly when none."""
    from apexrl.envs.registry import ENVIRONMENTS

    problems: list[Problem] = []
    if req.nodes is None:
        problems += check_environment(req.environment, req.env)
    entry = ENVIRONMENTS.get(req.environment)
    if entry is not None and entry.world_store:
        problems += check_worlds(req.tasks, req.worlds_dir)
    problems += check_engine(req.engine_kind)
    problems += check_task_env_keys(req.tasks, req.env) if req.nodes is None else req.nodes()
    if problems:
        raise PreflightError(problems)


# --- worlds, engine, credentials -------------------------------------------------------


def check_worlds(tasks: list[TaskNeeds], worlds_dir: Path | None) -> list[Problem]:
    from apexrl.worlds.store import WorldStore

    if worlds_dir is None:
        return [
            Problem(
                "the local environment needs a world store, and --worlds was not given",
                "pass --worlds DIR holding <world_id>/ folders or <world_id>.zip files "
                "(e.g. the world_files_zipped/ folder of the expert data)",
            )
        ]
    if not Path(worlds_dir).is_dir():
        return [Problem(f"--worlds {worlds_dir} is not a folder", "pass an existing folder")]
    store = WorldStore(Path(worlds_dir))
    missing: dict[str, list[str]] = {}
    for t in tasks:
        if not t.world_id:
            missing.setdefault("(none declared)", []).append(t.name)
        elif not _has_world(store, t.world_id):
            missing.setdefault(t.world_id, []).append(t.name)
    # every world zip the run will use opens (a junk zip would fail each of its trials)
    used = sorted({t.world_id for t in tasks if t.world_id and t.world_id not in missing})
    broken = [p for p in (store.zip_problem(w) for w in used) if p]
    problems = (
        [
            Problem(
                f"{len(broken)} world zip(s) cannot be read: " + "; ".join(broken[:5]),
                "replace each with the world's zip (or its unpacked folder) in --worlds",
            )
        ]
        if broken
        else []
    )
    if not missing:
        return problems
    n_tasks = sum(len(v) for v in missing.values())
    shown = ", ".join(f"{w} ({len(v)} task(s), e.g. {v[0]})" for w, v in list(missing.items())[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return problems + [
        Problem(
            f"{len(missing)} world(s) needed by {n_tasks} task(s) are not in the world store "
            f"{worlds_dir}: {shown}{more}",
            "add <world_id>/ or <world_id>.zip for each to --worlds, or select other tasks "
            "(--domain, --limit)",
        )
    ]


def _has_world(store, world_id: str) -> bool:
    try:
        return store.has(world_id)
    except ApexError:  # an unsafe world id is as good as missing
        return False


def check_engine(engine_kind: str | None) -> list[Problem]:
    """The modules an engine apexrl will start needs here (apexrl.engine.registry)."""
    from apexrl.engine.registry import ENGINES

    entry = ENGINES.get(engine_kind or "")
    if entry is None:
        return []
    lacking = [m for m in entry.preflight_modules if importlib.util.find_spec(m) is None]
    if not lacking:
        return []
    what = "the local CPU engine" if entry.name == "local" else f"the {entry.name} engine"
    return [
        Problem(
            f"{what} needs {' and '.join(lacking)}, not installed here",
            f"pip install 'apexrl[{entry.extra}]', or serve the model elsewhere and pass "
            "--endpoint URL",
        )
    ]


def check_task_env_keys(tasks: Iterable[TaskNeeds], env: dict[str, str]) -> list[Problem]:
    missing: dict[str, int] = {}
    for t in tasks:
        for key in t.required_env_keys:
            if not env.get(key):
                missing[key] = missing.get(key, 0) + 1
    if not missing:
        return []
    names = ", ".join(f"{k} ({n} task(s))" for k, n in sorted(missing.items()))
    return [
        Problem(
            f"the selected tasks need environment variables that are not set: {names}",
            "export them (values are never written to the run), or skip those tasks",
            ExitCode.AUTH,
        )
    ]


# --- the judge -------------------------------------------------------------------------


def check_judge_endpoint(
    model: str, api_base: str | None, options: Iterable[str] = ()
) -> list[Problem]:
    """A real probe of the judge: one tiny request with the configured model, base URL
    and grader options (apexrl.grading.judge.probe). A judge that cannot answer would
    leave every trial ungraded; it stops the run here instead (exit 4 unreachable,
    3 rejected credentials, 2 a request it refuses)."""
    from apexrl.grading.grader import apply_options
    from apexrl.grading.judge import JudgeError, JudgeSettings, probe

    settings = apply_options(JudgeSettings(model=model, api_base=api_base), frozenset(options))
    where = f" at {api_base}" if api_base else ""
    try:
        probe(settings)  # type: ignore[arg-type]
    except JudgeError as e:
        if e.kind == "unavailable":
            return [
                Problem(
                    f"the judge {model}{where} does not answer: {e.message}",
                    "start the judge server or fix --judge-api-base (a probe request is "
                    "sent before any trial); or run with --no-judge",
                    ExitCode.REMOTE,
                )
            ]
        auth = "Authentication" in e.message or "401" in e.message
        return [
            Problem(
                f"the judge {model}{where} refused a probe request: {e.message}",
                "check the judge's API key" if auth else "check the --judge model name",
                ExitCode.AUTH if auth else ExitCode.USAGE,
            )
        ]
    return []
