"""Parity with archipelago: `world verify` on the example worlds and on a world in the
published shape; cases and identical ones, by server, into bench/results.json
(`peer_parity`). Not a timed test; the figure is a measurement, never asserted.
The figure it replaces stays beside it under `_before` (cases, identical, by server,
when recorded), so one entry shows before/after; an existing `_before` is carried over
(the baseline is the figure before the parity work, not the previous rerun)."""

from __future__ import annotations

import json
import time

import pytest

from tests.benchmarks.results import RESULTS, load_average, record

pytestmark = [pytest.mark.peer, pytest.mark.integration, pytest.mark.timeout(3600)]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    from apexrl.tasks.example import write_example
    from tests.published_shape import build

    out = tmp_path_factory.mktemp("example")
    write_example(out, seed=0)
    found = [("example", z) for z in sorted((out / "world_files_zipped").glob("*.zip"))]
    pub = tmp_path_factory.mktemp("published")
    build(pub, bad=False)
    found += [("published_shape", sorted((pub / "world_files_zipped").glob("*.zip"))[0])]
    return found


def test_bench_peer_parity(worlds):
    from apexrl.peer.runtime import find_checkout, runtimes
    from apexrl.peer.verify import verify

    load0 = load_average()
    checkout = find_checkout()
    t0 = time.monotonic()
    rts = runtimes(checkout)
    build_s = time.monotonic() - t0
    by_server: dict[str, dict[str, int]] = {}
    per_world = []
    diffs: list[dict] = []
    t1 = time.monotonic()
    for kind, zpath in worlds:
        recs = []
        s = verify(zpath, rts, emit=recs.append)
        per_world.append(
            {"world": zpath.stem, "kind": kind, "cases": s.cases, "identical": s.identical}
        )
        for srv in s.servers:
            agg = by_server.setdefault(srv.server, {"cases": 0, "identical": 0})
            agg["cases"] += srv.cases
            agg["identical"] += srv.identical
        diffs += [
            {"world": kind, "server": r.server, "tool": r.tool, "args": r.args}
            for r in recs
            if not r.same
        ]
    key = next(iter(rts.values())).root.parent.name
    before = _before()
    cases = sum(v["cases"] for v in by_server.values())
    same = sum(v["identical"] for v in by_server.values())
    record(
        "peer_parity",
        {
            "command": "make peer && pytest -s -m peer tests/benchmarks/test_bench_peer.py",
            "peer": f"archipelago checkout {checkout.name} (key {key})",
            "cases": cases,
            "identical": same,
            "identical_fraction": round(same / cases, 4) if cases else 0.0,
            "by_server": by_server,
            "worlds": per_world,
            "not_identical": diffs,
            "verify_seconds": round(time.monotonic() - t1, 1),
            "runtimes_ready_seconds": round(build_s, 1),
            **({"_before": before} if before else {}),
        },
        load_at_start=load0,
    )
    print(json.dumps({"cases": cases, "identical": same, "by_server": by_server}))


def _before() -> dict | None:
    """The figure this run replaces (or the one it carried), to keep beside the new one."""
    try:
        prev = json.loads(RESULTS.read_text()).get("peer_parity") or {}
    except (OSError, ValueError):
        return None
    if prev.get("_before"):
        return prev["_before"]
    keep = ("cases", "identical", "identical_fraction", "by_server", "worlds", "recorded_at")
    return {k: prev[k] for k in keep if k in prev} or None
