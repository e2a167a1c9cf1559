"""The rollouts-at-scale benchmark's wiring at small N (no timing assertions), and the
sharding option: trials sharded over worker processes write the same records as
trials in one event loop."""

from __future__ import annotations

import json
from pathlib import Path

from tests.benchmarks.rollouts import Shape, run_scale

SHAPE = Shape(turns=4, obs_tokens=(300, 600), completion_tokens=(40, 120), latency_s=(0.05, 0.1))
TIMING = {"llm_s", "tools_s", "duration_s", "tokenize_s", "gateway_ready_s"}


def _records(d: Path) -> dict[str, tuple[str, dict]]:
    out = {}
    for t in sorted(d.iterdir()):
        rec = json.loads((t / "apexrl_agent.json").read_text())
        for k in TIMING:
            rec.pop(k, None)
        for s in rec["step_records"]:
            for k in TIMING:
                s.pop(k, None)
        for c in rec["tool_call_records"]:
            c.pop("duration_s", None)
        out[t.name] = ((t / "tito.json").read_text(), rec)
    return out


def test_bench_wiring_and_sharded_records_match(tmp_path):
    inproc = run_scale(6, SHAPE, out_dir=str(tmp_path / "inproc"))
    sharded = run_scale(6, SHAPE, shards=2, out_dir=str(tmp_path / "sharded"))
    for res, procs in ((inproc, 1), (sharded, 2)):
        assert res["statuses"] == {"complete": 6}
        assert res["processes"] == procs
        assert res["steps"] == 6 * SHAPE.turns
        assert res["rss_peak_mb"] > 0 and res["cpu_ms_per_step"] > 0
        assert res["lag_ms"]["samples"] > 0 and res["steps_per_s"] > 0
    a, b = _records(tmp_path / "inproc"), _records(tmp_path / "sharded")
    assert sorted(a) == [f"trial-{i:05d}" for i in range(6)]
    assert a == b
    traj = json.loads(a["trial-00000"][0])
    n = len(traj["prompt_ids"]) + sum(len(t["token_ids"]) for t in traj["turns"])
    assert traj["extra"]["mask"].count(1) == sum(
        len(t["token_ids"]) for t in traj["turns"] if t["kind"] == "sampled"
    )
    assert len(traj["extra"]["mask"]) == n > 6 * SHAPE.turns
    # the trials differ from each other (the records are per trial, not one copy)
    assert a["trial-00000"][0] != a["trial-00001"][0]
