"""Per-trial overhead of the local (bubblewrap) environment next to podman, same task, same run.

The oracle agent does the task's whole work in one exec (solution/solve.sh), so a
trial's wall time is almost all machinery: sandbox start and gateway ready,
grading, teardown. Measured with run_trial on the example task "market size
table" (a file output, 4 criteria):

  local           run_trial(environment="local") (bubblewrap, warm sandboxes)
  podman          run_trial(environment="podman"): Harbor's podman environment on the
                  world's image, apexrl's grading (same machinery as local otherwise)
  harbor_podman   `harbor run -p TASK -a oracle -e podman` (Harbor's CLI, oracle and
                  in-container verifier) wall time end to end

Writes bench/results.json key "trial_overhead". Target (issue 5): local overhead
<= 2 s median and <= 0.2x the podman trial.

test_bench_local_throughput (issue 20, part B) writes key "local_throughput": N oracle
trials through `eval run`'s runner at concurrency 1 and 8, in trials per minute, on the
example worlds grown to the published ~166 files each (`_pad_worlds`), in three
modes interleaved in the same rounds: `forkserver` (ours: gateways forked from the
pre-imported fork server, trial folders where `apexrl.envs.local.scratch` puts them by
default, RAM here, Harbor's task load and hashes memoised by `apexrl.trial.task_memo`),
`forkserver_disk` (the same with APEXRL_LOCAL_SCRATCH=disk, the scratch choice before
it), and the peer `fresh_gateway` (a fresh sandboxed Python per trial's gateway, trial
folders on disk, no memo: the path before issue 20, APEXRL_LOCAL_FORKSERVER=0
APEXRL_TASK_MEMO=0). The rounds are repeat attempts of the same tasks (memo hits); a
first pass over tasks never run (memo misses) is recorded on its own. CPU seconds per
trial (the whole process tree: driver, sandboxes, gateways) come from a cpuacct cgroup
where one can be made. Between runs, untimed, the peer's warm-pool refill finishes and
the machine goes quiet (its fresh gateways' imports otherwise run into the next run),
and the order of modes and concurrencies alternates per round. Run folders are kept
until the end, as `eval run` keeps them (deleting them between runs would add file
churn no real run has).
Targets: ours >= 5x the peer's trials/min at concurrency 8; ours at concurrency 8 >=
1.8x ours at concurrency 1.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmarks.results import RUNS, load_average, ratio, record, stats, wait_quiet

N_LOCAL = 8
N_PODMAN = 3
TASK = "market-size-table"
WORLD = "world_8ee6dc9ad01f38c743fa5b5a24a31e07"
REF = "localhost/apexrl-bench-world:w8ee"


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 3) if xs else float("nan")


def _overhead(o) -> float:
    t = o.timings
    return t["total"] - t.get("agent_execution", 0.0)


def test_bench_trial_overhead(tmp_path):
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example
    from apexrl.trial.config import TrialConfig
    from apexrl.trial.run import run_trial

    os.environ["HARBOR_TELEMETRY"] = "0"
    os.environ["APEXRL_LOCAL_WORKDIR"] = str(tmp_path / "work")
    os.environ["APEXRL_WORLD_CACHE"] = str(tmp_path / "cache")
    write_example(tmp_path / "ex", seed=0)
    list(convert_all(load_source(tmp_path / "ex"), tmp_path / "tasks", {}, strict=True))
    task = next(p for p in (tmp_path / "tasks").iterdir() if TASK in p.name)
    worlds = tmp_path / "ex" / "world_files_zipped"

    def local(i: int):
        cfg = TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=tmp_path / "l" / str(i))
        out = run_trial(task, cfg)
        assert out.result.reward == 1.0, out.error_message
        return out

    t0 = time.perf_counter()
    cold = local(0)  # the first trial of a process: no warm sandbox yet
    cold_s = time.perf_counter() - t0
    runs = [local(i) for i in range(1, N_LOCAL + 1)]
    figures: dict = {
        "command": "make bench (tests/benchmarks/test_bench_trial.py)",
        "task": task.name,
        "agent": "oracle (solution/solve.sh in the sandbox)",
        "local": {
            "n_trials": len(runs),
            "median_total_s": _median([o.timings["total"] for o in runs]),
            "median_overhead_s": _median([_overhead(o) for o in runs]),
            "median_environment_setup_s": _median(
                [o.timings.get("environment_setup", 0) for o in runs]
            ),
            "median_verifier_s": _median([o.timings.get("verifier", 0) for o in runs]),
            "median_agent_execution_s": _median(
                [o.timings.get("agent_execution", 0) for o in runs]
            ),
            "cold_first_trial_s": round(cold_s, 3),
            "cold_first_trial_overhead_s": round(_overhead(cold), 3),
        },
        "target": "local overhead <= 2 s median and <= 0.2x the podman trial",
        "note": "overhead = trial wall time minus the agent's own execution; local keeps "
        "warm sandboxes (APEXRL_LOCAL_PREWARM, default 2) so sandbox start overlaps the "
        "previous trial",
    }
    figures["podman"] = _podman(tmp_path, task, worlds)
    pm = figures["podman"]
    if pm.get("median_total_s"):
        loc = figures["local"]
        figures["local_vs_podman_total"] = round(loc["median_total_s"] / pm["median_total_s"], 3)
        figures["local_overhead_vs_podman_overhead"] = round(
            loc["median_overhead_s"] / pm["median_overhead_s"], 3
        )
    if pm.get("harbor_cli_median_s"):
        figures["local_vs_harbor_run_podman"] = round(
            figures["local"]["median_total_s"] / pm["harbor_cli_median_s"], 3
        )
    figures["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)  # other load on the machine
    record("trial_overhead", figures)
    print(figures)


def _podman(tmp_path: Path, task: Path, worlds: Path) -> dict:
    """The same task in Harbor's podman environment; {"skipped": why} when it cannot run."""
    from apexrl.trial.config import TrialConfig
    from apexrl.trial.run import run_trial
    from tests.trial.podman_world import build_world_image, podman_env

    for tool in ("podman", "umoci"):
        if not shutil.which(tool):
            return {"skipped": f"{tool} is not installed"}
    bindir = str(Path(sys.executable).parent)
    os.environ["PATH"] = f"{bindir}:{os.environ['PATH']}"
    if not shutil.which("podman-compose"):
        return {"skipped": "podman-compose is not installed (dev extra)"}
    work = tmp_path / "podman"
    work.mkdir()
    try:
        build_world_image(worlds / f"{WORLD}.zip", work, REF)
    except Exception as e:
        return {"skipped": f"could not build/load the world image: {e}"[:500]}
    os.environ["CONTAINERS_CONF"] = podman_env(work)["CONTAINERS_CONF"]
    ptask = work / "tasks" / task.name
    shutil.copytree(task, ptask)
    toml = (ptask / "task.toml").read_text()
    toml = re.sub(r"(?m)^\[environment\]$", f'[environment]\ndocker_image = "{REF}"', toml)
    # Harbor's podman environment refuses convert's default "no-network" (it cannot
    # enforce it): the peer's copy of the task opts into the network
    toml = toml.replace('network_mode = "no-network"', 'network_mode = "public"')
    (ptask / "task.toml").write_text(toml)
    runs = []
    for i in range(N_PODMAN):
        cfg = TrialConfig(
            agent="oracle",
            environment="podman",
            worlds_dir=worlds,
            retries=0,
            logs_dir=tmp_path / "p" / str(i),
        )
        out = run_trial(ptask, cfg)
        if out.result.reward != 1.0:
            return {"skipped": f"podman trial failed: {out.error_message}"[:500]}
        runs.append(out)
    cli = []
    for i in range(N_PODMAN):
        t0 = time.perf_counter()
        p = subprocess.run(
            [
                f"{bindir}/harbor",
                "run",
                "-p",
                str(ptask),
                "-a",
                "oracle",
                "-e",
                "podman",
                "-o",
                str(tmp_path / "jobs" / str(i)),
                "-y",
                "-q",
                "--no-delete",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        cli.append(time.perf_counter() - t0)
        assert p.returncode == 0, p.stderr[-2000:]
    return {
        "n_trials": len(runs),
        "median_total_s": _median([o.timings["total"] for o in runs]),
        "median_overhead_s": _median([_overhead(o) for o in runs]),
        "median_environment_setup_s": _median(
            [o.timings.get("environment_setup", 0) for o in runs]
        ),
        "median_verifier_s": _median([o.timings.get("verifier", 0) for o in runs]),
        "harbor_cli_n": len(cli),
        "harbor_cli_median_s": _median(cli),
        "peer": "Harbor's podman environment (podman-compose) on the world's OCI image, "
        "same task, same run; harbor_cli = `harbor run -a oracle -e podman` end to end",
    }


N_THROUGHPUT = 48  # trials per (mode, concurrency) per round: at 24 a run at 8 lasted 1.5 s,
# too short for a rate (the first wave waits on 6 cold slots, the last runs half empty)
CGROUP = Path("/sys/fs/cgroup/cpuacct")


class _TreeCpu:
    """CPU seconds of this process and everything it starts (a cpuacct cgroup of its
    own, cgroup v1); `None` where no such cgroup can be made."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        d = CGROUP / f"apexrl-bench-{os.getpid()}"
        try:
            d.mkdir(exist_ok=True)
            (d / "cgroup.procs").write_text(str(os.getpid()))
            self.dir = d
        except OSError:
            self.dir = None

    def seconds(self) -> float | None:
        if self.dir is None:
            return None
        return int((self.dir / "cpuacct.usage").read_text()) / 1e9

    def close(self) -> None:
        if self.dir is None:
            return
        try:
            (CGROUP / "cgroup.procs").write_text(str(os.getpid()))
            for _ in range(50):  # children that are still exiting keep it busy a moment
                try:
                    self.dir.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        except OSError:
            pass


def _tasks(root: Path, n: int) -> tuple[Path, Path]:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    write_example(root / "ex", seed=0)
    list(convert_all(load_source(root / "ex"), root / "converted", {}, strict=True))
    templates = sorted((root / "converted").iterdir())
    tree = root / "tasks"
    tree.mkdir()
    for i in range(n):
        src = templates[i % len(templates)]
        shutil.copytree(src, tree / f"{src.name}-{i:03d}")
    return tree, root / "ex" / "world_files_zipped"


WORLD_FILES = 166  # the published dataset's files per world (docs/facts.md section 2: ~166)


def _pad_worlds(worlds: Path, files: int = WORLD_FILES) -> int:
    """Grow each example world (~30 files) to `files` files with small text files under
    filesystem/Archive/, so that the per-file work of a trial (the world copy, its
    walks, the diff, the removal) is what a published world costs. Returns the count."""
    import zipfile

    for z in sorted(worlds.glob("*.zip")):
        with zipfile.ZipFile(z, "a") as zf:
            have = sum(1 for i in zf.infolist() if not i.is_dir())
            for i in range(files - have):
                body = (f"archived note {i}: figures as of the last review\n" * 40).encode()
                zf.writestr(f"filesystem/Archive/{i // 20:02d}/note_{i:03d}.txt", body)
    return files


def _scratch_kind(choice: str) -> str:
    from apexrl.envs.local import scratch

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("APEXRL_LOCAL_WORKDIR", raising=False)
        mp.setenv("APEXRL_LOCAL_SCRATCH", choice)
        return scratch.choose().kind


def _bench_work_dir(tmp_path: Path, mode: str, choice: str) -> Path:
    """The mode's own trial-folder parent, where `choice` puts trial folders (RAM or disk)."""
    kind = _scratch_kind(choice)
    if kind == "ram":
        from apexrl.envs.local import scratch

        return scratch.RAM_ROOT / f"apexrl-bench-{os.getpid()}-{mode}"
    return tmp_path / f"work-{mode}"


@pytest.mark.timeout(2400)
def test_bench_local_throughput(tmp_path, monkeypatch):
    from apexrl.envs.local import environment as local
    from apexrl.envs.local import warm
    from apexrl.eval.runner import EvalRequest, run_eval
    from apexrl.trial import task_memo

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(tmp_path / "cache"))
    load_at_start = load_average()
    tasks, worlds = _tasks(tmp_path / "data", N_THROUGHPUT)
    world_files = _pad_worlds(worlds)
    # mode -> (APEXRL_LOCAL_FORKSERVER, APEXRL_LOCAL_SCRATCH, APEXRL_TASK_MEMO)
    modes = {
        "forkserver": ("1", "auto", "1"),
        "forkserver_disk": ("1", "disk", "1"),
        "fresh_gateway": ("0", "disk", "0"),
    }
    work_dirs = {m: _bench_work_dir(tmp_path, m, sc) for m, (_, sc, _) in modes.items()}
    cpu = _TreeCpu()
    counter = iter(range(10_000))

    def run(mode: str, concurrency: int, limit: int) -> tuple[float, float | None]:
        monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", modes[mode][0])
        monkeypatch.setenv("APEXRL_TASK_MEMO", modes[mode][2])
        monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(work_dirs[mode]))
        req = EvalRequest(
            tasks=str(tasks),
            run_dir=tmp_path / f"run-{next(counter)}",
            agent="oracle",
            worlds_dir=worlds,
            concurrency=concurrency,
            limit=limit,
        )
        c0, t0 = cpu.seconds(), time.perf_counter()
        report, _ = run_eval(req)
        wall = time.perf_counter() - t0
        assert report.ran == limit and report.summary.pass_at_1.value == 1.0
        # Untimed: the peer's warm pool refills in the background after a run (a fresh
        # Python per slot, ~2 CPU-s of imports each, still running after the slot is in
        # the pool); let the machine go quiet so that this CPU does not land in the next
        # run's wall time, whichever mode that is. Its CPU counts for this run.
        assert local.POOL.wait_filled(120), "warm pool still filling after 120 s"
        wait_quiet()
        c1 = cpu.seconds()
        return wall, (c1 - c0) / limit if c0 is not None and c1 is not None else None

    try:
        for mode in modes:  # the first trials of a mode start its fork server / warm pool
            run(mode, 1, 2)
        # One pass over tasks never run before (every Harbor task load and hash a miss),
        # as the first attempt of each task in a run is; the rounds below are later
        # attempts of the same tasks (eval -k, training epochs), which the memo serves.
        task_memo.clear()
        first_pass, _ = run("forkserver", 8, N_THROUGHPUT)
        walls: dict[str, list[float]] = {}
        cpus: dict[str, list[float]] = {}
        for r in range(RUNS):  # the order alternates per round (see results.interleaved)
            for mode in list(modes) if r % 2 == 0 else list(modes)[::-1]:
                for c in (1, 8) if r % 2 == 0 else (8, 1):
                    w, per = run(mode, c, N_THROUGHPUT)
                    walls.setdefault(f"{mode}_c{c}", []).append(w)
                    if per is not None:
                        cpus.setdefault(mode, []).append(per)
    finally:
        local.POOL.drain()
        warm.close_all()
        cpu.close()
        for d in work_dirs.values():
            shutil.rmtree(d, ignore_errors=True)

    def per_min(key: str) -> float:
        return round(N_THROUGHPUT * 60 / statistics.median(walls[key]), 1)

    figures: dict = {
        "command": "make bench (tests/benchmarks/test_bench_trial.py::test_bench_local_throughput)",
        "n_trials_per_run": N_THROUGHPUT,
        "world_files": world_files,
        "rounds": RUNS,
        "agent": "oracle (solution/solve.sh in the sandbox), example tasks, eval run's runner",
    }
    for mode in modes:
        figures[mode] = {
            "concurrency_1_trials_per_min": per_min(f"{mode}_c1"),
            "concurrency_8_trials_per_min": per_min(f"{mode}_c8"),
            "concurrency_1_wall": stats(walls[f"{mode}_c1"]),
            "concurrency_8_wall": stats(walls[f"{mode}_c8"]),
            # trial rate at 8 over the rate at 1 (per-round wall ratio c1 / c8)
            "concurrency_8_vs_1": ratio(walls[f"{mode}_c1"], walls[f"{mode}_c8"]),
        }
        if cpus.get(mode):
            figures[mode]["cpu_s_per_trial_median"] = round(statistics.median(cpus[mode]), 3)
    # trials/min of ours over the peer's, same rounds (peer wall / our wall)
    figures["forkserver_vs_fresh_gateway_concurrency_8"] = ratio(
        walls["fresh_gateway_c8"], walls["forkserver_c8"]
    )
    figures["forkserver_vs_fresh_gateway_concurrency_1"] = ratio(
        walls["fresh_gateway_c1"], walls["forkserver_c1"]
    )
    figures["forkserver_vs_forkserver_disk_concurrency_8"] = ratio(
        walls["forkserver_disk_c8"], walls["forkserver_c8"]
    )
    figures["forkserver_first_pass_concurrency_8_trials_per_min"] = round(
        N_THROUGHPUT * 60 / first_pass, 1
    )
    figures["scratch_kind"] = {m: _scratch_kind(sc) for m, (_, sc, _) in modes.items()}
    figures["task_memo"] = {m: memo == "1" for m, (_, _, memo) in modes.items()}
    figures["peer"] = (
        "fresh_gateway: APEXRL_LOCAL_FORKSERVER=0, a fresh bubblewrap sandbox and Python per "
        "trial's gateway (warm pool of 2), trial folders on disk, Harbor's task load and "
        "hashes every trial (APEXRL_TASK_MEMO=0): the path before issue 20; "
        "forkserver_disk: ours with APEXRL_LOCAL_SCRATCH=disk; same tasks, same rounds"
    )
    figures["target"] = (
        "forkserver >= 5x fresh_gateway trials/min at concurrency 8; forkserver concurrency 8 "
        ">= 1.8x its concurrency 1"
    )
    record("local_throughput", figures, load_at_start=load_at_start)
    print(figures)
