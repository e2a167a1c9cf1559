"""The benchmark figures' helpers: median with min/max, paired ratios, load average."""

from __future__ import annotations

import json

from tests.benchmarks import results


def test_stats_and_paired_ratio():
    s = results.stats([3.0, 1.0, 2.0])
    assert (s["median_s"], s["min_s"], s["max_s"]) == (2.0, 1.0, 3.0)
    assert s["runs_s"] == [3.0, 1.0, 2.0]  # run order kept: a noisy run stays visible
    r = results.ratio([2.0, 4.0, 3.0], [1.0, 2.0, 6.0])
    assert r == {"median": 1.5, "min": 0.5, "max": 2.0}


def test_interleaved_alternates_the_order_each_round():
    order: list[str] = []
    t = results.interleaved(3, {"a": lambda: order.append("a"), "b": lambda: order.append("b")})
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert len(t["a"]) == len(t["b"]) == 3 and all(x >= 0 for x in t["a"] + t["b"])


def test_interleaved_before_runs_untimed_ahead_of_each_call():
    import time

    order: list[str] = []

    def before():
        order.append("-")
        time.sleep(0.05)

    t = results.interleaved(2, {"a": lambda: order.append("a")}, before=before)
    assert order == ["-", "a", "-", "a"]
    assert all(x < 0.05 for x in t["a"])  # the hook's sleep is not in the figure


def test_record_adds_load_average(tmp_path, monkeypatch):
    out = tmp_path / "bench" / "results.json"
    monkeypatch.setattr(results, "RESULTS", out)
    results.record("k", {"x": 1}, load_at_start=[1.0, 2.0, 3.0])
    data = json.loads(out.read_text())["k"]
    assert data["x"] == 1
    assert data["load_average"]["at_start_1_5_15"] == [1.0, 2.0, 3.0]
    assert len(data["load_average"]["at_end_1_5_15"]) == 3
    assert data["machine"]["cpus"] >= 1
