"""Shared writer for bench/results.json: each benchmark merges its own key.

Figures are the median of RUNS runs with min and max beside it, and every entry
carries the load average (1/5/15 min) when it started and when it was recorded, so
a run disturbed by other work on the machine is visible in the file itself.
Ratios against a peer come from interleaved rounds (ours then the peer's, the
order reversed every other round): the median ratio is median(ours) /
median(peer); min/max are those of the per-round ratios, which share the same
moment's load.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results.json"
RUNS = int(os.environ.get("APEXRL_BENCH_RUNS", "3"))


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpus": os.cpu_count(),
    }


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (runnable processes; compare with cpus)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        return []


def record(key: str, data: dict, *, load_at_start: list[float] | None = None) -> None:
    """Merge `data` under `key` (read-modify-write, then atomic rename)."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    load = {"at_end_1_5_15": load_average()}
    if load_at_start is not None:
        load["at_start_1_5_15"] = load_at_start
    current[key] = {
        **data,
        "load_average": load,
        "machine": machine(),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def runs(n: int, fn: Callable[[], object]) -> list[float]:
    """Wall times of n runs of fn."""
    return [timed(fn) for _ in range(n)]


def interleaved(
    n: int,
    fns: dict[str, Callable[[], object]],
    *,
    before: Callable[[], object] | None = None,
) -> dict[str, list[float]]:
    """n rounds; each round runs every fn once, the order reversed every other round
    (A B, B A, A B, ...) so that a machine or disk that slows down over the rounds does
    not always fall on the same contender. Wall times per name, in round order.
    `before` runs ahead of every timed call, untimed (clean up, flush the disk), so
    neither contender pays for the other's leftovers."""
    out: dict[str, list[float]] = {name: [] for name in fns}
    items = list(fns.items())
    for i in range(n):
        for name, fn in items if i % 2 == 0 else items[::-1]:
            if before is not None:
                before()
            out[name].append(timed(fn))
    return out


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine so far, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def wait_quiet(busy_share: float = 0.15, window_s: float = 0.5, timeout_s: float = 60.0) -> None:
    """Wait until the machine's CPUs are mostly idle over a window (background work of the
    previous run done); give up quietly after `timeout_s` (the figures keep the load)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        b0, t0 = _busy_jiffies()
        time.sleep(window_s)
        b1, t1 = _busy_jiffies()
        if t1 > t0 and (b1 - b0) / (t1 - t0) < busy_share:
            return


def stats(times: list[float], digits: int = 3) -> dict:
    """Median, min, max and every run (seconds)."""
    return {
        "median_s": round(statistics.median(times), digits),
        "min_s": round(min(times), digits),
        "max_s": round(max(times), digits),
        "runs_s": [round(t, digits) for t in times],
    }


def ratio(ours: list[float], peer: list[float]) -> dict:
    """median(ours)/median(peer), with the min and max of the per-round ratios."""
    per_round = [a / b for a, b in zip(ours, peer, strict=True)]
    return {
        "median": round(statistics.median(ours) / statistics.median(peer), 3),
        "min": round(min(per_round), 3),
        "max": round(max(per_round), 3),
    }


def median_of(n: int, fn: Callable[[], object]) -> float:
    """Median wall time of n runs."""
    return statistics.median(runs(n, fn))


def best_of(n: int, fn) -> float:
    """Best wall time of n runs (least disturbed by other load on the machine)."""
    return min(runs(n, fn))
