"""`eval run --ray-address` throughput on a real multi-node Ray cluster on this machine
(issue 34), written to bench/results.json key "ray_cluster".

A head with no CPUs and worker nodes of one CPU each, each its own raylet
(tests/raycluster.py). The same N real oracle trials (Harbor, the local environment,
apexrl grading) run with one worker node, then with two: trials per minute each, and
their ratio. Two nodes of one CPU on a machine of two shared cores should give less
than 2x (the driver, the head and the other node's raylet share those cores). Beside
them: the object store's cost per trial (bytes the driver put, over trials) and the
same trials on this machine without Ray (threads, -n 1 and -n 2) as the peer.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from apexrl.eval.runner import EvalRequest, run_eval
from tests.benchmarks.results import load_average, record
from tests.raycluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]
LIMIT, ATTEMPTS = 4, 2  # 8 trials a measurement


def _run(
    data: Path, name: str, limit: int = LIMIT, attempts: int = ATTEMPTS, **kw
) -> tuple[float, int, list[str]]:
    infos: list[str] = []
    req = EvalRequest(
        tasks=str(data / "tasks"),
        run_dir=data / name,
        agent="oracle",
        worlds_dir=data / "worlds",
        limit=limit,
        attempts=attempts,
        **kw,
    )
    t0 = time.perf_counter()
    report, _ = run_eval(req, on_info=infos.append)
    wall = time.perf_counter() - t0
    assert report.ran == limit * attempts and report.summary.pass_at_1.value == 1.0
    return wall, report.ran, infos


def _put_bytes(infos: list[str]) -> int:
    for line in infos:
        m = re.search(r"(\d+) bytes put in the object store", line)
        if m:
            return int(m.group(1))
    raise AssertionError(infos)


def test_bench_ray_cluster(tmp_path):
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    expert, data = tmp_path / "expert", tmp_path / "data"
    write_example(expert, seed=0)
    list(convert_all(load_source(expert), data / "tasks", {}, strict=True))
    shutil.copytree(expert / "world_files_zipped", data / "worlds")
    load0 = load_average()
    figures: dict = {}
    c = Cluster(tmp_path / "cluster")
    try:
        c.start_head()
        c.start_worker("a")
        # the nodes' workers import apexrl and Harbor once, before any measurement
        _run(data, "warm", 1, 1, ray_address=c.address)
        wall1, n, infos1 = _run(data, "one", ray_address=c.address)
        c.start_worker("b")
        _run(data, "warm-b", 2, 1, ray_address=c.address)
        wall2, _, infos2 = _run(data, "two", ray_address=c.address)
    finally:
        c.stop()
    local1, _, _ = _run(data, "local1", concurrency=1)
    local2, _, _ = _run(data, "local2", concurrency=2)
    per_min = {k: round(60 * n / w, 2) for k, w in (("one", wall1), ("two", wall2))}
    put = _put_bytes(infos2)
    figures = {
        "trials": n,
        "trials_per_min_one_node": per_min["one"],
        "trials_per_min_two_nodes": per_min["two"],
        "two_over_one": round(per_min["two"] / per_min["one"], 3),
        "object_store_bytes_per_trial": round(put / n),
        "object_store_bytes_run": put,
        "in_flight": {"one": infos1[0], "two": infos2[0]},
        "peer_local_threads_trials_per_min": {
            "n1": round(60 * n / local1, 2),
            "n2": round(60 * n / local2, 2),
        },
        "wall_s": {"one": round(wall1, 2), "two": round(wall2, 2)},
        "command": "pytest -q -s tests/benchmarks/test_bench_ray.py",
        "note": "nodes of 1 CPU each on a 2-core machine shared with the driver and head; "
        "each measurement after a warm-up run on the same nodes",
    }
    print(figures)
    record("ray_cluster", figures, load_at_start=load0)
