"""apexrl.eval.metrics on small hand-made runs with exact expected figures, and its
bootstrap against a plain reimplementation (the same draws, computed another way).
Fast on purpose: `make mutate MODULES=metrics` runs these against every mutant."""

from __future__ import annotations

import numpy as np
import pytest

from apexrl.eval import metrics as M


def row(task, attempt, *, met=1, total=1, status="complete", reward=None, domain="law", **kw):
    if reward is None:
        reward = met / total if total else 0.0
    return {"trial_id": f"{task}.a{attempt}", "task_id": task, "attempt": attempt,
            "domain": domain, "status": status, "criteria_met": met, "criteria_total": total,
            "reward": reward, **kw}  # fmt: skip


def test_pass_and_score_per_trial():
    cols = M.Columns.from_rows([
        row("a", 0, met=2, total=2),  # passes, 1.0
        row("a", 1, met=1, total=2),  # fails, 0.5
        row("a", 2, met=2, total=2, status="error", error_class="timeout"),  # fails, 0
        row("a", 3, met=0, total=0, reward=1.0),  # no criteria: by reward
        row("a", 4, met=0, total=0, reward=0.999),  # below 1: fails
        row("a", 5, met=0, total=0, reward=7.0),  # clipped to 1
        row("a", 6, met=0, total=0, reward=-2.0),  # clipped to 0
        row("a", 7, met=3, total=2),  # more met than total: passes, 1.5
    ])  # fmt: skip
    assert cols.passed().tolist() == [True, False, False, True, False, True, False, True]
    assert cols.score().tolist() == [1.0, 0.5, 0.0, 1.0, 0.999, 1.0, 0.0, 1.5]


def test_rows_in_any_order_give_the_same_columns():
    rows = [row("b", 1, met=0), row("a", 1), row("b", 0), row("a", 0, met=0)]
    cols = M.Columns.from_rows(rows)
    assert cols.task_id.tolist() == ["a", "a", "b", "b"]
    assert cols.passed().tolist() == [False, True, True, False]
    assert cols.trial_id == ["a.a0", "a.a1", "b.a0", "b.a1"]
    other = M.Columns.from_rows(list(reversed(rows)))
    assert other.passed().tolist() == cols.passed().tolist()
    none = M.Columns.from_rows([{"task_id": "x"}])
    assert none.status.tolist() == ["complete"] and none.domain.tolist() == [""]
    assert none.reward.tolist() == [0.0] and none.criteria_unjudged.tolist() == [0]


def test_task_table_and_per_k_metrics():
    rows = [row("a", i, met=int(i < 2)) for i in range(4)] + [row("b", 0), row("b", 1)]
    t = M.TaskTable.from_columns(M.Columns.from_rows(rows))
    assert t.task_id.tolist() == ["a", "b"]
    assert t.n.tolist() == [4, 2] and t.c.tolist() == [2, 2] and t.score_sum.tolist() == [2, 2]
    s = M.summarize(rows)
    assert s.pass_at_1.value == pytest.approx((0.5 + 1.0) / 2)
    # a: n=4, c=2: Pass@2 = 1 - C(2,2)/C(4,2) = 5/6, Pass^2 = C(2,2)/C(4,2) = 1/6; b: 1, 1
    assert s.pass_at_k["2"].value == pytest.approx((5 / 6 + 1) / 2)
    assert s.pass_hat_k["2"].value == pytest.approx((1 / 6 + 1) / 2)
    # b has 2 attempts: its missing ones count as failures for k = 3, 4
    assert s.pass_hat_k["4"].value == pytest.approx(0.0)
    assert s.pass_at_k["4"].value == pytest.approx(1.0)
    assert (s.attempts_max, s.attempts_min, s.n_tasks, s.n_trials) == (4, 2, 2, 6)
    empty = M.TaskTable.from_columns(M.Columns.from_rows([]))
    assert len(empty.n) == 0


def _reference_bootstrap(values, resamples=M.RESAMPLES, seed=M.SEED, chunk=250):
    rng = np.random.default_rng(seed)
    n = values.shape[0]
    stats = []
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        picks = rng.integers(0, n, size=(m, n))
        stats.append(values[picks].mean(axis=1))
    return np.concatenate(stats)


def test_bootstrap_matches_a_plain_reimplementation():
    rng = np.random.default_rng(7)
    values = rng.random((23, 3))
    ref = _reference_bootstrap(values)
    got = M.resampled_means(values)
    assert got.shape == (M.RESAMPLES, 3) and np.allclose(got, ref)
    point, low, high = M.bootstrap(values)
    assert np.allclose(point, values.mean(axis=0))
    ql, qh = np.quantile(ref, [0.025, 0.975], axis=0)
    assert np.allclose(low, ql) and np.allclose(high, qh)
    assert (low < point).all() and (point < high).all()
    odd = M.resampled_means(values, resamples=7, chunk=3)
    assert np.allclose(odd, _reference_bootstrap(values, resamples=7, chunk=3))
    other = M.bootstrap(values, seed=1)[1]
    assert not np.allclose(other, low)


def test_bootstrap_edges():
    z = M.bootstrap(np.zeros((0, 2)))
    assert all(x.tolist() == [0.0, 0.0] for x in z)
    one = M.bootstrap(np.array([[0.25, 1.0]]))
    assert all(x.tolist() == [0.25, 1.0] for x in one)
    same = M.bootstrap(np.full((5, 1), 0.3))  # no spread: the CI is the point
    assert [x.tolist() for x in same] == [[pytest.approx(0.3)]] * 3
    pt, lo, hi = M.bootstrap(np.array([[0.0], [1.0]]))
    assert 0.0 <= lo[0] <= pt[0] == 0.5 <= hi[0] <= 1.0


def test_summary_counts_errors_and_means():
    rows = [
        row("a", 0, domain="law", turns=4, tokens_in=100, tokens_out=10, tool_calls=4,
            tool_call_success_rate=0.5, duration_s=2.0, criteria_unjudged=1),
        row("a", 1, domain="law", status="error", error_class="unparsed_tool_call", met=0,
            error_message="took too long\nsecond line", turns=2, tool_calls=0,
            tool_call_success_rate=0.0),
        row("b", 0, domain="", status="max_steps", met=0, tool_calls=6,
            tool_call_success_rate=1.0, duration_s=4.0),
        row("c", 0, domain="bank", status="error", error_class="unparsed_tool_call", met=0),
        row("d", 0, domain="tax", status="error", error_class="llm_timeout", met=0),  # infra
    ]  # fmt: skip
    s = M.summarize(rows, planned=6)
    assert s.complete is False and (s.trials_planned, s.trials_done) == (6, 5)
    assert M.summarize(rows, planned=5).complete is False  # an ungraded trial: incomplete
    assert M.summarize(rows[:4], planned=4).complete and M.summarize(rows[:4]).complete
    assert (s.trials_ungraded, s.ungraded_trials, s.exit_code) == (1, ["d.a0"], 4)
    assert s.infra_errors == {"llm_timeout": 1} and (s.n_tasks, s.n_trials) == (3, 4)
    assert s.status == {"complete": 1, "error": 3, "max_steps": 1}
    assert s.errors == {"unparsed_tool_call": 2, "max_steps": 1}
    assert s.error_messages == {
        "unparsed_tool_call": {"took too long": 1, "(no message recorded)": 1},
        "max_steps": {"(no message recorded)": 1},
        "llm_timeout": {"(no message recorded)": 1},
    }
    assert list(s.error_messages)[0] == "unparsed_tool_call"
    assert s.turns_mean == 1.2 and s.tokens_in_mean == 20.0 and s.tokens_out_mean == 2.0
    assert s.tokens_total == 110 and s.tool_calls_total == 10
    assert s.tool_call_success_rate == pytest.approx((0.5 * 4 + 1.0 * 6) / 10)
    assert s.duration_s_mean == 1.2 and s.criteria_unjudged == 1
    assert sorted(s.per_domain) == ["bank", "law", "unknown"]
    assert s.per_domain["law"].n_tasks == 1 and s.per_domain["law"].n_trials == 2
    assert s.per_domain["law"].pass_at_1.value == 0.5
    assert s.per_domain["unknown"].pass_at_1.value == 0.0
    assert s.pass_at_1.value == pytest.approx(0.5 / 3)  # the infra trial is no 0
    assert (s.ci_resamples, s.ci_seed) == (M.RESAMPLES, 0)
    assert M.summarize([row("a", 0, tool_calls=0)]).tool_call_success_rate is None


def test_error_messages_are_capped_and_most_frequent_first():
    rows = [row("t", i, status="error", error_class="e", met=0, error_message=f"m{i % 7}")
            for i in range(14)] + [row("u", 0, status="error", error_class="z", met=0,
                                       error_message="x" * 400)]  # fmt: skip
    msgs = M.error_messages(M.Columns.from_rows(rows))
    assert list(msgs) == ["e", "z"] and len(msgs["e"]) == M.MESSAGES_PER_CLASS
    assert all(v == 2 for v in msgs["e"].values())
    assert msgs["z"] == {"x" * 300: 1}


def test_compare_paired_unpaired_and_no_shared_tasks():
    a = M.Columns.from_rows([row("t1", 0, met=0), row("t1", 1, met=0), row("t2", 0),
                             row("t2", 1), row("only_a", 0, domain="bank")])  # fmt: skip
    b = M.Columns.from_rows([row("t1", 0), row("t1", 1, met=0), row("t2", 0), row("t2", 1),
                             row("only_b", 0, domain="tax")])  # fmt: skip
    out = M.compare(a, b)
    assert (out["n_tasks_a"], out["n_tasks_b"]) == (3, 3)
    o = out["overall"]
    assert o["paired"] and o["comparable"] and o["n_shared_tasks"] == 2
    p1 = o["metrics"]["pass_at_1"]
    assert (p1["a"], p1["b"], p1["delta"]) == (0.5, 0.75, 0.25)  # over the shared tasks
    assert p1["ci_low"] <= 0.25 <= p1["ci_high"]
    assert "pass_at_2" in o["metrics"] and "pass_hat_2" in o["metrics"]
    assert not any(k.endswith("_1") and k != "pass_at_1" for k in o["metrics"])
    bank = out["per_domain"]["bank"]
    assert bank["comparable"] is False and bank["metrics"]["pass_at_1"]["delta"] is None
    assert bank["metrics"]["pass_at_1"]["a"] == 1.0 and bank["metrics"]["pass_at_1"]["b"] is None
    unpaired = M.compare(M.Columns.from_rows([row("x", 0, met=0)]),
                         M.Columns.from_rows([row("y", 0)]))["overall"]  # fmt: skip
    assert unpaired["paired"] is False and unpaired["comparable"] is True
    m = unpaired["metrics"]["pass_at_1"]
    assert (m["a"], m["b"], m["delta"], m["ci_low"], m["ci_high"]) == (0.0, 1.0, 1.0, 1.0, 1.0)


def test_only_tasks_and_only_trials():
    cols = M.Columns.from_rows([row("a", 0), row("b", 0, met=0), row("c", 0)])
    sub = cols.only_tasks(["c", "a"])
    assert sub.task_id.tolist() == ["a", "c"] and sub.trial_id == ["a.a0", "c.a0"]
    assert sub.passed().tolist() == [True, True]
    tri = cols.only_trials({"b.a0"})
    assert tri.task_id.tolist() == ["b"] and tri.passed().tolist() == [False]
    assert len(M.Columns.from_rows([{"task_id": "q"}]).only_trials({"x"})) == 0


# --- what mutation testing found untested (make mutate MODULES=metrics) ------------------


def test_criteria_win_over_the_reward_and_boundaries():
    cols = M.Columns.from_rows([
        row("a", 0, met=0, total=1, reward=1.0),  # a reward of 1 with a criterion unmet
        row("a", 1, met=0, total=0, reward=1.0 - 1e-9),  # no criteria: the reward, at 1
        row("a", 2, met=1, total=1, reward=0.3),  # one criterion: met/total, not reward
    ])  # fmt: skip
    assert cols.passed().tolist() == [False, True, True]
    assert cols.score().tolist() == [0.0, 1.0 - 1e-9, 1.0]


def test_empty_runs_and_comparisons():
    s = M.summarize([])
    assert (s.n_tasks, s.n_trials, s.trials_ungraded) == (0, 0, 0)
    assert s.pass_at_1.value == 0.0 and s.per_domain == {}
    empty = M.Columns.from_rows([])
    assert empty.ungraded().dtype == bool and len(empty.graded()) == 0
    some = M.Columns.from_rows([row("t", 0)])
    out = M.compare(empty, some)
    assert out["n_tasks_a"] == 0 and out["overall"]["n_shared_tasks"] == 0
    assert out["overall"]["comparable"] is False
    p1 = out["overall"]["metrics"]["pass_at_1"]
    assert (p1["a"], p1["b"], p1["delta"]) == (None, 1.0, None)  # nothing to compare
    assert M.compare(empty, empty)["overall"]["n_tasks_b"] == 0


def test_bootstrap_of_two_tasks_and_other_resample_counts():
    pt, lo, hi = M.bootstrap(np.array([[0.0], [1.0]]))
    assert (lo[0], pt[0], hi[0]) == (0.0, 0.5, 1.0)  # means of 2 draws: 0, 0.5 or 1
    rng = np.random.default_rng(3)
    values = rng.random((9, 2))
    ref = _reference_bootstrap(values, resamples=50)
    _, lo, hi = M.bootstrap(values, resamples=50)
    ql, qh = np.quantile(ref, [0.025, 0.975], axis=0)
    assert np.allclose(lo, np.minimum(ql, values.mean(axis=0)))
    assert np.allclose(hi, np.maximum(qh, values.mean(axis=0)))


def test_a_ci_stays_within_each_column_range_despite_float_noise():
    values = np.column_stack([np.full(23, 0.1), np.full(23, 0.7)])
    stats = M.resampled_means(values)
    assert (stats[:, 0] != 0.1).any() or (stats[:, 1] != 0.7).any()  # the noise exists
    _, lo, hi = M.bootstrap(values)
    assert lo.tolist() == [0.1, 0.7] and hi.tolist() == [0.1, 0.7]
