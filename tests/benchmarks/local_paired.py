"""A short paired probe of local trial throughput, for comparing two checkouts on a busy
machine where `test_bench_local_throughput` (which waits for the machine to go quiet)
cannot finish: oracle trials of the bench's padded tasks, fork server, RAM scratch, task
memo, at concurrency 8 (48 trials) and 1 (16 trials), ROUNDS times, no quiet wait.

    python -m tests.benchmarks.local_paired OUT.json ROUNDS    # from a checkout's root

Run it in each checkout in turn (A B A B) and compare medians; absolute figures under
load say little. Where the cgroup v1 `cpuacct` hierarchy is writable (root), the probe also
moves itself into a cgroup of its own and records the CPU seconds per trial that it and
every process it started (fork server, gateways, sandboxed commands) used: a figure that
other work on the machine barely moves, unlike wall time.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class CpuMeter:
    """CPU time of this process and all its descendants, from a cpuacct cgroup of its own."""

    def __init__(self) -> None:
        self.group = CPUACCT / f"apexrl-paired-{os.getpid()}"
        self.group.mkdir()
        (self.group / "cgroup.procs").write_text(str(os.getpid()))

    def read(self) -> dict[str, float]:
        user = int((self.group / "cpuacct.usage_user").read_text())
        sys_ = int((self.group / "cpuacct.usage_sys").read_text())
        # the whole machine too: kernel work done outside the group (namespace and mount
        # teardown in kernel threads) shows only there; meaningful on a quiet machine
        busy = _machine_busy_s()
        return {"user": user / 1e9, "sys": sys_ / 1e9, "machine": busy}

    def close(self) -> None:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        self.group.rmdir()  # fails while a descendant still lives in it: then it stays


def _machine_busy_s() -> float:
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _cpu_meter() -> CpuMeter | None:
    try:
        return CpuMeter()
    except OSError:
        return None


def main(out: str, rounds: int) -> dict:
    os.environ["HARBOR_TELEMETRY"] = "0"
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from apexrl.envs.local import environment as local
    from apexrl.envs.local import scratch, warm
    from apexrl.eval.runner import EvalRequest, run_eval
    from tests.benchmarks.test_bench_trial import _pad_worlds, _tasks

    tmp = Path(tempfile.mkdtemp(prefix="apexrl-paired-"))
    os.environ["APEXRL_WORLD_CACHE"] = str(tmp / "cache")
    tasks, worlds = _tasks(tmp / "data", 48)
    _pad_worlds(worlds)
    os.environ["APEXRL_LOCAL_FORKSERVER"] = "1"
    os.environ["APEXRL_TASK_MEMO"] = "1"
    work = scratch.RAM_ROOT / f"apexrl-paired-{os.getpid()}"
    os.environ["APEXRL_LOCAL_WORKDIR"] = str(work)
    runs = iter(range(10_000))
    meter = _cpu_meter()
    cpu: dict[str, list[dict[str, float]]] = {"c8": [], "c1": []}

    def run(concurrency: int, limit: int) -> float:
        req = EvalRequest(
            tasks=str(tasks),
            run_dir=tmp / f"run-{next(runs)}",
            agent="oracle",
            worlds_dir=worlds,
            concurrency=concurrency,
            limit=limit,
        )
        c0 = meter.read() if meter else None
        t0 = time.perf_counter()
        report, _ = run_eval(req)
        wall = time.perf_counter() - t0
        assert report.ran == limit and report.summary.pass_at_1.value == 1.0
        local.POOL.wait_filled(120)  # the pool's refill belongs to the trials that drained it
        if meter and c0:
            c1 = meter.read()
            per = {k: (c1[k] - c0[k]) / limit for k in c1}
            cpu[f"c{concurrency}"].append(per)
        return wall

    try:
        run(1, 2)
        run(8, 48)  # fork server, warm pool and memo warmed
        walls: dict[str, list[float]] = {"c8": [], "c1": []}
        for _ in range(rounds):
            walls["c8"].append(run(8, 48))
            walls["c1"].append(run(1, 16))
    finally:
        local.POOL.drain()
        warm.close_all()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        if meter:
            meter.close()
    res = {
        "concurrency_8_trials_per_min": round(48 * 60 / statistics.median(walls["c8"]), 1),
        "concurrency_1_trials_per_min": round(16 * 60 / statistics.median(walls["c1"]), 1),
        "walls_s": {k: [round(w, 2) for w in v] for k, v in walls.items()},
        "load_average_at_end": list(os.getloadavg()),
    }
    if meter:
        res["cpu_s_per_trial"] = {
            k: {
                part: round(statistics.median(r[part] for r in rows), 4) for part in ("user", "sys")
            }
            for k, rows in cpu.items()
            if rows
        }
    Path(out).write_text(json.dumps(res))
    return res


if __name__ == "__main__":
    print(main(sys.argv[1], int(sys.argv[2])))
