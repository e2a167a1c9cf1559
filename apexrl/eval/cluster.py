"""`eval run --ray-address`: trials as Ray tasks on a cluster whose nodes share nothing
with the driver but Ray.

- What travels: each task binary (packed from the driver's task dir), each world (a
  store's `<world_id>.zip` as it is, a world folder as a gzip tar) and a tokenizer or
  chat template given as a path here (its files only) is put in Ray's object store
  once and referenced by every trial that needs it; nodes unpack them into their own
  scratch, cached by digest (apexrl.eval.node). A trial's config goes with it; the
  node swaps in its own task, world store, tokenizer and trial folder.
- Placement: a trial asks Ray for the sandbox's CPUs and memory (`--sandbox-cpus`,
  `--sandbox-memory-mb`; 1 CPU and DEFAULT_MEMORY_MB when unset). The driver keeps at
  most as many trials in flight as the cluster's nodes can hold at once (recounted as
  nodes come and go), and says so.
- Failures: a trial lost with its worker or node (Ray's system errors, not the
  trial's own) is submitted again, up to INFRA_RETRIES times, and each loss is
  recorded in RUN_DIR/infra.jsonl; one lost every time is not written as a result
  (never scored 0): the run ends partial and rerunning the command runs it.
- Results come back to this process, which alone writes RUN_DIR.
- Engine: trials reach the engine at `--endpoint`, which preflight checks from every
  node (`preflight_nodes`); an engine that `eval run` would start on this machine's
  loopback is refused with a cluster address (apexrl.eval.runner.preflight).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.errors import UsageError
from apexrl.eval.node import NodeResult, Shipped, probe_node, run_on_node

INFRA_RETRIES = 2  # submissions after the first of a trial lost to the cluster
DEFAULT_MEMORY_MB = 2048  # a local trial: world copy, gateway and MCP servers, the verifier
RECOUNT_EVERY_S = 10.0
STRANDED_S = 300.0  # no alive node able to hold a trial this long: the rest are lost
PROBE_TIMEOUT_S = 120.0


def _ray():
    try:
        import ray
    except ImportError as e:
        raise UsageError("--ray-address needs Ray", hint="pip install 'apexrl[ray]'") from e
    return ray


@contextlib.contextmanager
def session(address: str) -> Iterator[None]:
    """Connected to the cluster at `address` ('local' starts one here) for the block;
    a connection made here is closed at its end, one the caller made is left open."""
    ray = _ray()
    if ray.is_initialized():
        yield
        return
    ray.init(
        address=None if address == "local" else address,
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


# --- placement ------------------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    cpus: float  # per trial
    memory_mb: int  # per trial
    nodes: int  # alive nodes
    capacity: int  # trials the nodes hold at once
    in_flight: int  # the cap the driver keeps

    def line(self) -> str:
        return (
            f"ray: {self.nodes} node(s) hold {self.capacity} trial(s) at once "
            f"({self.cpus:g} CPU, {self.memory_mb} MB each): {self.in_flight} in flight"
        )


def trial_resources(sandbox) -> tuple[float, int]:
    """(CPUs, MB) a trial asks Ray for: the sandbox's limits, or 1 CPU and DEFAULT_MEMORY_MB."""
    cpus = float(sandbox.cpus) if sandbox.cpus else 1.0
    return cpus, int(sandbox.memory_mb or DEFAULT_MEMORY_MB)


def capacity(nodes: list[dict], cpus: float, memory_mb: int) -> int:
    """Trials the alive nodes hold at once: per node, the fewer of what its CPUs and its
    memory allow."""
    total = 0
    for n in nodes:
        if not n.get("Alive"):
            continue
        res = n.get("Resources") or {}
        by_cpu = int(res.get("CPU", 0) // cpus) if cpus > 0 else 1 << 30
        by_mem = int(res.get("memory", 0) // (memory_mb * 2**20))
        total += min(by_cpu, by_mem)
    return total


def placement(sandbox, concurrency: int) -> Placement:
    """The per-trial request and the in-flight cap: the cluster's capacity, or
    --concurrency when it is set (above 1) and lower."""
    ray = _ray()
    cpus, mem = trial_resources(sandbox)
    nodes = ray.nodes()
    cap = capacity(nodes, cpus, mem)
    if cap < 1:
        raise UsageError(
            f"no node of the Ray cluster has {cpus:g} CPU and {mem} MB for a trial",
            hint="add nodes, or lower --sandbox-cpus / --sandbox-memory-mb",
        )
    in_flight = cap if concurrency <= 1 else min(concurrency, cap)
    alive = sum(1 for n in nodes if n.get("Alive"))
    return Placement(cpus, mem, alive, cap, in_flight)


# --- what travels ---------------------------------------------------------------------


@dataclass
class Shipments:
    """Blobs put in the object store, each once for the whole run."""

    worlds_dir: Path | None
    tasks: dict[str, Shipped] = field(default_factory=dict)
    worlds: dict[str, Shipped] = field(default_factory=dict)
    local: dict[str, Shipped] = field(default_factory=dict)  # tokenizer / template paths
    bytes_put: int = 0

    def _put(self, kind: str, name: str, blob: bytes) -> Shipped:
        ray = _ray()
        self.bytes_put += len(blob)
        digest = hashlib.sha256(blob).hexdigest()
        return Shipped(kind, name, digest, len(blob), [ray.put(blob)])

    def files(self, config) -> dict[str, Shipped]:
        """The config's paths on this machine a trial reads (a tokenizer folder or file, a
        chat template file), each shipped once; names (hub ids, built-ins) are left."""
        out = {}
        for name in ("tokenizer", "chat_template"):
            value = getattr(config, name)
            if not value or not Path(value).expanduser().exists():
                continue
            path = Path(value).expanduser().resolve()
            if str(path) not in self.local:
                from apexrl.eval.node import pack_files

                kind = "file" if path.is_file() else "dir"
                self.local[str(path)] = self._put(kind, path.name, pack_files(path))
            out[name] = self.local[str(path)]
        return out

    def task(self, path: Path, name: str) -> Shipped:
        if name not in self.tasks:
            from apexrl.tasks.pack import pack_task_dir

            self.tasks[name] = self._put("task", name, pack_task_dir(path)[0])
        return self.tasks[name]

    def world(self, world_id: str) -> Shipped | None:
        if self.worlds_dir is None or not world_id:
            return None
        if world_id not in self.worlds:
            from apexrl.worlds.store import WorldStore

            folder, zpath = WorldStore(self.worlds_dir).locate(world_id)
            if zpath is not None:
                from apexrl.artifacts.nofollow import read_regular

                self.worlds[world_id] = self._put("world-zip", world_id, read_regular(zpath))
            elif folder is not None:
                from apexrl.artifacts.archive_write import gzip_fast
                from apexrl.tasks.pack import tar_task_dir

                blob = gzip_fast(tar_task_dir(folder))
                self.worlds[world_id] = self._put("world-tar", world_id, blob)
            else:
                return None  # the trial reports the missing world, as in a local run
        return self.worlds[world_id]


# --- the run --------------------------------------------------------------------------


@dataclass
class Lost:
    """A trial the cluster lost every time it was submitted."""

    trial_id: str
    why: str


def is_infra(e: BaseException) -> bool:
    """A trial lost with its worker, node or objects (resubmitted), as opposed to an
    error of the trial's own code (recorded as its result)."""
    import ray.exceptions as rx

    if isinstance(e, rx.RayTaskError | rx.TaskCancelledError | rx.RuntimeEnvSetupError):
        return False
    infra = (
        rx.WorkerCrashedError,
        rx.NodeDiedError,
        rx.ObjectLostError,
        rx.LocalRayletDiedError,
        rx.OutOfMemoryError,
        rx.ObjectFetchTimedOutError,
        rx.RaySystemError,
    )
    return isinstance(e, infra)


def run_on_ray(
    execute,
    trial_fn,
    todo: list,
    configs: list,
    *,
    sandbox,
    worlds_dir: Path | None,
    concurrency: int,
    record: Callable,
    on_info: Callable[[str], None] | None = None,
    infra_log: Path | None = None,
    error_row: Callable,
) -> list[Lost]:
    """Run `todo` as Ray tasks; `record(TrialDone)` each result here as it arrives.
    Returns the trials lost to the cluster after INFRA_RETRIES resubmissions."""
    ray = _ray()
    place = placement(sandbox, concurrency)
    if on_info:
        on_info(place.line())
    remote = ray.remote(run_on_node).options(
        num_cpus=place.cpus, memory=place.memory_mb * 2**20, max_retries=0
    )
    ship = Shipments(worlds_dir)
    execute_ref, fn_ref = ray.put(execute), ray.put(trial_fn)
    jobs = iter(zip(todo, configs, strict=True))
    tries: dict[str, int] = {}
    retry: list = []
    pending: dict = {}  # ObjectRef -> (trial, config)
    lost: list[Lost] = []
    limit, recounted = place.in_flight, time.monotonic()

    def submit(trial, config) -> None:
        tries[trial.trial_id] = tries.get(trial.trial_id, 0) + 1
        task = ship.task(trial.task.path, trial.task.name)
        world = ship.world(trial.task.world_id)
        files = ship.files(config)
        ref = remote.remote(execute_ref, fn_ref, trial, config, task, world, files)
        pending[ref] = (trial, config)

    stranded_since: float | None = None
    while True:
        while len(pending) < limit:
            job = retry.pop(0) if retry else next(jobs, None)
            if job is None:
                break
            submit(*job)
        if not pending:
            break
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=RECOUNT_EVERY_S)
        for ref in ready:
            trial, config = pending.pop(ref)
            try:
                res: NodeResult = ray.get(ref)
            except Exception as e:
                if not is_infra(e):
                    record(error_row(trial, e))
                    continue
                why = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
                _log_loss(infra_log, trial.trial_id, tries[trial.trial_id], why)
                if tries[trial.trial_id] <= INFRA_RETRIES:
                    retry.append((trial, config))
                else:
                    lost.append(Lost(trial.trial_id, why))
                continue
            record(_arrived(res, config, tries[trial.trial_id] - 1))
        if time.monotonic() - recounted > RECOUNT_EVERY_S:  # nodes come and go
            recounted = time.monotonic()
            cap = capacity(ray.nodes(), place.cpus, place.memory_mb)
            if cap > 0:
                limit, stranded_since = (cap if concurrency <= 1 else min(concurrency, cap)), None
            elif stranded_since is None:
                stranded_since = recounted
            elif recounted - stranded_since > STRANDED_S:  # no node left to run them
                for ref in pending:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                left = [t for t, _ in pending.values()] + [t for t, _ in retry]
                left += [t for t, _ in jobs]
                why = f"no node of the cluster could hold a trial for {STRANDED_S:.0f}s"
                lost += [Lost(t.trial_id, why) for t in left]
                break
    if on_info:
        n_tasks, n_worlds = len(ship.tasks), len(ship.worlds)
        on_info(
            f"ray: {ship.bytes_put} bytes put in the object store "
            f"({n_tasks} task(s), {n_worlds} world(s))"
        )
    return lost


def _arrived(res: NodeResult, config, retries: int):
    """The TrialDone a node sent, with its resubmission count and folder restored here."""
    done = res.done
    if retries:
        done.row = done.row.model_copy(update={"infra_retries": retries})
    if res.logs is not None:
        restore_logs(res.logs, Path(config.logs_dir))
    return done


def restore_logs(blob: bytes, dest: Path) -> None:
    """The trial folder a node sent back, at `dest` (replaced as a whole), extracted as
    any archive is (its bytes were written by a sandbox)."""
    from apexrl.artifacts.archive_extract import extract_targz
    from apexrl.artifacts.atomic import atomic_dir

    with atomic_dir(dest, force=True, marker=False) as tmp:
        extract_targz(blob, tmp, where=f"trial folder {dest.name}", links="none", empty=True)


def _log_loss(path: Path | None, trial_id: str, attempt: int, why: str) -> None:
    if path is None:
        return
    import datetime as dt

    from apexrl.artifacts.jsonl import append_record

    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    append_record(path, {"trial_id": trial_id, "submission": attempt, "at": now, "error": why})


# --- preflight ------------------------------------------------------------------------


def preflight_nodes(environment: str, key_names: list[str], endpoints: list[str]) -> list:
    """Problems seen from every alive node: its environment's check, the tasks' env keys
    it lacks, endpoints it cannot reach (apexrl.envs.preflight.Problem each)."""
    from apexrl.envs.preflight import Problem
    from apexrl.errors import ExitCode

    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(probe_node)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    refs = {
        n["NodeID"]: probe.options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
        ).remote(endpoints, environment, key_names)
        for n in alive
    }
    problems = []
    for node_id, ref in refs.items():
        label = f"node {node_id[:12]}"
        try:
            got = ray.get(ref, timeout=PROBE_TIMEOUT_S)
        except Exception as e:  # a node that cannot run a probe cannot run trials either
            problems.append(
                Problem(f"{label}: the preflight probe failed ({type(e).__name__})", "check it")
            )
            continue
        for what, fix, code in got["problems"]:
            problems.append(Problem(f"{label}: {what}", fix, ExitCode(code)))
        for url, why in got["unreachable"].items():
            problems.append(
                Problem(
                    f"{label} cannot reach {url}: {why}",
                    "serve the engine (and judge) where every node reaches it, and pass that URL",
                )
            )
        if got["missing_keys"]:
            problems.append(
                Problem(
                    f"{label} lacks env key(s) the tasks need: {', '.join(got['missing_keys'])}",
                    "set them in the environment of every Ray node (names only are checked)",
                    ExitCode.AUTH,
                )
            )
    return problems
