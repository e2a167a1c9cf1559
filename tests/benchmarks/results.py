"""Shared writer for bench/results.json: each benchmark merges its own key."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results.json"


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system": platform.system(),
        "cpus": os.cpu_count(),
    }


def record(key: str, data: dict) -> None:
    """Merge `data` under `key` (read-modify-write, then atomic rename)."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    current[key] = {
        **data,
        "machine": machine(),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)


def best_of(n: int, fn) -> float:
    """Best wall time of n runs (least disturbed by other load on the machine)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
