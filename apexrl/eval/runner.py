"""Run the trials of an eval: plan, fan out (threads or Ray tasks), journal, summarize.

The trial function is `apexrl.trial.run.run_trial(task_dir, config) -> TrialOutcome`
unless another is passed (tests, benchmarks). It never raises for a trial-level
failure; if it does raise anyway, the trial is recorded as status "error" with
error class "runner_exception" (counted, score 0) and the run goes on.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ConfigDict, Field

from apexrl import __version__
from apexrl.agent.prompts import PromptInfo
from apexrl.agent.settings import AgentBudgets, eval_budgets
from apexrl.artifacts.models import TrialResult
from apexrl.errors import ApexError, UsageError
from apexrl.eval import resume
from apexrl.eval.infra import is_infra, is_task_error
from apexrl.eval.metrics import summarize
from apexrl.eval.models import (
    LOGS_DIR,
    TASKS_DIR,
    DatasetInfo,
    EvalResultRow,
    EvalRunConfig,
    EvalSummary,
    RunPlan,
    trial_id_for,
)
from apexrl.trial.config import TrialConfig, TrialOutcome, TrialSpec

TrialFn = Callable[[Path, TrialConfig], TrialOutcome]
COMPACT_EVERY_S = 10.0


def default_trial_fn() -> TrialFn:
    try:
        from apexrl.trial.run import run_trial
    except ImportError as e:  # pragma: no cover - until the trial machinery is installed
        raise UsageError("this install has no trial runner (apexrl.trial.run)") from e
    return run_trial


# --- tasks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRef:
    path: Path
    name: str
    task_id: str
    domain: str
    world_id: str
    required_env_keys: tuple[str, ...] = ()


def _task_ref(d: Path) -> TaskRef:
    from apexrl.errors import BadRecordError
    from apexrl.tasks.meta import find_task_meta

    try:
        meta = find_task_meta(d, require_world=False)  # a trial without one errors alone
    except BadRecordError as e:
        raise ApexError(str(e), hint=e.hint) from None
    return TaskRef(
        path=d,
        name=d.name,
        task_id=meta.task_id if meta else d.name,
        domain=meta.domain if meta else "",
        world_id=meta.world_id if meta else "",
        required_env_keys=tuple(meta.required_env_keys) if meta else (),
    )


def resolve_tasks(
    source: str, run_dir: Path, *, on_error=None, selection: list[str] | None = None
) -> tuple[list[TaskRef], DatasetInfo]:
    """Task dirs of DATASET (a folder of task dirs, or anything `tasks unpack` takes,
    unpacked into RUN_DIR/tasks) and the dataset's digest. `selection`: the lines piped
    to `--tasks -` (apexrl.tasks.selection): exactly those tasks."""
    from apexrl.artifacts.models import DatasetRow
    from apexrl.tasks.dataset import dataset_digest
    from apexrl.tasks.pack import find_task_dirs, pack_task_dir

    if selection is not None:
        from apexrl.tasks.selection import materialize, parse_selection

        dirs = materialize(parse_selection(selection), run_dir / TASKS_DIR)
        rows = [DatasetRow(path=d.name, sha256=pack_task_dir(d)[1]) for d in dirs]
        refs = [_task_ref(d) for d in dirs]
        info = DatasetInfo(
            source=f"stdin ({len(refs)} tasks)", digest=dataset_digest(rows), n_tasks=len(refs)
        )
        return refs, info
    text = str(source)
    path = Path(text).expanduser()
    is_hf = text.startswith("hf://")
    if not is_hf and not path.exists():
        raise UsageError(f"dataset {text} does not exist", hint="pass task dirs or a dataset")
    dirs = find_task_dirs(path) if not is_hf and path.is_dir() else []
    if not is_hf and path.is_dir() and not dirs and not any(path.rglob("*.parquet")):
        raise ApexError(
            f"dataset {text} has no tasks (no task dirs, no .parquet files)",
            hint="pass task dirs from `apexrl tasks convert` or a dataset from `tasks pack`",
        )
    if dirs:
        rows = [DatasetRow(path=d.name, sha256=pack_task_dir(d)[1]) for d in dirs]
    else:
        from apexrl.tasks.unpack import unpack_dataset

        out = run_dir / TASKS_DIR
        results = unpack_dataset(text, out, strict=False, on_error=on_error)
        dirs = [out / r.path for r in sorted(results, key=lambda r: r.path)]
        rows = [DatasetRow(path=r.path, sha256=r.sha256) for r in results]
    if not dirs:
        raise ApexError(
            f"dataset {text} has no tasks", hint="check the path; see `apexrl tasks ls`"
        )
    refs = [_task_ref(d) for d in dirs]
    where = text if is_hf else str(path.absolute())  # records travel between folders
    info = DatasetInfo(source=where, digest=dataset_digest(rows), n_tasks=len(refs))
    return refs, info


def select_tasks(
    tasks: list[TaskRef],
    *,
    domains: list[str],
    limit: int | None,
    task_ids: list[str] | None = None,
    shuffle: bool = False,
    seed: int | None = None,
) -> list[TaskRef]:
    """The run's selection: --task-id (a task id or task dir name, repeatable), --domain,
    then --shuffle (a permutation fixed by --seed, 0 when unset), then --limit."""
    if task_ids:
        known = {t.task_id: t for t in tasks} | {t.name: t for t in tasks}
        for x in task_ids:
            if x not in known:
                import difflib

                near = difflib.get_close_matches(x, list(known), n=1)
                raise UsageError(
                    f"--task-id {x!r}: no task of the dataset has that id or folder name",
                    hint=f"did you mean {near[0]!r}?" if near else "see `apexrl tasks ls`",
                )
        wanted = {known[x].name for x in task_ids}
        tasks = [t for t in tasks if t.name in wanted]
    if domains:
        known_d = {t.domain for t in tasks}
        for d in domains:
            if d not in known_d:
                raise UsageError(f"no task has domain {d!r}", hint=f"domains: {sorted(known_d)}")
        tasks = [t for t in tasks if t.domain in domains]
    if shuffle:
        import random

        tasks = list(tasks)
        random.Random(0 if seed is None else seed).shuffle(tasks)
    return tasks[:limit] if limit is not None else tasks


# --- plan -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedTrial:
    trial_id: str
    task: TaskRef
    attempt: int


def trial_id(task: TaskRef, attempt: int) -> str:
    return trial_id_for(task.name, attempt)


def plan_trials(
    tasks: list[TaskRef],
    attempts: int,
    done: dict[str, EvalResultRow],
    *,
    retry_errors: bool,
    retry_task_errors: bool = False,
) -> tuple[list[PlannedTrial], int]:
    """Trials still to run (attempt-major order, so Pass@1 fills in first) and the
    total number planned. A broken task's trials (kind `task`) are rerun only with
    `retry_task_errors` (after its author fixed the task): rerunning them
    unchanged fails the same way."""
    todo = []
    for a in range(attempts):
        for t in tasks:
            tid = trial_id(t, a)
            row = done.get(tid)
            # --retry-errors: infrastructure errors (apexrl.eval.infra), never the model's
            # own failures (those are results)
            again = row is not None and (
                (retry_errors and is_infra(row.status, row.error_class))
                or (retry_task_errors and is_task_error(row.status, row.error_class))
            )
            if row is None or again:
                todo.append(PlannedTrial(tid, t, a))
    return todo, attempts * len(tasks)


# --- one trial ------------------------------------------------------------------------


@dataclass
class TrialDone:
    row: EvalResultRow
    files: dict[str, bytes] = field(default_factory=dict)  # trajectory.json, tokens.jsonl


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def execute_trial(trial_fn: TrialFn, trial: PlannedTrial, config: TrialConfig) -> TrialDone:
    """Run one trial; never raises. Used in threads and, on a node, in a Ray task
    (apexrl.eval.node: the task, world store and folder are the node's own there)."""
    started, t0 = _now(), time.perf_counter()
    task_dir = trial.task.path
    outcome: TrialOutcome | None = None
    try:
        from apexrl.artifacts.nofollow import RefusedPath, read_regular

        shutil.rmtree(config.logs_dir, ignore_errors=True)  # leftovers of a killed run
        config.logs_dir.mkdir(parents=True, exist_ok=True)
        outcome = trial_fn(task_dir, config)
        result = outcome.result
        files = {}
        for name, p in (
            ("trajectory.json", outcome.trajectory_path),
            ("tokens.jsonl", outcome.tokens_path),
        ):
            if p is None:
                continue
            try:  # sandbox-written: a link is refused, never followed to a host file
                files[name] = read_regular(p)
            except FileNotFoundError:
                continue
            except RefusedPath as e:
                files[f"{name}.refused.txt"] = f"not copied: {e}\n".encode()
        if outcome.verdicts:  # per-criterion grading, beside the trajectory it judged
            import orjson

            files["verdicts.json"] = orjson.dumps({"verdicts": outcome.verdicts})
    except Exception as e:  # a bug in the trial machinery: classify, count, go on
        result = TrialResult(
            task_id=trial.task.task_id,
            status="error",
            error_class="runner_exception",
        )
        files = {"error.txt": f"{type(e).__name__}: {e}\n".encode()}
    data = result.model_dump()
    data.update(
        trial_id=trial.trial_id,
        attempt=trial.attempt,
        task_id=data.get("task_id") or trial.task.task_id,
        domain=data.get("domain") or trial.task.domain,
        world_id=data.get("world_id") or trial.task.world_id,
        started_at=data.get("started_at") or started,
        duration_s=data.get("duration_s") or round(time.perf_counter() - t0, 6),
        error_message=_error_message(outcome, files),
    )
    if files.keys() == {"error.txt"}:
        files = {}  # nothing to publish as a trajectory; the row says what happened
    return TrialDone(EvalResultRow.model_validate(data), files)


def _error_message(outcome: TrialOutcome | None, files: dict[str, bytes]) -> str | None:
    """Why the trial failed, for the results row (capped: the full text is in its logs)."""
    msg = outcome.error_message if outcome is not None else None
    if msg is None and "error.txt" in files:
        msg = files["error.txt"].decode(errors="replace").strip()
    return msg[:2000] if msg else None


def trial_config(run: EvalRunConfig, run_dir: Path, trial: PlannedTrial, endpoint: str | None):
    """The TrialConfig of one planned trial: the run's TrialSpec, this attempt's seed."""
    sampling = run.sampling
    if sampling.seed is not None:
        sampling = sampling.model_copy(update={"seed": sampling.seed + trial.attempt})
    return run.trial_config(
        logs_dir=(run_dir / LOGS_DIR / trial.trial_id).resolve(),
        endpoint=endpoint,
        model=run.model.served_name,
        system_prompt=run.system_prompt.text if run.system_prompt else None,
        extra_prompt=run.extra_prompt.text if run.extra_prompt else None,
        attempt=trial.attempt,
        sampling=sampling,
    )


# --- the run --------------------------------------------------------------------------


@dataclass
class Progress:
    """Live counts for the progress line."""

    total: int
    done: int = 0
    passed: int = 0
    tokens: int = 0
    errors: Counter = field(default_factory=Counter)
    t0: float = field(default_factory=time.perf_counter)

    def add(self, row: EvalResultRow) -> None:
        self.done += 1
        complete = row.status == "complete"
        if complete and (
            (row.criteria_total > 0 and row.criteria_met >= row.criteria_total)
            or (row.criteria_total <= 0 and row.reward >= 1.0 - 1e-9)
        ):
            self.passed += 1
        if row.error_class or not complete:
            self.errors[row.error_class or row.status] += 1
        self.tokens += row.tokens_in + row.tokens_out

    def line(self) -> str:
        rate = f"{self.passed / self.done:.0%}" if self.done else "-"
        tps = self.tokens / max(time.perf_counter() - self.t0, 1e-9)
        errs = ", ".join(f"{k} {v}" for k, v in self.errors.most_common(3)) or "none"
        return f"eval  pass {rate}  errors: {errs}  {tps:,.0f} tok/s"


@dataclass
class RunReport:
    summary: EvalSummary
    ran: int
    planned: int
    skipped: int
    lost: list[str] = field(default_factory=list)  # trial ids a Ray cluster lost every time


def run_trials(
    run_dir: Path,
    run: EvalRunConfig,
    tasks: list[TaskRef],
    *,
    endpoint: str | None,
    trial_fn: TrialFn | None = None,
    retry_errors: bool = False,
    retry_task_errors: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_result: Callable[[EvalResultRow, Progress], None] | None = None,
    on_info: Callable[[str], None] | None = None,
) -> RunReport:
    """Run every planned trial not yet in the journal; compact; summarize.
    The caller holds `resume.run_lock` and has written run.json."""
    trial_fn = trial_fn or default_trial_fn()
    done = resume.load_journal(run_dir, repair=True)
    resume.remove_stale_temp(run_dir)
    todo, planned = plan_trials(
        tasks, run.attempts, done, retry_errors=retry_errors, retry_task_errors=retry_task_errors
    )
    ids = {trial_id(t, a) for a in range(run.attempts) for t in tasks}
    prog = Progress(total=len(todo))
    if on_start:
        on_start(len(todo), planned)
    last_compact = time.monotonic()

    def record(td: TrialDone) -> None:
        nonlocal last_compact
        resume.write_trajectory(run_dir, td.row.trial_id, td.files)
        resume.append_result(run_dir, td.row)
        done[td.row.trial_id] = td.row
        prog.add(td.row)
        if on_result:
            on_result(td.row, prog)
        if time.monotonic() - last_compact > COMPACT_EVERY_S:
            compact()
            last_compact = time.monotonic()

    def compact() -> EvalSummary:
        """results.parquet and summary.json over the planned trials only (a journal may
        hold rows of trials outside the plan: run dirs from before plans were recorded)."""
        rows = [r for tid, r in done.items() if tid in ids]
        resume.write_results(run_dir, rows)
        summary = summarize(rows, planned=planned)
        resume.write_summary(run_dir, summary)
        return summary

    lost: list[str] = []
    try:
        if todo:
            configs = [trial_config(run, run_dir, t, endpoint) for t in todo]
            if run.ray_address:
                lost = _run_ray(trial_fn, todo, configs, run, run_dir, record, on_info)
            else:
                _run_threads(trial_fn, todo, configs, run.concurrency, record)
    finally:
        summary = compact()
    skipped = planned - len(todo)
    return RunReport(summary, ran=prog.done, planned=planned, skipped=skipped, lost=lost)


def _run_threads(trial_fn, todo, configs, concurrency: int, record) -> None:
    from apexrl.trial.executors import run_in_threads

    jobs = ((trial_fn, t, c) for t, c in zip(todo, configs, strict=True))
    run_in_threads(execute_trial, jobs, concurrency, record)


def _run_ray(trial_fn, todo, configs, run: EvalRunConfig, run_dir: Path, record, on_info):
    """Each trial a Ray task on the cluster (apexrl.eval.cluster); results come back to
    this process, which alone writes the run dir. Returns the ids of lost trials."""
    from apexrl.eval.cluster import run_on_ray, session

    with session(run.ray_address):
        lost = run_on_ray(
            execute_trial,
            trial_fn,
            todo,
            configs,
            sandbox=run.sandbox,
            worlds_dir=run.worlds_dir,
            concurrency=run.concurrency,
            record=record,
            on_info=on_info,
            infra_log=run_dir / resume.INFRA_FILE,
            error_row=lambda trial, e: _node_error(trial, e, on_info),
        )
    for x in lost:
        if on_info:
            on_info(f"trial {x.trial_id} lost to the cluster ({x.why}); rerun to run it")
    return [x.trial_id for x in lost]


def _node_error(trial: PlannedTrial, e: BaseException, on_info) -> TrialDone:
    """The row of a trial whose Ray task raised (its node could not set it up: a task
    or world that does not unpack), counted as a runner exception, as in a local run."""
    msg = f"{type(e).__name__}: {e}"[:2000]
    if on_info:
        on_info(f"trial {trial.trial_id}: {msg.splitlines()[0]}")
    row = EvalResultRow(
        trial_id=trial.trial_id,
        task_id=trial.task.task_id,
        domain=trial.task.domain,
        world_id=trial.task.world_id,
        attempt=trial.attempt,
        status="error",
        error_class="runner_exception",
        started_at=_now(),
        error_message=msg,
    )
    return TrialDone(row)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_run_config(
    *,
    resolved,
    dataset: DatasetInfo,
    spec: TrialSpec,
    attempts: int,
    limit: int | None,
    domains: list[str],
    concurrency: int,
    ray_address: str | None,
    system_prompt: PromptInfo | None = None,
    extra_prompt: PromptInfo | None = None,
    command: str | None = None,
) -> EvalRunConfig:
    """run.json from the request's TrialSpec, the resolved model and the selection."""
    trial = {k: getattr(spec, k) for k in TrialSpec.model_fields}
    trial.update(
        tokenizer=resolved.tokenizer,
        chat_template=resolved.chat_template,
        worlds_dir=Path(spec.worlds_dir).resolve() if spec.worlds_dir else None,
        pass_env=sorted(set(spec.pass_env)),  # names only, never values
    )
    runtime: dict = {}
    if spec.runtime == "archipelago":  # the checkout whose servers serve the worlds
        from apexrl.peer.gateway import checkout_record

        root, runtime["runtime_commit"], runtime["runtime_key"] = checkout_record(spec.archipelago)
        trial["archipelago"] = str(root)
    return EvalRunConfig(
        **trial,
        **runtime,
        apexrl_version=__version__,
        created_at=now_iso(),
        model=resolved.model,
        engine=resolved.engine,
        chat_template_hash=resolved.chat_template_hash,
        system_prompt=system_prompt,
        extra_prompt=extra_prompt,
        dataset=dataset,
        attempts=attempts,
        limit=limit,
        domains=domains,
        concurrency=concurrency,
        ray_address=ray_address,
        command=command,
    )


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class EvalRequest(TrialSpec):
    """Everything `apexrl eval run` was asked for: the trials' TrialSpec (eval's
    budgets by default: 250 steps, no wrap-up nudge), the model and engine, the
    selection and how to run."""

    model_config = ConfigDict(extra="forbid")
    tasks: str
    run_dir: Path
    model: str | None = None
    endpoint: str | None = None
    engine: str = "auto"
    vllm_python: str | None = None  # --engine vllm: the interpreter with vLLM
    budgets: AgentBudgets = Field(default_factory=eval_budgets)  # type: ignore[valid-type]
    system_prompt: PromptInfo | None = None
    extra_prompt: PromptInfo | None = None
    attempts: int = 1
    concurrency: int = 1
    limit: int | None = None
    domains: list[str] = Field(default_factory=list)
    ray_address: str | None = None
    task_ids: list[str] = Field(default_factory=list)  # --task-id (repeatable)
    shuffle: bool = False  # --shuffle: the selection in a random order fixed by the seed
    extend: bool = False  # --extend: add this selection to the run's plan
    retry_errors: bool = False
    retry_task_errors: bool = False  # rerun a broken task's trials (once it is fixed)
    force: bool = False
    command: str | None = None  # the command line, recorded in run.json for resuming
    selection: list[str] | None = None  # `--tasks -`: the lines read from stdin


def run_eval(
    req: EvalRequest,
    *,
    trial_fn: TrialFn | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_result: Callable[[EvalResultRow, Progress], None] | None = None,
    on_bad_task=None,
    on_info: Callable[[str], None] | None = None,
) -> tuple[RunReport, EvalRunConfig]:
    from apexrl.eval.endpoint import resolve_model, running_engine

    if req.attempts < 1:
        raise UsageError("--attempts must be at least 1")
    if req.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if req.limit is not None and req.limit < 1:
        raise UsageError("--limit must be at least 1")
    if req.worlds_dir is not None and not Path(req.worlds_dir).is_dir():
        raise UsageError(f"--worlds {req.worlds_dir} is not a directory")
    run_dir = Path(req.run_dir)
    resolved = resolve_model(
        req.model,
        agent=req.agent,
        endpoint=req.endpoint,
        tokenizer=req.tokenizer,
        chat_template=req.chat_template,
        engine=req.engine,
        vllm_python=req.vllm_python,
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    with resume.run_lock(run_dir), _cluster_session(req.ray_address):
        every, dataset = resolve_tasks(
            req.tasks, run_dir, on_error=on_bad_task, selection=req.selection
        )
        selected = select_tasks(
            every,
            domains=req.domains,
            limit=req.limit,
            task_ids=req.task_ids,
            shuffle=req.shuffle,
            seed=req.sampling.seed,
        )
        run = build_run_config(
            resolved=resolved,
            dataset=dataset,
            spec=req,
            attempts=req.attempts,
            limit=req.limit,
            domains=list(req.domains),
            concurrency=req.concurrency,
            ray_address=req.ray_address,
            system_prompt=req.system_prompt,
            extra_prompt=req.extra_prompt,
            command=req.command,
        )
        run.task_ids, run.shuffle = list(req.task_ids), req.shuffle
        run.plan = resume.settle_plan(
            resume.load_config(run_dir),
            run,
            RunPlan(tasks=[t.name for t in selected], attempts=req.attempts),
            extend=req.extend,
            force=req.force,
            run_dir=run_dir,
        )
        by_name = {t.name: t for t in every}
        tasks = [by_name[n] for n in run.plan.tasks]
        run.attempts = run.plan.attempts
        run.trials_planned = run.attempts * len(tasks)
        needs = check_judge_setting(tasks, req)  # before any trial: exit 2 (no judge), 3 (no key)
        check_judge_answers(req, needs)  # a real probe: a dead judge is never a 0% score
        if trial_fn is None:  # apexrl's own trials: check their environment up front
            preflight(req, tasks, resolved)
            if req.runtime == "archipelago":  # the servers' runtimes built once, not per trial
                from apexrl.peer.gateway import prepare_runtime

                prepare_runtime(run.archipelago, on_progress=on_info)
        old = resume.load_config(run_dir)
        if old is not None and old.fingerprint() == run.fingerprint():
            run.created_at = old.created_at
        resume.prepare_run_dir(run_dir, run, force=req.force)
        done = resume.load_journal(run_dir)
        todo, _ = plan_trials(
            tasks,
            run.attempts,
            done,
            retry_errors=req.retry_errors,
            retry_task_errors=req.retry_task_errors,
        )
        if not todo:  # nothing to run: no engine to start
            report = run_trials(
                run_dir, run, tasks, endpoint=None, trial_fn=trial_fn or _never, on_start=on_start
            )
            return report, run
        with running_engine(resolved, log_path=run_dir / "engine.log") as endpoint:
            if endpoint and req.agent != "oracle":
                check_window(endpoint, run.model.served_name, req.budgets.context_window)
            report = run_trials(
                run_dir,
                run,
                tasks,
                endpoint=endpoint,
                trial_fn=trial_fn,
                retry_errors=req.retry_errors,
                retry_task_errors=req.retry_task_errors,
                on_start=on_start,
                on_result=on_result,
                on_info=on_info,
            )
        return report, run


def check_window(endpoint: str, model: str | None, context_window: int | None) -> None:
    """A context window the engine cannot serve stops the run before any trial (each
    trial would otherwise be cut to the engine's window, or end context_length)."""
    from apexrl.engine.probe import probe_endpoint
    from apexrl.engine.registry import ENGINES

    if context_window is None:
        return
    info = probe_endpoint(endpoint, model=model)
    if info.max_model_len is not None and context_window > info.max_model_len:
        # any engine may be behind the endpoint: each one's way to a wider window
        wider = [e.window_hint.format(n=context_window) for e in ENGINES.values() if e.window_hint]
        serve = f"serve the model with {' or '.join(wider)}, or " if wider else ""
        raise UsageError(
            f"--context-window {context_window:,} is more than the engine at {endpoint} "
            f"serves ({info.max_model_len:,} tokens for {info.model})",
            hint=f"{serve}pass --context-window {info.max_model_len}",
        )


def _cluster_session(address: str | None):
    """Connected to the Ray cluster for the whole run (preflight and trials), if any."""
    if not address:
        import contextlib

        return contextlib.nullcontext()
    from apexrl.eval.cluster import session

    return session(address)


def preflight(req: EvalRequest, tasks: list[TaskRef], resolved) -> None:
    """Stop before any trial when the environment, worlds, engine or credentials would
    fail every one of them (apexrl.eval.preflight)."""
    from apexrl.engine.registry import ENGINES
    from apexrl.eval.preflight import PreflightRequest, TaskNeeds, run_preflight

    kind = resolved.engine.kind
    run_preflight(
        PreflightRequest(
            environment=req.environment,
            tasks=[TaskNeeds(t.name, t.world_id, t.required_env_keys) for t in tasks],
            worlds_dir=Path(req.worlds_dir) if req.worlds_dir else None,
            engine_kind=kind if kind in ENGINES else None,  # one this eval starts
            nodes=_cluster_checks(req, tasks, resolved) if req.ray_address else None,
        )
    )


def _cluster_checks(req: EvalRequest, tasks: list[TaskRef], resolved):
    """Preflight on a Ray cluster: each node's environment, env keys and reach of the
    engine and judge URLs, checked from the node (apexrl.eval.cluster.preflight_nodes).
    An engine this eval would start listens on this machine's loopback, which other
    nodes cannot reach: with a cluster address it is refused (start it where every node
    reaches it and pass --endpoint)."""
    from apexrl.engine.registry import ENGINES
    from apexrl.envs.preflight import Problem

    def check() -> list[Problem]:
        from apexrl.eval.cluster import preflight_nodes

        problems = []
        if resolved.engine.kind in ENGINES and req.ray_address != "local":
            problems.append(
                Problem(
                    f"eval would start the {resolved.engine.kind} engine on this machine's "
                    "127.0.0.1, which the cluster's other nodes cannot reach",
                    "serve the model where every node reaches it and pass --endpoint URL "
                    "(or use --ray-address local)",
                )
            )
        urls = [resolved.engine.endpoint if resolved.engine.kind == "endpoint" else None]
        urls.append(req.judge_api_base)
        keys = sorted({k for t in tasks for k in t.required_env_keys})
        return problems + preflight_nodes(req.environment, keys, [u for u in urls if u])

    return check


def check_judge_setting(tasks: list[TaskRef], req: EvalRequest):
    """Refuse a run whose rubrics need a judge when none is configured (see
    apexrl.grading.requirements). The oracle reproduces the gold output, which the
    reference match grades without a judge, so it needs none."""
    from apexrl.grading.requirements import NO_JUDGE, check_judge

    judge = req.judge
    if judge is None and req.agent == "oracle":
        judge = NO_JUDGE
    return check_judge([t.path for t in tasks], judge, api_base=req.judge_api_base)


def check_judge_answers(req: EvalRequest, needs) -> None:
    """When the rubrics need the judge, one probe request to it before any trial
    (apexrl.eval.preflight.check_judge_endpoint); PreflightError when it cannot answer."""
    from apexrl.eval.preflight import PreflightError, check_judge_endpoint
    from apexrl.grading.requirements import judge_model

    model = judge_model(req.judge)
    if model is None or not needs.needed:
        return
    problems = check_judge_endpoint(model, req.judge_api_base, req.grader_options)
    if problems:
        raise PreflightError(problems)


def _never(task_dir, config):  # pragma: no cover - called only when a plan is empty
    raise AssertionError("no trial should run")
