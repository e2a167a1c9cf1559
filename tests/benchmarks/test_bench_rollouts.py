"""Benchmark: N concurrent simulated trials through the real agent loop and TITO state.

See tests/benchmarks/rollouts.py for what is real and what is a double (the engine
and the world are benchmark-only doubles; the agent loop, TITO session, tokenizer,
template, engine client and records are apexrl's own).

  rollouts_scale  N = 50, 150, 550 trials at a scaled-down shape (8 turns, 2-4k tokens
                  per observation, 1-2 s per engine call: ~28k tokens per trial), in one
                  event loop: driver RSS per trial, event-loop lag p50/p99, CPU per
                  agent step, steps/s, and how each grows with N (ratio to N=50).
  rollouts_goal   the goal case: 550 concurrent trials at ~100k tokens each (25 turns,
                  3.5-4.5k tokens per observation; engine calls stretched x4 in time),
                  in one event loop (default) and/or sharded over worker processes
                  (apexrl.trial.shards; APEXRL_BENCH_ROLLOUTS_GOAL_MODES=0,2).
                  Targets: <= 4 GB driver RSS, lag p99 < 250 ms on this 2-core machine.

Environment: APEXRL_BENCH_ROLLOUTS_N ("50,150,550"), APEXRL_BENCH_ROLLOUTS_GOAL
("1"; "0" skips the goal case), APEXRL_BENCH_ROLLOUTS_SHARDS ("2"),
APEXRL_BENCH_ROLLOUTS_LABEL (suffix of the result keys, e.g. "_before"),
APEXRL_BENCH_ROLLOUTS_TIME_SCALE ("4": the goal case's 1-2 s engine calls take 4-8 s),
APEXRL_BENCH_ROLLOUTS_GOAL_MODES ("0": in one event loop; "0,2": also over 2 shards).
Every run is its own (spawned) driver process.
"""

from __future__ import annotations

import os

import pytest

from tests.benchmarks.results import load_average, record
from tests.benchmarks.rollouts import Shape, run_isolated

NS = [int(x) for x in os.environ.get("APEXRL_BENCH_ROLLOUTS_N", "50,150,550").split(",") if x]
GOAL = os.environ.get("APEXRL_BENCH_ROLLOUTS_GOAL", "1") != "0"
SHARDS = int(os.environ.get("APEXRL_BENCH_ROLLOUTS_SHARDS", "2"))
LABEL = os.environ.get("APEXRL_BENCH_ROLLOUTS_LABEL", "")
# which goal runs: "0" in one event loop (the default: a bounded `make bench`), "<k>"
# sharded over k processes; each takes ~3-10 min on 2 cores depending on their load
GOAL_MODES = os.environ.get("APEXRL_BENCH_ROLLOUTS_GOAL_MODES", "0").split(",")

CURVE = Shape(turns=8, obs_tokens=(2000, 4000), completion_tokens=(150, 600), latency_s=(1, 2))
# 1-2 s per engine call, stretched in time so that 550 trials offer what two shared cores
# can drive (550 / 6 s ~ 92 steps/s); the lag target is about responsiveness, not queueing
TIME_SCALE = float(os.environ.get("APEXRL_BENCH_ROLLOUTS_TIME_SCALE", "4"))
GOAL_SHAPE = Shape(
    turns=25,
    obs_tokens=(3500, 4500),
    completion_tokens=(150, 600),
    latency_s=(1 * TIME_SCALE, 2 * TIME_SCALE),
)
TARGETS = {"rss_peak_mb_max": 4096, "lag_p99_ms_max": 250}
COMMAND = "pytest -q -s tests/benchmarks/test_bench_rollouts.py"


def _growth(curve: list[dict]) -> dict:
    base = curve[0]

    def r(a: float, b: float) -> float | None:
        return round(a / b, 2) if b else None

    return {
        f"N{c['trials']}_over_N{base['trials']}": {
            "trials": r(c["trials"], base["trials"]),
            "rss_per_trial": r(c["rss_per_trial_mb"], base["rss_per_trial_mb"]),
            "rss_peak": r(c["rss_peak_mb"], base["rss_peak_mb"]),
            "lag_p50": r(c["lag_ms"]["p50"], base["lag_ms"]["p50"]),
            "lag_p99": r(c["lag_ms"]["p99"], base["lag_ms"]["p99"]),
            "cpu_per_step": r(c["cpu_ms_per_step"], base["cpu_ms_per_step"]),
            "steps_per_s": r(c["steps_per_s"], base["steps_per_s"]),
        }
        for c in curve[1:]
    }


@pytest.mark.timeout(3600)
def test_bench_rollouts_scale():
    load_at_start = load_average()
    curve = []
    for n in NS:
        res = run_isolated(n, CURVE)  # each N in a fresh driver process
        assert res["statuses"] == {"complete": n}, res["statuses"]
        curve.append(res)
        _record_curve(curve, load_at_start)


def _record_curve(curve: list[dict], load_at_start: list[float]) -> None:
    """Written after every N: a long run that is stopped keeps what it measured."""
    record(
        f"rollouts_scale{LABEL}",
        {
            "command": COMMAND + "::test_bench_rollouts_scale",
            "what": "N concurrent simulated trials, one event loop: real AgentLoop + TITO + "
            "EngineClient + records; engine and world are benchmark doubles",
            "curve": curve,
            "growth_vs_smallest_n": _growth(curve),
            "offered_steps_per_s": {
                str(c["trials"]): round(c["trials"] / (sum(CURVE.latency_s) / 2), 1) for c in curve
            },
        },
        load_at_start=load_at_start,
    )


@pytest.mark.skipif(not GOAL, reason="APEXRL_BENCH_ROLLOUTS_GOAL=0")
@pytest.mark.timeout(3600)
def test_bench_rollouts_goal():
    runs = {}
    for shards in sorted({0, SHARDS}):  # in one event loop, then sharded
        if str(shards) not in GOAL_MODES:
            continue
        load_at_start = load_average()
        res = run_isolated(550, GOAL_SHAPE, shards=shards)  # a fresh driver process each
        assert res["statuses"] == {"complete": 550}, res["statuses"]
        res["meets_targets"] = (
            res["rss_peak_mb"] <= TARGETS["rss_peak_mb_max"]
            and res["lag_ms"]["p99"] < TARGETS["lag_p99_ms_max"]
        )
        res["load_average_at_start_1_5_15"] = load_at_start
        res["load_average_at_end_1_5_15"] = load_average()
        runs["in_process" if shards == 0 else f"shards_{shards}"] = res
        _record_goal(runs)


def _record_goal(runs: dict) -> None:
    """Merged into what is there (a run of one mode keeps the other's figures)."""
    import json

    from tests.benchmarks.results import RESULTS

    old = (
        json.loads(RESULTS.read_text()).get(f"rollouts_goal{LABEL}", {})
        if RESULTS.is_file()
        else {}
    )
    runs = {**old.get("runs", {}), **runs}
    record(
        f"rollouts_goal{LABEL}",
        {
            "command": COMMAND + "::test_bench_rollouts_goal",
            "what": "550 concurrent simulated trials at ~100k tokens each (25 turns); "
            "rss_peak_mb is the driver's (with shards: every worker's peak plus the parent's)",
            "offered_steps_per_s": round(550 / (sum(GOAL_SHAPE.latency_s) / 2), 1),
            "runs": runs,
            "targets": TARGETS,
        },
    )
