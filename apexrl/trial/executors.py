"""Where a trial runs: the executors of training's rollouts and eval's local runs.

A trial function is `run_trial(task_dir, config) -> TrialOutcome` (apexrl.trial.run).
Training names it "module:function" so that it can cross into another process:

- `InlineExecutor`: a worker thread of this process (tests, debugging);
- `ProcessExecutor`: one fresh (spawned) process per trial, nothing leaks between trials;
- `ShardExecutor`: long-lived worker processes, many trials in each one's event loop
  (apexrl.trial.shards);
- `RayExecutor`: one Ray task per trial (a fresh worker process).

`run_in_threads` is the eval's local fan-out: a plain callable per trial over a bounded
thread pool, each result handed back to the caller's thread as it finishes (eval's Ray
runs go through apexrl.eval.cluster, which ships tasks and worlds to the nodes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from apexrl.importpath import load
from apexrl.trial.config import TrialConfig, TrialOutcome

DEFAULT_TRIAL_FN = "apexrl.trial.run:run_trial"


def resolve_trial_fn(spec: str) -> Callable[[Path, TrialConfig], TrialOutcome]:
    return load(spec)


def _run_in_child(trial_fn: str, task_dir: str, config_json: str) -> str:
    """Entry of a trial's own process: returns the outcome as JSON."""
    import os

    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    outcome = resolve_trial_fn(trial_fn)(
        Path(task_dir), TrialConfig.model_validate_json(config_json)
    )
    return outcome.model_dump_json()


class Executor(Protocol):
    async def run(self, trial_fn: str, task_dir: Path, config: TrialConfig) -> TrialOutcome: ...

    def close(self) -> None: ...


class InlineExecutor:
    """Runs the trial in a worker thread of this process (tests, debugging)."""

    async def run(self, trial_fn: str, task_dir: Path, config: TrialConfig) -> TrialOutcome:
        out = await asyncio.to_thread(
            _run_in_child, trial_fn, str(task_dir), config.model_dump_json()
        )
        return TrialOutcome.model_validate_json(out)

    def close(self) -> None:
        pass


class ProcessExecutor:
    """One fresh (spawned) process per trial: nothing leaks between trials."""

    def __init__(self, max_workers: int) -> None:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(
            max_workers=max(1, max_workers),
            mp_context=mp.get_context("spawn"),
            max_tasks_per_child=1,
        )
        self._active: set = set()

    async def run(self, trial_fn: str, task_dir: Path, config: TrialConfig) -> TrialOutcome:
        fut = self._pool.submit(_run_in_child, trial_fn, str(task_dir), config.model_dump_json())
        self._active.add(fut)
        fut.add_done_callback(self._active.discard)
        out = await asyncio.wrap_future(fut)
        return TrialOutcome.model_validate_json(out)

    def close(self) -> None:
        """Cancel queued trials, end running ones, join the pool. (`shutdown(wait=False)`
        leaves the pool's manager thread racing interpreter exit: on CPython 3.12 that is
        "NoneType has no len()" and a hang at exit.)"""
        for f in list(self._active):
            f.cancel()  # queued trials; running ones cannot be cancelled
        if any(not f.done() for f in self._active):
            procs = list((getattr(self._pool, "_processes", None) or {}).values())
            for p in procs:
                if p.is_alive():
                    p.terminate()  # the pool breaks, which is what closing it means now
        self._pool.shutdown(wait=True, cancel_futures=True)


async def _arun_in_shard(trial_fn: str, task_dir: str, config_json: str) -> str:
    """Entry of a trial in a shard worker, in that worker's event loop. The default
    trial function runs there as its coroutine (arun_trial); any other: a coroutine
    function is awaited, a plain function runs in a worker thread."""
    import inspect

    if trial_fn == DEFAULT_TRIAL_FN:
        trial_fn = "apexrl.trial.run:arun_trial"
    fn = resolve_trial_fn(trial_fn)
    config = TrialConfig.model_validate_json(config_json)
    if inspect.iscoroutinefunction(fn):
        outcome = await fn(Path(task_dir), config)
    else:
        outcome = await asyncio.to_thread(fn, Path(task_dir), config)
    return outcome.model_dump_json()


class ShardExecutor:
    """Trials over `shards` long-lived worker processes, many at once in each one's
    event loop (apexrl.trial.shards); the least loaded worker takes the next trial."""

    def __init__(self, shards: int) -> None:
        import os

        from apexrl.trial.shards import ShardPool

        self._pool = ShardPool(shards if shards > 0 else (os.cpu_count() or 1))

    async def run(self, trial_fn: str, task_dir: Path, config: TrialConfig) -> TrialOutcome:
        out = await self._pool.submit(
            "apexrl.trial.executors:_arun_in_shard",
            trial_fn,
            str(task_dir),
            config.model_dump_json(),
        )
        return TrialOutcome.model_validate_json(out)

    def close(self) -> None:
        self._pool.close()


class RayExecutor:
    """One Ray task per trial (a worker process; max_calls=1 makes it a fresh one)."""

    def __init__(self, num_cpus: float = 1.0) -> None:
        import ray

        self._task = ray.remote(num_cpus=num_cpus, max_calls=1, max_retries=0)(_run_in_child)

    async def run(self, trial_fn: str, task_dir: Path, config: TrialConfig) -> TrialOutcome:
        ref = self._task.remote(trial_fn, str(task_dir), config.model_dump_json())
        out = await asyncio.wrap_future(ref.future())
        return TrialOutcome.model_validate_json(out)

    def close(self) -> None:
        pass


def make_executor(
    kind: str, concurrency: int, trial_cpus: float = 0.5, shards: int = 0
) -> Executor:
    if kind == "inline":
        return InlineExecutor()
    if kind == "shards":
        return ShardExecutor(shards)
    if kind == "ray":
        return RayExecutor(trial_cpus)
    if kind == "process":
        return ProcessExecutor(concurrency)
    raise ValueError(f"unknown executor {kind!r} (process, ray, inline, shards)")


def run_in_threads[T](
    fn: Callable[..., T],
    jobs: Iterable[tuple],
    concurrency: int,
    on_done: Callable[[T], None],
    *,
    name: str = "apexrl-trial",
) -> None:
    """fn(*job) for every job, at most `concurrency` at once (in order, in this thread,
    when it is 1); on_done(result) runs in this thread as each one finishes. An exception
    from fn or on_done stops the fan-out: queued jobs are dropped, running ones finish."""
    if concurrency <= 1:
        for job in jobs:
            on_done(fn(*job))
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=name)
    pending: set = set()
    it = iter(jobs)
    try:
        while True:
            while len(pending) < concurrency:
                job = next(it, None)
                if job is None:
                    break
                pending.add(pool.submit(fn, *job))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                on_done(f.result())
    finally:
        pool.shutdown(wait=not pending, cancel_futures=True)
