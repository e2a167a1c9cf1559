"""`apexrl eval report`: one run or a comparison of two, as a table, Markdown,
JSON or a self-contained HTML page with matplotlib plots (PNG inlined as base64).

Metrics are recomputed from the run's results (never from a possibly stale
summary.json), so a report of a run still in progress is exact for what has finished.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path

from apexrl.eval import resume
from apexrl.eval.metric_table import Metric, MetricCI, report_metrics
from apexrl.eval.metrics import Columns, compare, summarize
from apexrl.eval.models import EvalRunConfig, EvalSummary, plan_ids, planned_trials, run_label


@dataclass
class LoadedRun:
    run_dir: Path
    config: EvalRunConfig | None
    cols: Columns
    summary: EvalSummary

    @property
    def incomplete(self) -> str | None:
        """The INCOMPLETE line of an interrupted run, None for a complete one."""
        if self.summary.complete:
            return None
        return incomplete_line(self.summary, self.config, self.run_dir)

    @property
    def label(self) -> str:
        return run_label(self.run_dir, self.config)


def load_run(run_dir: Path) -> LoadedRun:
    from apexrl.errors import UsageError

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a run directory", hint="pass -o RUN_DIR of eval run")
    cols = Columns.from_table(resume.read_results_table(run_dir))
    config = resume.load_config(run_dir)
    ids = plan_ids(config)
    if ids is not None:  # the figures cover the planned trials only
        cols = cols.only_trials(ids)
    return LoadedRun(run_dir, config, cols, summarize(cols, planned=planned_trials(config)))


def resume_command(config: EvalRunConfig | None, run_dir: Path) -> str:
    """The command that resumes the run: the one recorded in run.json, else its shape."""
    if config is not None and config.command:
        return config.command
    return f"apexrl eval run ... -o {run_dir} (the same options)"


def incomplete_line(s: EvalSummary, config: EvalRunConfig | None, run_dir: Path) -> str:
    """What an interrupted run, or one with ungraded trials, says first: what is missing
    and how to get it."""
    parts = []
    if s.trials_planned is not None and s.trials_done < s.trials_planned:
        parts.append(
            f"{s.trials_done} of {s.trials_planned} planned trials have a result; "
            f"resume with: {resume_command(config, run_dir)}"
        )
    if s.trials_ungraded:
        parts.append(ungraded_line(s, run_dir))
    graded = s.trials_done - s.trials_ungraded
    return f"INCOMPLETE: {'; '.join(parts)}; the figures cover the {graded} graded trial(s) only"


def ungraded_line(s: EvalSummary, run_dir: Path) -> str:
    """The ungraded trials: how many, why, and how to recover them (a broken task's are
    the task author's to fix: rerunning fails the same way)."""
    parts = []
    n_infra = sum(s.infra_errors.values())
    n_task = sum(s.task_errors.values())
    if n_infra or not n_task:  # summaries from before task_errors: all infrastructure
        why = ", ".join(f"{k} {v}" for k, v in s.infra_errors.items())
        parts.append(
            f"{s.trials_ungraded - n_task} trial(s) ended in an infrastructure error ({why}) "
            f"and are not scored; grade again those whose agent finished with `apexrl eval "
            f"regrade {run_dir} -o NEW_RUN` (a working --judge), or run them again with "
            "--retry-errors"
        )
    if n_task:
        why = ", ".join(f"{k} {v}" for k, v in s.task_errors.items())
        parts.append(
            f"{n_task} trial(s) ended in a task error ({why}): their task is broken, not the "
            "infrastructure, so they are not scored and --retry-errors does not rerun them; "
            "fix what the messages name (`apexrl tasks validate` checks a task), then rerun "
            "them with --retry-task-errors; a fix that changes the dataset starts the run over "
            "with --force"
        )
    return "; ".join(parts)


def ungraded_names(s: EvalSummary, shown: int = 20) -> str:
    """The ungraded trials by id (the first `shown`; summary.json lists them all)."""
    ids = s.ungraded_trials
    more = f" and {len(ids) - shown} more (all in summary.json)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def pct(x: float) -> str:
    return f"{100 * x:.1f}"


def fmt_ci(m: MetricCI | None) -> str:
    """A figure with its CI; "-" where no task has the graded attempts it needs."""
    if m is None:
        return "-"
    return f"{pct(m.value)}% [{pct(m.ci_low)}, {pct(m.ci_high)}]"


def short_line(s: EvalSummary) -> str | None:
    """How many tasks Pass@k and Pass^k at the report's k leave out (fewer than k graded
    attempts), or None when they cover every task."""
    k = s.attempts_max
    short = s.tasks_short.get(str(k), 0)
    if k < 2 or not short:
        return None
    return (
        f"{s.n_tasks - short} of {s.n_tasks} tasks: {short} have fewer than {k} graded "
        "attempts and are left out (not counted as failures)"
    )


def fmt_delta(d: dict) -> str:
    if d.get("delta") is None:
        return "no shared tasks"
    return f"{100 * d['delta']:+.1f} pts [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"


def summary_line(s: EvalSummary) -> str:
    """One line for a terminal: Pass@1 with its CI, trials, errors by class, unjudged criteria."""
    errs = ", ".join(f"{k} {v}" for k, v in sorted(s.errors.items(), key=lambda kv: -kv[1]))
    unjudged = f"; {s.criteria_unjudged} criteria unjudged" if s.criteria_unjudged else ""
    partial = "" if s.complete else f"INCOMPLETE ({s.trials_done}/{s.trials_planned} trials): "
    infra = ", ".join(f"{k} {v}" for k, v in {**s.infra_errors, **s.task_errors}.items())
    ungraded = f" ({s.trials_ungraded} ungraded: {infra})" if s.trials_ungraded else ""
    return (
        f"{partial}Pass@1 {fmt_ci(s.pass_at_1)} over {s.n_tasks} task(s), "
        f"{s.n_trials} graded trial(s){ungraded}; errors: {errs or 'none'}{unjudged}"
    )


def pct_or_dash(x: float | None) -> str:
    return "-" if x is None else pct(x)


# --- rows shared by table and Markdown --------------------------------------------------


def summary_rows(s: EvalSummary, incomplete: str | None = None) -> list[tuple[str, str]]:
    """Rows of one run's summary; `incomplete` (incomplete_line) goes first when set."""
    rows = [
        ("tasks / trials", f"{s.n_tasks} / {s.n_trials}"),
        (
            "attempts per task",
            str(s.attempts_max)
            if s.attempts_min == s.attempts_max
            else f"{s.attempts_min}-{s.attempts_max}",
        ),
    ]
    if s.trials_planned is not None:
        rows.insert(1, ("trials done / planned", f"{s.trials_done} / {s.trials_planned}"))
    n_task = sum(s.task_errors.values())
    if n_task:  # beside the counts: the metrics below leave these out
        why = ", ".join(f"{k}: {v}" for k, v in s.task_errors.items())
        rows.insert(2, ("ungraded (task errors)", f"{n_task} ({why})"))
    if s.trials_ungraded > n_task:
        infra = ", ".join(f"{k}: {v}" for k, v in s.infra_errors.items())
        rows.insert(2, ("ungraded (infrastructure)", f"{s.trials_ungraded - n_task} ({infra})"))
    if s.criteria_unjudged:  # first, before any score: those scores are not the benchmark's
        rows.insert(0, ("WARNING", unjudged_line(s.criteria_unjudged)))
    if incomplete:
        rows.insert(0, ("INCOMPLETE", incomplete.removeprefix("INCOMPLETE: ")))
    rows += [(m.label, fmt_ci(m.value_in(s))) for m in report_metrics(s.attempts_max)]
    if short := short_line(s):
        rows.append((f"Pass@{s.attempts_max} / Pass^{s.attempts_max} over", short))
    rows.append(("errors", ", ".join(f"{k}: {v}" for k, v in s.errors.items()) or "none"))
    rows.append(
        (
            "infrastructure errors",
            ", ".join(f"{k}: {v}" for k, v in s.infra_errors.items()) or "none",
        )
    )
    if s.task_errors:
        rows.append(("task errors", ", ".join(f"{k}: {v}" for k, v in s.task_errors.items())))
    for cls, msgs in s.error_messages.items():
        for msg, n in msgs.items():
            rows.append((f"  {cls}", f"{n} x {msg}"))
    rows.append(("mean turns", f"{s.turns_mean:.1f}"))
    rows.append(("mean tokens in / out", f"{s.tokens_in_mean:,.0f} / {s.tokens_out_mean:,.0f}"))
    rate = s.tool_call_success_rate
    rows.append(
        (
            "tool calls (success)",
            f"{s.tool_calls_total} ({'-' if rate is None else pct(rate) + '%'})",
        )
    )
    return rows


def domain_rows(s: EvalSummary) -> tuple[list[str], list[list[str]]]:
    # the metrics without k first, the k columns last
    ms = sorted(report_metrics(s.attempts_max), key=lambda m: m.k is not None)
    head = ["domain", "tasks", *(m.label for m in ms)]
    rows = [
        [dom, str(g.n_tasks), *(fmt_ci(m.value_in(g)) for m in ms)]
        for dom, g in s.per_domain.items()
    ]
    return head, rows


def unjudged_line(n: int) -> str:
    return (
        f"{n} criteria unjudged (free text, run with --no-judge): counted as unmet, "
        "so Pass@1 and mean score understate the run"
    )


def _judge_label(judge: str | None) -> str:
    from apexrl.grading.requirements import judge_model  # the one reading of "none"

    if judge is None:
        return "deterministic criteria only"
    return judge_model(judge) or "none (--no-judge): free-text criteria unjudged"


def compare_rows(cmp: dict) -> tuple[list[str], list[list[str]]]:
    """One row per scope and metric; the last column says which tasks A, B and the
    delta are over (the shared tasks when there are any), so no row mixes scopes."""
    head = ["scope", "metric", "A", "B", "delta (B - A) [95% CI]", "over"]
    rows = []
    scopes = [("all", cmp["overall"]), *cmp["per_domain"].items()]
    for scope, group in scopes:
        over = _over(group)
        for name, d in group["metrics"].items():
            metric = Metric.from_name(name)
            if scope != "all" and metric.k is not None:  # domains: the metrics without k
                continue
            rows.append(
                [
                    scope,
                    metric.label,
                    pct_or_dash(d["a"]),
                    pct_or_dash(d["b"]),
                    fmt_delta(d),
                    over,
                ]
            )
    return head, rows


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _over(group: dict) -> str:
    if group["paired"]:
        return f"{_tasks(group['n_shared_tasks'])} shared"
    a, b = group["n_tasks_a"], group["n_tasks_b"]
    if a and b:
        return f"A {a}, B {_tasks(b)}, none shared (unpaired)"
    return f"A only, {_tasks(a)}" if a else f"B only, {_tasks(b)}"


def config_rows(c: EvalRunConfig | None) -> list[tuple[str, str]]:
    if c is None:
        return []
    b, s = c.budgets, c.sampling
    return [
        ("model", f"{c.model.name}" + (f" @ {c.model.revision[:12]}" if c.model.revision else "")),
        ("engine", f"{c.engine.kind}" + (f" ({c.engine.version})" if c.engine.version else "")),
        ("agent / environment", f"{c.agent} / {c.environment}"),
        ("judge", _judge_label(c.judge)),
        ("budgets", f"max_steps {b.max_steps}, agent timeout {b.agent_timeout_s:g}s"),
        (
            "sampling",
            f"temperature {s.temperature:g}, top_p {s.top_p:g}, max_tokens "
            + (str(s.max_tokens) if s.max_tokens is not None else "engine default"),
        ),
        ("dataset", f"{c.dataset.source} ({c.dataset.n_tasks} tasks, {c.dataset.digest[:19]})"),
        ("apexrl", c.apexrl_version),
    ]


# --- table (Rich) ------------------------------------------------------------------


def print_table(runs: list[LoadedRun], console) -> None:
    from rich.table import Table

    for r in runs:
        if r.incomplete:
            from rich.text import Text  # no markup: labels and commands may hold [ ]

            console.print(Text.assemble((r.label, "bold red"), ": ", r.incomplete))
    if len(runs) == 1:
        r = runs[0]
        t = Table(title=f"eval {r.label}", show_header=False)
        t.add_column("metric", style="bold")
        t.add_column("value")
        for k, v in config_rows(r.config) + summary_rows(r.summary, r.incomplete):
            t.add_row(k, v)
        console.print(t)
        head, rows = domain_rows(r.summary)
        d = Table(title="per domain (95% CI)")
        for h in head:
            d.add_column(h)
        for row in rows:
            d.add_row(*row)
        console.print(d)
        return
    head, rows = compare_rows(compare(runs[0].cols, runs[1].cols))
    t = Table(title=f"A = {runs[0].label}   B = {runs[1].label}")
    for h in head:
        t.add_column(h)
    for row in rows:
        t.add_row(*row)
    console.print(t)


# --- Markdown ------------------------------------------------------------------------


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_md(runs: list[LoadedRun]) -> str:
    if len(runs) == 1:
        r = runs[0]
        parts = [f"# Eval: {r.label}", ""]
        if r.incomplete:
            parts += [f"> **{r.incomplete}**", ""]
        kv = config_rows(r.config) + summary_rows(r.summary, r.incomplete)
        parts.append(_md_table(["", ""], [[k, v] for k, v in kv]))
        parts += ["", "## Per domain", "", _md_table(*domain_rows(r.summary)), ""]
        parts.append(
            "Pass@1 is the mean over attempts; intervals are 95% bootstrap CIs over tasks; "
            "trials the model failed score 0; trials that ended in an infrastructure error "
            "or a task error (a broken task) are ungraded: not in the figures, counted apart."
        )
        return "\n".join(parts) + "\n"
    cmp = compare(runs[0].cols, runs[1].cols)
    parts = [
        f"# Eval comparison: A = {runs[0].label}, B = {runs[1].label}",
        "",
        *[f"> **{r.label}: {r.incomplete}**\n" for r in runs if r.incomplete],
        _compare_note(cmp),
        "",
        _md_table(*compare_rows(cmp)),
    ]
    return "\n".join(parts) + "\n"


def _compare_note(cmp: dict) -> str:
    o = cmp["overall"]
    how = "paired over" if o["paired"] else "unpaired (no shared tasks);"
    return (
        f"{cmp['n_tasks_a']} tasks in A, {cmp['n_tasks_b']} in B; deltas {how} "
        f"{o['n_shared_tasks']} shared tasks, 95% bootstrap CIs."
    )


# --- JSON ----------------------------------------------------------------------------


def render_json(runs: list[LoadedRun]) -> dict:
    if len(runs) == 1:
        r = runs[0]
        return {
            **_progress(r),
            "run_dir": str(r.run_dir),
            "config": r.config.model_dump(mode="json") if r.config else None,
            "summary": r.summary.model_dump(mode="json"),
        }
    return {
        "complete": all(r.summary.complete for r in runs),
        "a": {
            **_progress(runs[0]),
            "run_dir": str(runs[0].run_dir),
            "summary": runs[0].summary.model_dump(mode="json"),
        },
        "b": {
            **_progress(runs[1]),
            "run_dir": str(runs[1].run_dir),
            "summary": runs[1].summary.model_dump(mode="json"),
        },
        "comparison": compare(runs[0].cols, runs[1].cols),
    }


def _progress(r: LoadedRun) -> dict:
    """complete / trials_planned / trials_done first, and how to resume when incomplete."""
    s = r.summary
    out = {"complete": s.complete, "trials_planned": s.trials_planned, "trials_done": s.trials_done}
    if not s.complete:
        out["resume"] = resume_command(r.config, r.run_dir)
    return out


# --- HTML ----------------------------------------------------------------------------


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


COLORS = ["#3b6fb6", "#e07b39"]


def _legend_below(ax, ncol: int) -> None:
    """The legend under the axes, where it cannot cover a bar or a line."""
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol, frameon=False)


def plot_scope(runs: list[LoadedRun]) -> tuple[list[Columns], str]:
    """What the plots of a page are over: each run's own rows, or for a comparison
    the tasks both runs have (as its table is), with words saying which."""
    if len(runs) == 1:
        return [runs[0].cols], ""
    shared = sorted(set(runs[0].cols.task_id.tolist()) & set(runs[1].cols.task_id.tolist()))
    if not shared:
        return [r.cols for r in runs], " (each run's own tasks: none shared)"
    return [r.cols.only_tasks(shared) for r in runs], f" ({len(shared)} shared tasks)"


def make_plots(runs: list[LoadedRun]) -> dict[str, str]:
    """plot_figures(runs) as inline PNG data URLs."""
    return {name: _png(fig) for name, fig in plot_figures(runs).items()}


def plot_figures(runs: list[LoadedRun]) -> dict:
    """Per-domain Pass@1 bars (with CIs and their values), the pass@k / pass^k curve
    (when some run has k > 1), and the distribution of trial scores; one series per
    run. For a comparison, all of them over the tasks both runs have."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    cols, scope = plot_scope(runs)
    sums = [summarize(c) for c in cols]
    plots = {}
    # per-domain Pass@1
    domains = sorted({d for s in sums for d in s.per_domain})
    labels = [*domains, "all"]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / len(runs)
    x = np.arange(len(labels))
    for i, (r, s) in enumerate(zip(runs, sums, strict=True)):
        ms = [s.per_domain[d].pass_at_1 if d in s.per_domain else None for d in domains]
        ms.append(s.pass_at_1 if s.n_tasks else None)
        xs = x + (i - (len(runs) - 1) / 2) * width
        have = [j for j, m in enumerate(ms) if m is not None]
        v = np.array([ms[j].value for j in have]) * 100
        err = np.array(
            [
                [ms[j].value - ms[j].ci_low for j in have],
                [ms[j].ci_high - ms[j].value for j in have],
            ]
        )
        ax.bar(
            xs[have],
            v,
            width,
            yerr=err * 100,
            capsize=3,
            color=COLORS[i],
            edgecolor=COLORS[i],
            linewidth=1.2,  # a 0% bar still draws its edge on the axis
            label=r.label,
        )
        for j in have:  # the value over each bar (and its CI): 0% reads as 0%, not as no bar
            ax.text(
                xs[j],
                ms[j].ci_high * 100 + 2,
                f"{ms[j].value * 100:.0f}%",
                ha="center",
                va="bottom",
                fontsize=7,
                color=COLORS[i],
            )
        for j in set(range(len(ms))) - set(have):
            ax.text(xs[j], 2, "n/a", ha="center", va="bottom", fontsize=7, color="#777")
    ax.set_xticks(x, labels, rotation=0, fontsize=8)
    ax.set_ylabel("Pass@1 (%)")
    ax.set_ylim(0, 115)
    ax.set_yticks([0, 20, 40, 60, 80, 100])
    ax.set_title("Pass@1 per domain (95% CI)" + scope)
    _legend_below(ax, len(runs))
    plots["domains"] = fig
    # pass@k curve: only where some run has more than one attempt per task
    kmax = max((max((int(k) for k in s.pass_at_k), default=1) for s in sums), default=1)
    if kmax > 1:
        fig, ax = plt.subplots(figsize=(7, 3.8))
        for i, (r, s) in enumerate(zip(runs, sums, strict=True)):
            ks = sorted(int(k) for k in s.pass_at_k)
            if not ks:
                continue
            at = [s.pass_at_k[str(k)] for k in ks]
            hat = [s.pass_hat_k[str(k)] for k in ks]
            for series, style, name in ((at, "-o", "Pass@k"), (hat, "--s", "Pass^k")):
                v = np.array([m.value for m in series]) * 100
                ax.plot(ks, v, style, color=COLORS[i], label=f"{name} {r.label}")
                ax.fill_between(
                    ks,
                    [m.ci_low * 100 for m in series],
                    [m.ci_high * 100 for m in series],
                    color=COLORS[i],
                    alpha=0.12,
                )
        ax.set_xlim(0.5, kmax + 0.5)  # whole attempts, whatever k each run reached
        if kmax <= 12:
            ax.set_xticks(range(1, kmax + 1))
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("k (attempts)")
        ax.set_ylabel("%")
        ax.set_ylim(-4, 106)  # a 0% or 100% point is drawn whole, not cut by the frame
        ax.set_title("Pass@k and Pass^k" + scope)
        _legend_below(ax, 2)
        plots["passk"] = fig
    # reward distribution
    fig, ax = plt.subplots(figsize=(7, 3.8))
    bins = np.linspace(0, 1, 11)
    for i, (r, c) in enumerate(zip(runs, cols, strict=True)):
        ax.hist(
            c.score(), bins=bins, alpha=0.6, color=COLORS[i], edgecolor=COLORS[i], label=r.label
        )
    ax.set_xlabel("trial score (fraction of criteria met; 0 if not completed)")
    ax.set_ylabel("trials")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Reward distribution" + scope)
    _legend_below(ax, len(runs))
    plots["rewards"] = fig
    return plots


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:60rem;color:#1d2433;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
td,th{border:1px solid #d7dbe3;padding:.3rem .6rem;text-align:left}
th{background:#f1f3f7}img{max-width:100%;display:block;margin:.5rem 0}
.note{color:#5a6272;font-size:.85rem}
.incomplete{background:#fff4d6;border:1px solid #e6c46a;padding:.4rem .7rem;font-weight:600}
.viewer{background:#eef3fb;border:1px solid #c8d6ee;padding:.5rem .8rem;border-radius:4px}
"""


def _html_table(head: list[str] | None, rows: list[list[str]]) -> str:
    out = ["<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def errors_rows(runs: list[LoadedRun]) -> tuple[list[str], list[list[str]]]:
    """Trials per error class and, under each, per distinct message; a column per run."""
    names = [r.label for r in runs] if len(runs) == 1 else ["A", "B"][: len(runs)]
    rows = []
    model = {k for r in runs for k in r.summary.errors}
    infra = {k for r in runs for k in r.summary.infra_errors}
    task = {k for r in runs for k in r.summary.task_errors}
    for cls in sorted(model) + sorted(infra - model) + sorted(task - model - infra):
        label = (
            f"{cls} (infrastructure: ungraded)"
            if cls in infra
            else f"{cls} (task error: ungraded)"
            if cls in task
            else cls
        )
        n = (
            r.summary.errors.get(cls, 0)
            + r.summary.infra_errors.get(cls, 0)
            + r.summary.task_errors.get(cls, 0)
            for r in runs
        )
        rows.append([label, "(all)", *(str(x) for x in n)])
        msgs = sorted({m for r in runs for m in r.summary.error_messages.get(cls, {})})
        for m in msgs:
            counts = (str(r.summary.error_messages.get(cls, {}).get(m, 0)) for r in runs)
            rows.append([cls, m, *counts])
    return ["error class", "message", *(f"trials ({n})" for n in names)], rows


def each_run_rows(runs: list[LoadedRun]) -> tuple[list[str], list[list[str]]]:
    """Each run of a comparison over all its own tasks, side by side."""
    head = ["", *(f"{n}: {r.label}" for n, r in zip("AB", runs, strict=False))]
    per = [dict(summary_rows(r.summary, r.incomplete)) for r in runs]
    keys: list[str] = []
    for p in per:
        keys += [k for k in p if k not in keys]
    return head, [[k, *(p.get(k, "-") for p in per)] for k in keys]


def viewer_link(runs: list[LoadedRun], page: Path | None) -> str:
    """A paragraph linking to the runs' trial viewer (`apexrl eval view`), or saying
    the command that writes it where this link points."""
    import os
    import shlex

    from apexrl.eval.viewer import default_view_path

    target = default_view_path([r.run_dir for r in runs])
    base = (page or runs[0].run_dir / "report.html").resolve().parent
    href = os.path.relpath(target.resolve(), base)
    from urllib.parse import quote

    link = f'<a href="{html.escape(quote(href))}">{html.escape(href)}</a>'
    cmd = "apexrl eval view " + " ".join(shlex.quote(str(r.run_dir)) for r in runs)
    if target.is_file():
        return (
            f"<p class=viewer>Every trial's transcript, criteria verdicts and errors: {link} "
            f"(remake it with <code>{html.escape(cmd)}</code>).</p>"
        )
    return (
        "<p class=viewer>Every trial's transcript, criteria verdicts and errors: run "
        f"<code>{html.escape(cmd)}</code>, then open {link}.</p>"
    )


def render_html(runs: list[LoadedRun], *, page: Path | None = None) -> str:
    """The report page; `page` is where it will be written (for the viewer's link)."""
    plots = make_plots(runs)
    if len(runs) == 1:
        r = runs[0]
        title = f"Eval: {r.label}"
        body = [
            f"<h1>{html.escape(title)}</h1>",
            viewer_link(runs, page),
            _html_table(None, [list(x) for x in summary_rows(r.summary, r.incomplete)]),
            "<h2>Per domain</h2>",
            _html_table(*domain_rows(r.summary)),
        ]
    else:
        cmp = compare(runs[0].cols, runs[1].cols)
        title = f"Eval comparison: A = {runs[0].label}, B = {runs[1].label}"
        body = [
            f"<h1>{html.escape(title)}</h1>",
            *[
                f"<p class=incomplete>{html.escape(f'{r.label}: {r.incomplete}')}</p>"
                for r in runs
                if r.incomplete
            ],
            viewer_link(runs, page),
            f"<p class=note>{html.escape(_compare_note(cmp))}</p>",
            _html_table(*compare_rows(cmp)),
            "<h2>Each run over all its tasks</h2>",
            _html_table(*each_run_rows(runs)),
        ]
    head, rows = errors_rows(runs)
    body += ["<h2>Errors by class</h2>", _html_table(head, rows) if rows else "<p>none</p>"]
    body += ["<h2>Plots</h2>", f'<img alt="Pass@1 per domain" src="{plots["domains"]}">']
    if "passk" in plots:
        body.append(f'<img alt="Pass@k curve" src="{plots["passk"]}">')
    else:
        body.append(
            "<p class=note>No Pass@k curve: one attempt per task (k = 1), where Pass@k and "
            "Pass^k equal Pass@1. Run with -k N for it.</p>"
        )
    body.append(f'<img alt="Reward distribution" src="{plots["rewards"]}">')
    for r in runs:
        if r.config is not None:
            body += [
                f"<h2>Configuration: {html.escape(r.label)}</h2>",
                _html_table(None, [list(x) for x in config_rows(r.config)]),
            ]
    body.append(
        "<p class=note>Pass@1 is the mean over attempts; Pass@k / Pass^k are the unbiased "
        "estimators; intervals are 95% percentile bootstrap CIs over tasks; trials the model "
        "failed score 0 and are counted; trials that ended in an infrastructure error or a "
        "task error (a broken task) are ungraded: not in the figures, counted apart.</p>"
    )
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
