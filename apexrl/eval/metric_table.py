"""The metric table: every eval metric, declared once (METRICS).

A metric is a per-task value averaged over tasks with a bootstrap CI
(apexrl/eval/metrics.py). GroupMetrics' and EvalSummary's fields (apexrl/eval/models.py:
summary.json, the report's JSON and schema) and the report's rows (table, Markdown, HTML,
comparisons) are made from this table, in its order, so a new metric is one MetricKind
here. This module imports no other apexrl module, so an entry added before the rest of
apexrl loads (tests/test_registries.py) reaches them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict


class TaskCounts(Protocol):
    """What a metric sees of each task (apexrl/eval/metrics.py's TaskTable): attempts n,
    passes c and summed trial score, one array element per task."""

    n: np.ndarray
    c: np.ndarray
    score_sum: np.ndarray


class MetricCI(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class MetricKind:
    """One row of the metric table."""

    name: str  # its field; a per-k metric's ends in _k (pass_at_k -> pass_at_<k> keys)
    label: str  # the report's label; a per-k metric's holds {k}
    per_task: Callable[[TaskCounts, int], np.ndarray]  # each task's value (k: per-k only)
    # one value per k = 1..attempts ("k" -> MetricCI); reports show it for k > 1 only,
    # as at k = 1 Pass@k and Pass^k are Pass@1
    per_k: bool = False


METRICS: dict[str, MetricKind] = {
    m.name: m
    for m in (
        MetricKind("pass_at_1", "Pass@1", lambda t, k: t.c / t.n),
        MetricKind("pass_at_k", "Pass@{k}", lambda t, k: pass_at_k(t.n, t.c, k), per_k=True),
        MetricKind("pass_hat_k", "Pass^{k}", lambda t, k: pass_hat_k(t.n, t.c, k), per_k=True),
        MetricKind("mean_score", "mean score", lambda t, k: t.score_sum / t.n),
    )
}


@dataclass(frozen=True)
class Metric:
    """One metric of the table (METRICS), at one k for a per-k one. Results are looked
    up by metric, never by position."""

    kind: str  # a METRICS name
    k: int | None = None

    @property
    def name(self) -> str:
        """pass_at_1, mean_score, pass_at_<k>, pass_hat_<k> (comparison keys)."""
        if self.k is None:
            return self.kind
        return f"{self.kind.removesuffix('_k')}_{self.k}"

    @property
    def label(self) -> str:
        return METRICS[self.kind].label.format(k=self.k)

    @classmethod
    def from_name(cls, name: str) -> Metric:
        """The metric a comparison key stands for."""
        if name in METRICS and not METRICS[name].per_k:
            return cls(name)
        for kind in METRICS.values():
            stem = kind.name.removesuffix("_k") + "_"
            if kind.per_k and name.startswith(stem) and name[len(stem) :].isdigit():
                return cls(kind.name, int(name[len(stem) :]))
        raise KeyError(name)

    def per_task(self, t: TaskCounts) -> np.ndarray:
        if len(t.n) == 0:
            return np.zeros(0)
        return METRICS[self.kind].per_task(t, int(self.k or 1))

    def value_in(self, group: BaseModel) -> MetricCI | None:
        """This metric's figure in a summary or a per-domain group; None for a per-k one at
        a k no task of the group has that many graded attempts for."""
        v = getattr(group, self.kind)
        return v if self.k is None else v.get(str(self.k))


def metrics_for(ks: list[int]) -> list[Metric]:
    """The metrics without k (Pass@1, mean score), then each per-k one for each k."""
    return [
        *(Metric(m.name) for m in METRICS.values() if not m.per_k),
        *(Metric(m.name, k) for m in METRICS.values() if m.per_k for k in ks),
    ]


def report_metrics(k: int) -> list[Metric]:
    """The rows a report shows, in table order: each metric, a per-k one at k (the
    attempts per task) when k > 1."""
    return [
        Metric(m.name, k if m.per_k else None) for m in METRICS.values() if k > 1 or not m.per_k
    ]


def metric_fields(ci: Mapping[Metric, MetricCI]) -> dict[str, MetricCI | dict[str, MetricCI]]:
    """GroupMetrics' / EvalSummary's metric fields from each metric's figure."""
    per_k = {
        name: {str(m.k): v for m, v in ci.items() if m.kind == name}
        for name, kind in METRICS.items()
        if kind.per_k
    }
    return {m.kind: v for m, v in ci.items() if m.k is None} | per_k


def pass_at_k(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """1 - C(n-c, k) / C(n, k) per task; NaN for a task with fewer than k graded attempts
    (it is left out at this k: an attempt never graded is no failure)."""
    n_eff = np.maximum(n, k)
    miss = np.ones_like(n_eff, dtype=float)
    for j in range(k):
        miss *= np.maximum(n_eff - c - j, 0.0) / (n_eff - j)
    return np.where(n >= k, 1.0 - miss, np.nan)


def pass_hat_k(n: np.ndarray, c: np.ndarray, k: int) -> np.ndarray:
    """C(c, k) / C(n, k) per task; NaN for a task with fewer than k graded attempts."""
    n_eff = np.maximum(n, k)
    hit = np.ones_like(n_eff, dtype=float)
    for j in range(k):
        hit *= np.maximum(c - j, 0.0) / (n_eff - j)
    return np.where(n >= k, hit, np.nan)
