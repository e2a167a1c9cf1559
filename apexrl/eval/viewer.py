"""`apexrl eval view`: one self-contained HTML page to browse runs trial by trial.

The page holds an index (one row per trial: status, score, criteria met, error class and
message, turns, tokens, time) and, per trial, its transcript (apexrl.eval.transcript)
as gzip + base64 in its own inert <script type="text/plain"> element, placed after the
page's code. The table is drawn from the index alone; a transcript is decoded only when
it is opened (the browser's DecompressionStream), so the page is usable at once on a
3,840-trial run. It loads nothing: a Content-Security-Policy forbids every fetch, and
every value is put into the page as text, never as markup.
"""

from __future__ import annotations

import base64
import gzip
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import orjson

from apexrl.eval import resume
from apexrl.eval.metrics import Columns, summarize
from apexrl.eval.models import EvalRunConfig, plan_ids, planned_trials, run_label
from apexrl.eval.transcript import DEFAULT_CAP, read_trial

VIEW_FILE = "viewer.html"
INDEX_COLUMNS = (
    "run",
    "trial",
    "task",
    "task_id",
    "domain",
    "attempt",
    "status",
    "passed",
    "score",
    "met",
    "total",
    "error_class",
    "error",
    "turns",
    "tokens_in",
    "tokens_out",
    "tool_calls",
    "duration_s",
    "ungraded",  # 1: an infrastructure error, in no pass rate or score
)
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'{beside}; style-src 'unsafe-inline'; "
    "img-src data:; connect-src 'none'"
)
EMBED_LIMIT = 32 << 20  # packed transcripts up to this size go in the page; beyond, beside it


def default_view_path(run_dirs: Sequence[Path]) -> Path:
    """RUN/viewer.html for one run; RUN_A/viewer-vs-<B>[-<C>...].html for several."""
    first = Path(run_dirs[0])
    if len(run_dirs) == 1:
        return first / VIEW_FILE
    others = "-".join(Path(r).resolve().name for r in run_dirs[1:])
    return first / f"viewer-vs-{others}.html"


@dataclass
class ViewRun:
    run_dir: Path
    config: EvalRunConfig | None
    rows: list[dict]
    summary: dict
    transcripts: list[bytes] = field(default_factory=list)  # gzip of each row's transcript

    @property
    def label(self) -> str:
        return run_label(self.run_dir, self.config)


def _task_name(trial_id: str) -> str:
    base, sep, att = trial_id.rpartition(".a")
    return base if sep and att.isdigit() else trial_id


def load_view_run(run_dir: Path) -> ViewRun:
    """A run's rows in (task, attempt) order, each with its pass and score as the
    metrics count them, and the run's headline figures."""
    from apexrl.errors import UsageError

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a run directory", hint="pass -o RUN_DIR of eval run")
    table = resume.read_results_table(run_dir)
    config = resume.load_config(run_dir)
    ids = plan_ids(config)
    rows = [r for r in table.to_pylist() if ids is None or r.get("trial_id") in ids]
    rows.sort(key=lambda r: (str(r.get("task_id")), r.get("attempt") or 0))
    cols = Columns.from_rows(rows)  # the same (task, attempt) order: a stable sort
    passed, score = cols.passed().tolist(), cols.score().tolist()
    ungraded = cols.ungraded().tolist()
    for r, p, s, u in zip(rows, passed, score, ungraded, strict=True):
        r["passed"], r["score"], r["ungraded"] = bool(p), float(s), bool(u)
    s = summarize(cols, planned=planned_trials(config))
    summary = {
        "n_tasks": s.n_tasks,
        "n_trials": s.n_trials,
        "attempts": s.attempts_max,
        "pass_at_1": s.pass_at_1.model_dump(),
        "mean_score": s.mean_score.model_dump(),
        "errors": s.errors,
        "trials_ungraded": s.trials_ungraded,
        "infra_errors": s.infra_errors,
        "task_errors": s.task_errors,
        "error_messages": s.error_messages,
        "criteria_unjudged": s.criteria_unjudged,
        "complete": s.complete,
        "trials_planned": s.trials_planned,
        "trials_done": s.trials_done,
        "resume": (config.command if config else None) or f"apexrl eval run ... -o {run_dir}",
    }
    return ViewRun(run_dir, config, rows, summary)


def pack_transcript(transcript: dict) -> bytes:
    return gzip.compress(orjson.dumps(transcript), compresslevel=6, mtime=0)


def _pack_one(args: tuple[str, str, int]) -> tuple[bytes, str | None]:
    run_dir, trial_id, cap = args
    t = read_trial(Path(run_dir), trial_id, cap=cap)
    return pack_transcript(t), t.get("error")


def read_transcripts(
    run: ViewRun, *, cap: int = DEFAULT_CAP, on_trial: Callable[[], None] | None = None
) -> None:
    """Each row's packed transcript, and its error message where the row has none.
    Many trials: read in worker processes (a real ATIF file carries every step's
    prompt token ids, megabytes to parse per trial)."""
    jobs = [(str(run.run_dir), str(r["trial_id"]), cap) for r in run.rows]
    workers = min(len(os.sched_getaffinity(0)), 8) if len(jobs) >= 64 else 1
    if workers > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            results = []
            for res in pool.map(_pack_one, jobs, chunksize=16):
                results.append(res)
                if on_trial:
                    on_trial()
    else:
        results = []
        for job in jobs:
            results.append(_pack_one(job))
            if on_trial:
                on_trial()
    run.transcripts = [blob for blob, _ in results]
    for r, (_, msg) in zip(run.rows, results, strict=True):
        if not r.get("error_message") and msg and (r.get("error_class") or not r["passed"]):
            r["error_message"] = msg


def build_index(runs: Sequence[ViewRun], *, cap: int) -> dict:
    out_rows = []
    for i, run in enumerate(runs):
        for r in run.rows:
            tid = str(r["trial_id"])
            tin, tout = int(r.get("tokens_in") or 0), int(r.get("tokens_out") or 0)
            out_rows.append(
                [
                    i,
                    tid,
                    _task_name(tid),
                    str(r.get("task_id") or ""),
                    str(r.get("domain") or ""),
                    int(r.get("attempt") or 0),
                    str(r.get("status") or ""),
                    1 if r["passed"] else 0,
                    round(r["score"], 4),
                    int(r.get("criteria_met") or 0),
                    int(r.get("criteria_total") or 0),
                    r.get("error_class"),
                    r.get("error_message"),
                    int(r.get("turns") or 0),
                    tin,
                    tout,
                    int(r.get("tool_calls") or 0),
                    round(float(r.get("duration_s") or 0.0), 2),
                    1 if r["ungraded"] else 0,
                ]
            )
    return {
        "runs": [
            {
                "label": run.label,
                "dir": str(run.run_dir.resolve()),
                "config": _config_summary(run.config),
                "summary": run.summary,
            }
            for run in runs
        ],
        "cols": list(INDEX_COLUMNS),
        "rows": out_rows,
        "cap": cap,
    }


def _config_summary(c: EvalRunConfig | None) -> dict:
    if c is None:
        return {}
    return {
        "model": c.model.name,
        "agent": c.agent,
        "environment": c.environment,
        "judge": c.judge,
        "engine": c.engine.kind,
        "max_steps": c.budgets.max_steps,
        "temperature": c.sampling.temperature,
        "attempts": c.attempts,
        "dataset": c.dataset.source,
        "created_at": c.created_at,
    }


def _asset(name: str) -> str:
    return resources.files("apexrl.eval").joinpath("viewer_assets", name).read_text("utf-8")


def _script_json(obj) -> str:
    """JSON safe inside a <script> element: no '<' can close it or open a comment."""
    return orjson.dumps(obj).decode().replace("<", "\\u003c")


def beside_folder(page: Path) -> Path:
    """Where a page's transcripts go when they are not embedded: <page>_files/."""
    return page.with_name(page.stem + "_files")


def should_embed(runs: Sequence[ViewRun]) -> bool:
    return sum(len(b) for run in runs for b in run.transcripts) <= EMBED_LIMIT


def write_beside(folder: Path, runs: Sequence[ViewRun]) -> None:
    """One small script per transcript (t<row>.js), loaded by the page when the trial
    is opened (a file:// page may load scripts beside it, never fetch files); the
    folder is replaced as a whole."""
    from apexrl.artifacts.atomic import atomic_dir

    blobs = [b for run in runs for b in run.transcripts]
    with atomic_dir(folder, force=True, marker=False) as tmp:
        for i, b in enumerate(blobs):
            text = base64.b64encode(b).decode()
            (tmp / f"t{i}.js").write_text(f'apexTranscript({i},"{text}");\n')


def render_viewer(
    runs: Sequence[ViewRun],
    *,
    cap: int = DEFAULT_CAP,
    inline: bool = False,
    beside: str | None = None,
) -> str:
    """The page. Transcripts embedded (gzip + base64 per trial), or with `beside` (the
    folder's name relative to the page) left to write_beside. `inline` embeds every
    transcript as plain JSON in the index, parsed at load (the naive page, kept as the
    benchmark's peer)."""
    import html

    index = build_index(runs, cap=cap)
    blobs = [b for run in runs for b in run.transcripts]
    if inline:
        index["inline"] = [orjson.loads(gzip.decompress(b)) for b in blobs]
        index["page"] = 0  # every row drawn at once
    if beside:
        index["beside"] = beside
    title = "apexrl eval view: " + " vs ".join(r.label for r in runs)
    csp = CSP.format(beside=" file:" if beside else "")
    parts = [
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">',
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_asset('viewer.css')}</style></head>",
        "<body><noscript>This page needs JavaScript to show the runs.</noscript>",
        '<div id="app"></div>',
        f'<script type="application/json" id="apx-index">{_script_json(index)}</script>',
        f"<script>{_asset('viewer.js')}</script>",
    ]
    if not inline and not beside:
        parts.append('<div id="apx-blobs" hidden>')
        parts.extend(
            f'<script type="text/plain" id="b{i}">{base64.b64encode(b).decode()}</script>'
            for i, b in enumerate(blobs)
        )
        parts.append("</div>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
