"""A short paired probe of local trial throughput, for comparing two checkouts on a busy
machine where `test_bench_local_throughput` (which waits for the machine to go quiet)
cannot finish: oracle trials of the bench's padded tasks, fork server, RAM scratch, task
memo, at concurrency 8 (48 trials) and 1 (16 trials), ROUNDS times, no quiet wait.

    python -m tests.benchmarks.local_paired OUT.json ROUNDS    # from a checkout's root

Run it in each checkout in turn (A B A B) and compare medians; absolute figures under
load say little.
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


def main(out: str, rounds: int) -> dict:
    os.environ["HARBOR_TELEMETRY"] = "0"
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from apexrl.envs import local, scratch, warm
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

    def run(concurrency: int, limit: int) -> float:
        req = EvalRequest(
            tasks=str(tasks),
            run_dir=tmp / f"run-{next(runs)}",
            agent="oracle",
            worlds_dir=worlds,
            concurrency=concurrency,
            limit=limit,
        )
        t0 = time.perf_counter()
        report, _ = run_eval(req)
        wall = time.perf_counter() - t0
        assert report.ran == limit and report.summary.pass_at_1.value == 1.0
        local.POOL.wait_filled(120)
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
    res = {
        "concurrency_8_trials_per_min": round(48 * 60 / statistics.median(walls["c8"]), 1),
        "concurrency_1_trials_per_min": round(16 * 60 / statistics.median(walls["c1"]), 1),
        "walls_s": {k: [round(w, 2) for w in v] for k, v in walls.items()},
        "load_average_at_end": list(os.getloadavg()),
    }
    Path(out).write_text(json.dumps(res))
    return res


if __name__ == "__main__":
    print(main(sys.argv[1], int(sys.argv[2])))
