"""Metrics against hand-computed values (errored trials, uneven attempts)."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from apexrl.eval.metric_table import pass_at_k, pass_hat_k
from apexrl.eval.metrics import Columns, compare, summarize


def row(task, domain, attempt, status="complete", met=2, total=2, reward=None, err=None):
    return {
        "task_id": task,
        "domain": domain,
        "attempt": attempt,
        "status": status,
        "error_class": err,
        "reward": met / total if reward is None else reward,
        "criteria_met": met,
        "criteria_total": total,
        "turns": 4,
        "tokens_in": 1000,
        "tokens_out": 100,
        "tool_calls": 10,
        "tool_call_success_rate": 0.9,
        "duration_s": 2.0,
    }


# T1 law: pass, 1/3 met, a model error (its claimed reward is ignored: not completed -> 0)
# T2 law: pass, pass
# T3 ib:  one attempt, agent_timeout claiming every criterion (scores 0, fails)
# T4 ib:  1/2 met, pass, pass
ROWS = [
    row("T1", "law", 0, met=3, total=3),
    row("T1", "law", 1, met=1, total=3),
    row("T1", "law", 2, status="error", met=3, total=3, reward=0.9, err="unparsed_tool_call"),
    row("T2", "law", 0),
    row("T2", "law", 1),
    row("T3", "investment-banking", 0, status="agent_timeout"),
    row("T4", "investment-banking", 0, met=1),
    row("T4", "investment-banking", 1),
    row("T4", "investment-banking", 2),
]


def test_hand_computed_summary():
    s = summarize(ROWS)
    assert (s.n_tasks, s.n_trials, s.attempts_min, s.attempts_max) == (4, 9, 1, 3)
    # per-task pass@1: 1/3, 1, 0, 2/3
    assert s.pass_at_1.value == pytest.approx(0.5)
    # per-task scores: (1 + 1/3 + 0)/3, 1, 0, (0.5 + 1 + 1)/3
    assert s.mean_score.value == pytest.approx(41 / 72)
    # pass@2: 1 - C(2,2)/C(3,2) = 2/3; 1; T3 left out (one graded attempt); 1
    assert s.pass_at_k["2"].value == pytest.approx((2 / 3 + 1 + 1) / 3)
    # pass^2: 0; 1; T3 left out; C(2,2)/C(3,2) = 1/3
    assert s.pass_hat_k["2"].value == pytest.approx((0 + 1 + 1 / 3) / 3)
    # k = 3: T1 and T4 only (T2 has two attempts, T3 one)
    assert s.pass_at_k["3"].value == pytest.approx(1.0)
    assert s.pass_hat_k["3"].value == pytest.approx(0.0)
    assert s.tasks_short == {"2": 1, "3": 2}
    assert s.pass_at_k["1"].value == s.pass_hat_k["1"].value == s.pass_at_1.value
    law, ib = s.per_domain["law"], s.per_domain["investment-banking"]
    assert (law.n_tasks, law.n_trials, ib.n_tasks, ib.n_trials) == (2, 5, 2, 4)
    assert law.pass_at_1.value == pytest.approx(2 / 3)
    assert law.mean_score.value == pytest.approx(13 / 18)
    assert ib.pass_at_1.value == pytest.approx(1 / 3)
    assert ib.mean_score.value == pytest.approx(5 / 12)
    assert s.errors == {"unparsed_tool_call": 1, "agent_timeout": 1}
    assert s.infra_errors == {} and s.trials_ungraded == 0 and s.exit_code == 0
    assert s.status == {"agent_timeout": 1, "complete": 7, "error": 1}
    assert s.tool_call_success_rate == pytest.approx(0.9)
    assert s.tokens_total == 9 * 1100 and s.turns_mean == 4
    for m in (s.pass_at_1, s.mean_score, *s.pass_at_k.values(), *s.pass_hat_k.values()):
        assert 0.0 <= m.ci_low <= m.value <= m.ci_high <= 1.0


def test_infrastructure_errors_are_ungraded_never_scored():
    """The same rows plus three trials the infrastructure failed (a judge that did not
    answer, an engine error, a sandbox that died): left out of every metric, counted
    beside, and the run's exit code is 4."""
    infra = [
        {
            **row("T1", "law", 3, status="no_verifier_result", err="judge_unavailable"),
            "trial_id": "T1.a3",
        },
        {**row("T2", "law", 2, status="error", err="llm_transient"), "trial_id": "T2.a2"},
        {**row("T5", "law", 0, status="error", err="sandbox_died"), "trial_id": "T5.a0"},
    ]
    s, base = summarize(ROWS + infra), summarize(ROWS)
    assert (s.n_tasks, s.n_trials, s.trials_done, s.trials_ungraded) == (4, 9, 12, 3)
    for name in ("pass_at_1", "mean_score", "pass_at_k", "pass_hat_k", "per_domain"):
        assert getattr(s, name) == getattr(base, name), name
    assert s.infra_errors == {"judge_unavailable": 1, "llm_transient": 1, "sandbox_died": 1}
    assert s.errors == base.errors and s.ungraded_trials == ["T1.a3", "T2.a2", "T5.a0"]
    assert s.exit_code == 4 and not s.complete
    assert not summarize(ROWS + infra, planned=12).complete  # every planned trial ran, still


def test_a_broken_task_is_a_task_error_not_infrastructure():
    """A task whose rubric cannot be read, or whose world or task file is not a readable
    record, is ungraded (never a score) but no infrastructure failure: counted in
    task_errors, not infra_errors, and alone it makes the exit code 5 (partial), not 4."""
    from apexrl.eval.infra import infra_kind, is_infra, is_task_error, is_ungraded

    for status, cls in (
        ("no_verifier_result", "bad_task_rubric"),
        ("error", "bad_record"),
        ("error", "task_env_refused"),
    ):
        assert infra_kind(status, cls) == "task" and is_task_error(status, cls)
        assert is_ungraded(status, cls) and not is_infra(status, cls)
    assert is_infra("no_verifier_result", "judge_unavailable")
    broken = [
        {**row("T1", "law", 3, status="no_verifier_result", err="bad_task_rubric"),
         "trial_id": "T1.a3"},
        {**row("T5", "law", 0, status="error", err="bad_record"), "trial_id": "T5.a0"},
    ]  # fmt: skip
    s, base = summarize(ROWS + broken), summarize(ROWS)
    assert (s.n_trials, s.trials_ungraded) == (9, 2)
    assert s.pass_at_1 == base.pass_at_1 and s.per_domain == base.per_domain
    assert s.task_errors == {"bad_task_rubric": 1, "bad_record": 1} and s.infra_errors == {}
    assert s.ungraded_trials == ["T1.a3", "T5.a0"] and s.exit_code == 5 and not s.complete
    judge = {**row("T2", "law", 2, status="error", err="llm_transient"), "trial_id": "T2.a2"}
    both = summarize(ROWS + broken + [judge])  # infrastructure too: retrying helps, exit 4
    assert both.exit_code == 4 and both.infra_errors == {"llm_transient": 1}


def test_ci_is_deterministic_and_sensible():
    a, b = summarize(ROWS), summarize(list(reversed(ROWS)))
    assert a == b  # same rows, same figures and CIs, whatever the order
    assert a.pass_at_1.ci_low < a.pass_at_1.value < a.pass_at_1.ci_high
    perfect = summarize([row(f"T{i}", "law", 0) for i in range(20)])
    assert (perfect.pass_at_1.ci_low, perfect.pass_at_1.ci_high) == (1.0, 1.0)
    one = summarize([row("T", "law", 0, met=1)])
    assert one.pass_at_1.ci_low == one.pass_at_1.ci_high == 0.0
    assert one.mean_score.value == one.mean_score.ci_low == 0.5


def test_ci_width_matches_the_binomial_scale():
    # 400 tasks, 30% pass: the 95% CI half-width is about 1.96 * sqrt(.3 * .7 / 400) = 4.5 pts
    rows = [row(f"T{i}", "law", 0, met=2 if i % 10 < 3 else 0) for i in range(400)]
    s = summarize(rows)
    half = (s.pass_at_1.ci_high - s.pass_at_1.ci_low) / 2
    assert s.pass_at_1.value == pytest.approx(0.3)
    assert 0.035 < half < 0.055


@pytest.mark.parametrize("n,c,k", [(5, 2, 2), (4, 0, 3), (6, 6, 4), (3, 1, 1), (8, 3, 5)])
def test_unbiased_estimators_match_subset_enumeration(n, c, k):
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    any_pass = sum(max(s) for s in subsets) / len(subsets)
    all_pass = sum(min(s) for s in subsets) / len(subsets)
    assert pass_at_k(np.array([n]), np.array([c]), k)[0] == pytest.approx(any_pass)
    assert pass_hat_k(np.array([n]), np.array([c]), k)[0] == pytest.approx(all_pass)
    assert all_pass == pytest.approx(comb(c, k) / comb(n, k))


def test_empty_rows():
    s = summarize([])
    assert s.n_tasks == 0 and s.pass_at_1.value == 0.0 and s.per_domain == {}


def test_compare_paired_deltas():
    a = Columns.from_rows(ROWS)
    better = [
        dict(r, status="complete", criteria_met=r["criteria_total"], reward=1.0) for r in ROWS
    ]
    b = Columns.from_rows(better)
    cmp = compare(a, b)
    o = cmp["overall"]
    assert o["paired"] and o["n_shared_tasks"] == 4
    d = o["metrics"]["pass_at_1"]
    assert d["a"] == pytest.approx(0.5) and d["b"] == pytest.approx(1.0)
    assert d["delta"] == pytest.approx(0.5)
    assert d["ci_low"] <= 0.5 <= d["ci_high"] and d["ci_low"] > 0
    assert set(cmp["per_domain"]) == {"law", "investment-banking"}
    assert cmp["per_domain"]["law"]["metrics"]["pass_at_1"]["delta"] == pytest.approx(1 / 3)
    same = compare(a, a)["overall"]["metrics"]["mean_score"]
    assert same["delta"] == same["ci_low"] == same["ci_high"] == 0.0


def test_compare_without_shared_tasks_is_unpaired():
    a = Columns.from_rows([row(f"A{i}", "law", 0, met=0) for i in range(30)])
    b = Columns.from_rows([row(f"B{i}", "law", 0) for i in range(30)])
    o = compare(a, b)["overall"]
    assert not o["paired"] and o["metrics"]["pass_at_1"]["delta"] == pytest.approx(1.0)


def test_columns_from_parquet_table_roundtrip(tmp_path):
    import pyarrow as pa

    table = pa.Table.from_pylist(ROWS)
    assert summarize(Columns.from_table(table)) == summarize(ROWS)


def test_domain_without_shared_tasks_says_so():
    from apexrl.eval.report import compare_rows

    a = Columns.from_rows(
        [row("L1", "law", 0), row("L2", "law", 0, met=0), row("I1", "investment-banking", 0)]
    )
    b = Columns.from_rows([row("L1", "law", 0), row("L2", "law", 0), row("C1", "consulting", 0)])
    cmp = compare(a, b)
    ib, mc = cmp["per_domain"]["investment-banking"], cmp["per_domain"]["consulting"]
    for g in (ib, mc):
        assert not g["comparable"] and g["n_shared_tasks"] == 0
        assert g["metrics"]["pass_at_1"]["delta"] is None
    assert ib["metrics"]["pass_at_1"]["b"] is None and mc["metrics"]["pass_at_1"]["a"] is None
    assert cmp["per_domain"]["law"]["metrics"]["pass_at_1"]["delta"] == pytest.approx(0.5)
    _, rows = compare_rows(cmp)
    by = {(r[0], r[1]): r for r in rows}
    assert by[("investment-banking", "Pass@1")][2:] == [
        "100.0",
        "-",
        "no shared tasks",
        "A only, 1 task",
    ]
    assert by[("consulting", "mean score")][4] == "no shared tasks"
    assert "+0.0 pts" not in " ".join(" ".join(r) for r in rows if r[0] != "law")


def test_an_ungraded_attempt_is_no_failure_in_pass_k():
    """k = 2; task A passes twice, task B passes once and its other attempt was never
    graded (the judge did not answer). Pass^2 covers A only (100%), not (1 + 0) / 2 with
    B's ungraded attempt padded as a failure; the shortfall is counted and reported, the
    run exits 4 as any run with ungraded trials."""
    from apexrl.eval.report import summary_rows

    rows = [
        {**row("A", "law", 0), "trial_id": "A.0"},
        {**row("A", "law", 1), "trial_id": "A.1"},
        {**row("B", "law", 0), "trial_id": "B.0"},
        {
            **row("B", "law", 1, status="no_verifier_result", err="judge_unavailable"),
            "trial_id": "B.1",
        },
    ]
    s = summarize(rows, planned=4)
    assert s.pass_at_1.value == 1.0
    assert s.pass_hat_k["2"].value == s.pass_at_k["2"].value == 1.0
    assert s.pass_hat_k["2"].ci_low == 1.0  # B is not in the resampled tasks either
    assert s.tasks_short == {"2": 1} and s.per_domain["law"].tasks_short == {"2": 1}
    assert s.exit_code == 4 and not s.complete and s.ungraded_trials == ["B.1"]
    shown = dict(summary_rows(s))
    assert shown["Pass@2 / Pass^2 over"].startswith("1 of 2 tasks: 1 have fewer than 2 graded")
    # a comparison at k = 2 pairs the tasks that have two graded attempts on both sides
    full = summarize([r for r in rows if r["trial_id"] != "B.1"] + [{**rows[2], "attempt": 1}])
    assert full.pass_hat_k["2"].value == 1.0 and full.tasks_short == {}
    d = compare(Columns.from_rows(rows), Columns.from_rows(rows))["overall"]["metrics"]
    assert d["pass_hat_2"]["a"] == 1.0 and d["pass_hat_2"]["delta"] == 0.0
