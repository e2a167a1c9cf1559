"""What blocks the event loop of the rollouts benchmark (tests/benchmarks/rollouts.py).

Runs N simulated trials in this process's event loop (the goal shape by default) and
prints the benchmark's figures plus what they do not show: the cyclic GC's pauses per
generation (gc.callbacks: wall and CPU), the CPU of every thread (/proc: the loop thread
against the tokenize threads), the 40 worst lag samples, and (CENSUS=<s>) the heap's
objects by type at that second of the run. No hooks on the loop itself: the figures are
those of the benchmark's code path.

  python -m tests.benchmarks.rollouts_profile      (N=550 TURNS=25 SCALE=4 by default)

Settings under test come from the environment as in production (APEXRL_ROLLOUT_GC,
APEXRL_ROLLOUT_TOKENIZE_THREADS, APEXRL_ROLLOUT_TOKENIZE_NICE). Run it under the shared
benchmark lock: it takes both cores for minutes.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import os
import threading
import time
from pathlib import Path

from tests.benchmarks import rollouts as R

N = int(os.environ.get("N", "550"))
TURNS = int(os.environ.get("TURNS", "25"))
SCALE = float(os.environ.get("SCALE", "4"))
CENSUS = float(os.environ.get("CENSUS", "0"))


def main() -> None:
    shape = R.Shape(
        turns=TURNS,
        obs_tokens=(3500, 4500),
        completion_tokens=(150, 600),
        latency_s=(1 * SCALE, 2 * SCALE),
    )
    pauses: list[tuple[int, float, float, int]] = []  # generation, wall ms, cpu ms, collected
    start: dict[str, float] = {}

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            start["t"], start["c"] = time.perf_counter(), time.thread_time()
        else:
            wall = (time.perf_counter() - start["t"]) * 1000
            pauses.append(
                (
                    info["generation"],
                    wall,
                    (time.thread_time() - start["c"]) * 1000,
                    info["collected"],
                )
            )

    gc.callbacks.append(on_gc)
    threads: dict[tuple[str, str], float] = {}
    stop = threading.Event()

    def thread_cpu() -> None:  # the executor's threads are gone by the end: sample them
        tick = os.sysconf("SC_CLK_TCK")
        while not stop.wait(1.0):
            for t in os.listdir("/proc/self/task"):
                try:
                    task = Path("/proc/self/task") / t
                    stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
                    name = (task / "comm").read_text().strip()
                except OSError:
                    continue
                threads[(t, name)] = (int(stat[11]) + int(stat[12])) / tick

    census: dict = {}

    async def drive(url: str) -> R.DriverStats:
        async def take_census() -> None:
            await asyncio.sleep(CENSUS)
            objs = gc.get_objects()
            census["objects"] = len(objs)
            census["top"] = collections.Counter(type(o).__qualname__ for o in objs).most_common(20)

        side = asyncio.get_running_loop().create_task(take_census()) if CENSUS else None
        st = await R.drive(list(range(N)), url, shape)
        if side is not None:
            side.cancel()
        return st

    threading.Thread(target=thread_cpu, daemon=True).start()
    with R.BenchEngine(shape) as engine:
        load_start = os.getloadavg()
        st = asyncio.run(drive(engine.url))
    stop.set()
    res = R.summarize([st], N, st.wall_s)
    keys = ("wall_s", "steps_per_s", "cpu_s", "cpu_ms_per_step", "rss_peak_mb", "lag_ms")
    print(json.dumps({k: res[k] for k in keys}))
    print("worst lag ms", [round(x) for x in sorted(st.lag_ms)[-40:]])
    print(
        "load start",
        [round(x, 2) for x in load_start],
        "end",
        [round(x, 2) for x in os.getloadavg()],
    )
    for (tid, name), cpu in sorted(threads.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  thread {tid} {name}: {cpu:.1f} s CPU")
    for g in (0, 1, 2):
        x = [p for p in pauses if p[0] == g]
        if x:
            print(
                f"gc gen{g}: n={len(x)} wall_ms_sum={sum(p[1] for p in x):.0f} "
                f"cpu_ms_sum={sum(p[2] for p in x):.0f} max_wall_ms={max(p[1] for p in x):.0f} "
                f"collected={sum(p[3] for p in x)}"
            )
    print("gen2 pauses (wall ms, collected):", [(round(p[1]), p[3]) for p in pauses if p[0] == 2])
    if census:
        print("census", census)


if __name__ == "__main__":
    main()
