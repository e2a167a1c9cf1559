"""Pass@1, Pass@k, Pass^k and mean score with 95% bootstrap CIs over tasks.

Definitions (docs/facts.md section 3):

- A trial passes when it completed and met every rubric criterion. Its score is
  the fraction of criteria met when it completed, else 0: trials that did not
  complete count as failures with score 0 and are never dropped. Neither depends on
  the run's reward setting (`score` or `pass`): Pass@k is always pass/fail.
- Per task with n attempts of which c passed: Pass@1 = c/n; Pass@k = 1 - C(n-c,k)/C(n,k)
  (passed in at least one of k); Pass^k = C(c,k)/C(n,k) (passed in all k). Both are
  the unbiased estimators, equal to the plain "any"/"all" indicators when n = k. n counts
  graded attempts only: a task with fewer than k of them (an attempt ungraded or not run)
  is left out of Pass@k and Pass^k at that k, never padded with failures, and counted in
  `tasks_short` ("k" -> tasks) beside them.
- Run metrics are means over tasks (every task weighs the same whatever its number
  of attempts); the CI resamples tasks with replacement (percentile bootstrap,
  2,000 resamples, fixed seed: the same rows give the same CI).
- A comparison of two runs bootstraps the per-task differences over the tasks
  both runs share (paired); with no shared task it resamples each run alone.

The metrics themselves are declared once, in apexrl/eval/metric_table.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from apexrl.eval.metric_table import METRICS, Metric, MetricCI, metric_fields, metrics_for
from apexrl.eval.models import EvalSummary, GroupMetrics

RESAMPLES = 2000
SEED = 0
LEVEL = 0.95

COLUMNS = (
    "trial_id",
    "task_id",
    "domain",
    "attempt",
    "status",
    "error_class",
    "reward",
    "criteria_met",
    "criteria_total",
    "turns",
    "tokens_in",
    "tokens_out",
    "tool_calls",
    "tool_call_success_rate",
    "duration_s",
    "criteria_unjudged",
    "error_message",
)
MESSAGES_PER_CLASS = 5  # distinct error messages kept per class in the summary


@dataclass
class Columns:
    """Result rows as column arrays."""

    task_id: np.ndarray
    domain: np.ndarray
    status: np.ndarray
    error_class: list
    reward: np.ndarray
    criteria_met: np.ndarray
    criteria_total: np.ndarray
    turns: np.ndarray
    tokens_in: np.ndarray
    tokens_out: np.ndarray
    tool_calls: np.ndarray
    tool_call_success_rate: list
    duration_s: np.ndarray
    criteria_unjudged: np.ndarray | None = None  # free-text criteria run without a judge
    error_message: list | None = None  # why a trial did not complete (None: not recorded)
    trial_id: list | None = None  # None: rows without ids (a bare list of results)

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping | object]) -> Columns:
        cols: dict[str, list] = {c: [] for c in COLUMNS}
        for r in rows:
            get = r.get if isinstance(r, Mapping) else lambda k, _r=r: getattr(_r, k, None)
            for c in COLUMNS:
                cols[c].append(get(c))
        return cls._build(cols)

    @classmethod
    def from_table(cls, table) -> Columns:
        names = set(table.column_names)
        n = table.num_rows
        cols = {c: (table.column(c).to_pylist() if c in names else [None] * n) for c in COLUMNS}
        return cls._build(cols)

    @classmethod
    def _build(cls, c: dict[str, list]) -> Columns:
        # Rows in (task, attempt) order: sums, hence every figure, do not depend
        # on the order trials finished in.
        task_id = np.array([str(v) for v in c["task_id"]], dtype=object)
        attempt = np.array([0 if v is None else v for v in c["attempt"]], dtype=np.int64)
        order = np.lexsort((attempt, task_id.astype(str))) if len(task_id) else np.zeros(0, int)

        def num(name, dtype=float):
            return np.array([0 if v is None else v for v in c[name]], dtype=dtype)[order]

        def obj(name, default):
            return np.array([v or default for v in c[name]], dtype=object)[order]

        def lst(name):
            vals = c[name]
            return [vals[i] for i in order]

        return cls(
            task_id=task_id[order],
            domain=obj("domain", ""),
            status=obj("status", "complete"),
            error_class=lst("error_class"),
            reward=num("reward"),
            criteria_met=num("criteria_met", np.int64),
            criteria_total=num("criteria_total", np.int64),
            turns=num("turns"),
            tokens_in=num("tokens_in"),
            tokens_out=num("tokens_out"),
            tool_calls=num("tool_calls"),
            tool_call_success_rate=lst("tool_call_success_rate"),
            duration_s=num("duration_s"),
            criteria_unjudged=num("criteria_unjudged", np.int64),
            error_message=lst("error_message"),
            trial_id=lst("trial_id"),
        )

    def __len__(self) -> int:
        return len(self.task_id)

    def only_tasks(self, task_ids) -> Columns:
        """The rows of these tasks (a comparison's shared tasks), in the same order."""
        mask = np.isin(self.task_id.astype(str), np.asarray(list(task_ids), dtype=str))
        return self._where(mask)

    def only_trials(self, trial_ids) -> Columns:
        """The rows of these trials (a run's plan), in the same order."""
        ids = set(trial_ids)
        mask = np.array([t in ids for t in (self.trial_id or [None] * len(self))], dtype=bool)
        return self._where(mask)

    def _where(self, mask: np.ndarray) -> Columns:
        import dataclasses

        keep = np.flatnonzero(mask)
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None:
                out[f.name] = None
            elif isinstance(v, np.ndarray):
                out[f.name] = v[mask]
            else:
                out[f.name] = [v[i] for i in keep]
        return Columns(**out)

    def ungraded(self) -> np.ndarray:
        """Rows that ended in an infrastructure error or a broken task (apexrl.eval.infra):
        never a score."""
        from apexrl.eval.infra import is_ungraded

        return np.array(
            [
                is_ungraded(st, ec)
                for st, ec in zip(self.status.tolist(), self.error_class, strict=True)
            ],
            dtype=bool,
        )

    def graded(self) -> Columns:
        """The rows the metrics count: every trial but the ungraded ones."""
        return self._where(~self.ungraded())

    def passed(self) -> np.ndarray:
        complete = self.status == "complete"
        by_criteria = (self.criteria_total > 0) & (self.criteria_met >= self.criteria_total)
        by_reward = (self.criteria_total <= 0) & (self.reward >= 1.0 - 1e-9)
        return complete & (by_criteria | by_reward)

    def score(self) -> np.ndarray:
        """Fraction of criteria met (the reward when a row has no criteria counts),
        whatever reward setting the run used; 0 for trials that did not complete."""
        total = np.maximum(self.criteria_total, 1)
        frac = np.where(
            self.criteria_total > 0, self.criteria_met / total, np.clip(self.reward, 0.0, 1.0)
        )
        return np.where(self.status == "complete", frac, 0.0)


@dataclass
class TaskTable:
    """Per-task aggregates: ids, domain, attempts n, passes c, summed score."""

    task_id: np.ndarray
    domain: np.ndarray
    n: np.ndarray
    c: np.ndarray
    score_sum: np.ndarray

    @classmethod
    def from_columns(cls, cols: Columns) -> TaskTable:
        if len(cols) == 0:
            e = np.zeros(0)
            return cls(np.array([], dtype=object), np.array([], dtype=object), e, e, e)
        ids, first, inv = np.unique(cols.task_id, return_index=True, return_inverse=True)
        n = np.bincount(inv).astype(float)
        c = np.bincount(inv, weights=cols.passed().astype(float))
        s = np.bincount(inv, weights=cols.score())
        return cls(ids, cols.domain[first], n, c, s)

    def values(self, metrics: list[Metric]) -> np.ndarray:
        """(tasks, metrics) matrix: one column per metric, in the order given."""
        out = np.empty((len(self.n), len(metrics)))
        for j, m in enumerate(metrics):
            out[:, j] = m.per_task(self)
        return out

    def subset(self, mask: np.ndarray) -> TaskTable:
        return TaskTable(
            self.task_id[mask], self.domain[mask], self.n[mask], self.c[mask], self.score_sum[mask]
        )


def bootstrap_metrics(
    tasks: TaskTable, metrics: list[Metric], *, seed: int = SEED
) -> dict[Metric, MetricCI]:
    """Each metric's mean over tasks with its bootstrap CI."""
    point, low, high = bootstrap_finite(tasks.values(metrics), seed=seed)
    return {
        m: MetricCI(value=float(point[j]), ci_low=float(low[j]), ci_high=float(high[j]))
        for j, m in enumerate(metrics)
    }


def resampled_means(
    values: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED, chunk: int = 250
) -> np.ndarray:
    """(resamples, metrics): column means of `values` over with-replacement resamples of
    its rows. Works in chunks of resamples so memory stays small for many tasks."""
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, values.shape[1]))
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        picks = rng.integers(0, n, size=(m, n))
        picks += np.arange(m)[:, None] * n  # one bincount for the whole chunk
        counts = np.bincount(picks.ravel(), minlength=m * n).reshape(m, n).astype(np.float64)
        out[start : start + m] = (counts @ values) / n
    return out


def by_finite_rows(values: np.ndarray, fn):
    """fn(values) when every value is finite; else fn over each set of columns that share
    their finite rows (a NaN: a task a metric leaves out), its arrays put back in column
    order, NaN for a column without a finite row. fn returns one array or a tuple, the
    columns on the last axis."""
    finite = ~np.isnan(values)
    if finite.all():
        return fn(values)
    blank = fn(np.nan_to_num(values))  # the shapes only
    single = not isinstance(blank, tuple)
    outs = [np.full_like(a, np.nan, dtype=float) for a in ((blank,) if single else blank)]
    groups: dict[bytes, list[int]] = {}
    for j in range(values.shape[1]):
        groups.setdefault(finite[:, j].tobytes(), []).append(j)
    for cols in groups.values():
        rows = finite[:, cols[0]]
        if rows.any():
            got = fn(values[rows][:, cols])
            for out, a in zip(outs, (got,) if single else got, strict=True):
                out[..., cols] = a
    return outs[0] if single else tuple(outs)


def bootstrap_finite(values: np.ndarray, *, seed: int = SEED):
    """bootstrap() where a column with NaNs (tasks its metric leaves out) is estimated
    over its finite rows only."""
    return by_finite_rows(values, lambda v: bootstrap(v, seed=seed))


def bootstrap(values: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED):
    """Point estimates and (low, high) percentile CIs of column means of `values`."""
    t = values.shape[0]
    if t == 0:
        z = np.zeros(values.shape[1])
        return z, z, z
    point = values.mean(axis=0)
    if t == 1:
        return point, point, point
    stats = resampled_means(values, resamples=resamples, seed=seed)
    alpha = (1.0 - LEVEL) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha], axis=0)
    # Guard float noise: a CI contains its point estimate and stays within the
    # range a mean of these values can take.
    vmin, vmax = values.min(axis=0), values.max(axis=0)
    low = np.clip(np.minimum(low, point), vmin, vmax)
    high = np.clip(np.maximum(high, point), vmin, vmax)
    return point, low, high


def group_metrics(tasks: TaskTable, n_trials: int, *, seed: int = SEED):
    """The metrics over these tasks: per-k ones for k = 1 .. their most graded attempts,
    each over the tasks with at least k graded attempts (the others in tasks_short)."""
    k_max = int(tasks.n.max()) if len(tasks.n) else 0
    ks = list(range(1, k_max + 1))
    ci = bootstrap_metrics(tasks, metrics_for(ks), seed=seed)
    short = {str(k): int((tasks.n < k).sum()) for k in ks if (tasks.n < k).any()}
    return GroupMetrics(
        n_tasks=len(tasks.n), n_trials=n_trials, tasks_short=short, **metric_fields(ci)
    )


def error_messages(cols: Columns) -> dict[str, dict[str, int]]:
    """Error class -> its distinct messages (first line, capped) -> trials, most frequent
    first: the reason next to the class, where a user looks (summary, report)."""
    by_class: dict[str, Counter] = {}
    messages = cols.error_message or [None] * len(cols)
    for st, ec, msg in zip(cols.status.tolist(), cols.error_class, messages, strict=True):
        if st == "complete" and not ec:
            continue
        text = (str(msg).strip().splitlines() or [""])[0][:300] if msg else "(no message recorded)"
        by_class.setdefault(ec or st, Counter())[text] += 1
    return {
        cls: dict(c.most_common(MESSAGES_PER_CLASS))
        for cls, c in sorted(by_class.items(), key=lambda kv: -sum(kv[1].values()))
    }


def summarize(
    rows: Columns | Iterable, *, seed: int = SEED, planned: int | None = None
) -> EvalSummary:
    """The run's figures; `planned` (trials the run set out to do) makes `complete`
    False while fewer rows than that have a result."""
    every = rows if isinstance(rows, Columns) else Columns.from_rows(rows)
    infra = every.ungraded()
    cols = every._where(~infra)  # the metrics: graded trials only
    tasks = TaskTable.from_columns(cols)
    k_max = int(tasks.n.max()) if len(tasks.n) else 0
    k_min = int(tasks.n.min()) if len(tasks.n) else 0
    overall = group_metrics(tasks, len(cols), seed=seed)
    per_domain = {}
    trials_per_domain = Counter(cols.domain.tolist())
    for dom in sorted(set(tasks.domain.tolist())):
        sub = tasks.subset(tasks.domain == dom)
        per_domain[dom or "unknown"] = group_metrics(sub, trials_per_domain[dom], seed=seed)
    status = Counter(every.status.tolist())
    errors: Counter = Counter()  # the model's failures (graded, scored 0)
    for st, ec in zip(cols.status.tolist(), cols.error_class, strict=True):
        if ec:
            errors[ec] += 1
        elif st != "complete":
            errors[st] += 1
    from apexrl.eval.infra import INFRA_EXIT, TASK_EXIT, is_task_error

    infra_errors: Counter = Counter()
    task_errors: Counter = Counter()  # broken tasks: ungraded, but no infrastructure's fault
    ungraded_ids = []
    for i in np.flatnonzero(infra):
        st, ec = str(every.status[i]), every.error_class[i]
        (task_errors if is_task_error(st, ec) else infra_errors)[ec or st] += 1
        ungraded_ids.append(str(every.trial_id[i]) if every.trial_id else f"row {i}")
    ungraded = len(ungraded_ids)
    exit_code = INFRA_EXIT if infra_errors else TASK_EXIT if task_errors else 0
    rated = [
        (r, n)
        for r, n in zip(every.tool_call_success_rate, every.tool_calls.tolist(), strict=True)
        if r is not None and n > 0
    ]
    calls_rated = sum(n for _, n in rated)
    n = max(len(every), 1)
    return EvalSummary(
        complete=(planned is None or len(every) >= planned) and not ungraded,
        trials_planned=planned,
        trials_done=len(every),
        trials_ungraded=ungraded,
        tasks_short=overall.tasks_short,
        n_tasks=overall.n_tasks,
        n_trials=len(cols),
        attempts_max=k_max,
        attempts_min=k_min,
        **{name: getattr(overall, name) for name in METRICS},
        per_domain=per_domain,
        status=dict(sorted(status.items())),
        errors=dict(errors.most_common()),
        infra_errors=dict(infra_errors.most_common()),
        task_errors=dict(task_errors.most_common()),
        ungraded_trials=sorted(ungraded_ids),
        exit_code=int(exit_code),
        error_messages=error_messages(every),
        turns_mean=float(every.turns.sum() / n),
        tokens_in_mean=float(every.tokens_in.sum() / n),
        tokens_out_mean=float(every.tokens_out.sum() / n),
        tokens_total=int(every.tokens_in.sum() + every.tokens_out.sum()),
        tool_calls_total=int(every.tool_calls.sum()),
        tool_call_success_rate=(sum(r * n for r, n in rated) / calls_rated) if rated else None,
        duration_s_mean=float(every.duration_s.sum() / n),
        criteria_unjudged=int(cols.criteria_unjudged.sum())
        if cols.criteria_unjudged is not None
        else 0,
        ci_resamples=RESAMPLES,
        ci_seed=seed,
    )


# --- comparison of two runs -----------------------------------------------------------


def compare(a: Columns, b: Columns, *, seed: int = SEED) -> dict:
    """Deltas (b - a) with 95% bootstrap CIs, overall and per domain, over graded trials."""
    a, b = a.graded(), b.graded()
    ta, tb = TaskTable.from_columns(a), TaskTable.from_columns(b)
    k_common = int(min(ta.n.max() if len(ta.n) else 0, tb.n.max() if len(tb.n) else 0))
    ks = list(range(1, k_common + 1))
    out = {
        "n_tasks_a": len(ta.n),
        "n_tasks_b": len(tb.n),
        "overall": _compare_group(ta, tb, ks, seed),
        "per_domain": {},
    }
    for dom in sorted(set(ta.domain.tolist()) | set(tb.domain.tolist())):
        out["per_domain"][dom or "unknown"] = _compare_group(
            ta.subset(ta.domain == dom), tb.subset(tb.domain == dom), ks, seed, need_shared=True
        )
    return out


def _compare_group(
    ta: TaskTable, tb: TaskTable, ks: list[int], seed: int, *, need_shared: bool = False
) -> dict:
    """Deltas over the shared tasks (paired). Without shared tasks: an unpaired estimate
    when both sides have tasks and `need_shared` is off (the overall row), else no delta
    at all (delta None: "no shared tasks"), never a made-up +0.0."""
    metrics = metrics_for(ks)
    va, vb = ta.values(metrics), tb.values(metrics)
    shared, ia, ib = np.intersect1d(ta.task_id, tb.task_id, return_indices=True)
    alpha = (1.0 - LEVEL) / 2
    if len(shared) > 0:
        d = vb[ib] - va[ia]
        point, low, high = bootstrap_finite(d, seed=seed)
        paired = True
    elif len(va) and len(vb):
        sa = by_finite_rows(va, lambda v: resampled_means(v, seed=seed))
        sb = by_finite_rows(vb, lambda v: resampled_means(v, seed=seed + 1))
        point = _mean(vb) - _mean(va)
        low, high = np.quantile(sb - sa, [alpha, 1 - alpha], axis=0)
        paired = False
    else:
        z = np.zeros(len(metrics))
        point, low, high, paired = z, z, z, False
    comparable = len(shared) > 0 or (not need_shared and len(va) > 0 and len(vb) > 0)
    if paired:  # a, b and delta over the same (shared) tasks: delta == b - a
        both = ~np.isnan(vb[ib] - va[ia])  # a per-k metric: the tasks with k on both sides
        ma, mb = _mean(np.where(both, va[ia], np.nan)), _mean(np.where(both, vb[ib], np.nan))
    else:
        ma = _mean(va) if len(va) else np.zeros(len(metrics))
        mb = _mean(vb) if len(vb) else np.zeros(len(metrics))
    out = {}
    for j, m in enumerate(metrics):
        if m.k == 1:  # per-k metrics from k = 2: at k = 1 Pass@k and Pass^k are Pass@1
            continue
        ok = comparable and not np.isnan(point[j])  # NaN: no task has k attempts on both
        out[m.name] = {
            "a": _num(ma[j]) if len(va) else None,
            "b": _num(mb[j]) if len(vb) else None,
            "delta": float(point[j]) if ok else None,
            "ci_low": float(low[j]) if ok else None,
            "ci_high": float(high[j]) if ok else None,
        }
    return {
        "n_shared_tasks": int(len(shared)),
        "n_tasks_a": int(len(va)),
        "n_tasks_b": int(len(vb)),
        "paired": paired,
        "comparable": bool(comparable),
        "metrics": out,
    }


def _mean(values: np.ndarray) -> np.ndarray:
    """Column means over the finite rows (NaN: a task its metric leaves out)."""
    finite = ~np.isnan(values)
    n = finite.sum(axis=0)
    total = np.where(finite, values, 0.0).sum(axis=0)
    return np.divide(total, n, out=np.full(values.shape[1], np.nan), where=n > 0)


def _num(x: float) -> float | None:
    return None if np.isnan(x) else float(x)
