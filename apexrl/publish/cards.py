"""Model and dataset cards (README.md with YAML metadata the Hub reads)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from apexrl import __version__
from apexrl.publish.sessions import HARNESS, SESSIONS_DIR


@dataclass
class EvalEntry:
    """Pass@1 (with its CI) of one eval run, overall and per domain, as fractions."""

    name: str  # run folder name
    dataset: str
    model: str | None
    n_tasks: int | None
    n_trials: int | None
    pass_at_1: tuple[float, float | None, float | None]
    per_domain: dict[str, tuple[float, float | None, float | None, int | None]] = field(
        default_factory=dict
    )
    complete: bool = True  # False: interrupted or ungraded, published with --allow-incomplete
    trials_planned: int | None = None
    trials_done: int | None = None
    trials_ungraded: int = 0  # with a result, but an infrastructure error: not in the figures
    infra_errors: dict[str, int] = field(default_factory=dict)
    task_errors: dict[str, int] = field(default_factory=dict)  # broken tasks: ungraded too

    @property
    def progress(self) -> str:
        """What the figures cover against the plan: "13 of 28 planned trials had a
        result", or with ungraded trials "10 of 12 planned trials graded (...)"."""
        if not self.trials_ungraded:
            return f"{self.trials_done} of {self.trials_planned} planned trials had a result"
        graded = (self.trials_done or 0) - self.trials_ungraded
        return (
            f"{graded} of {self.trials_planned} planned trials graded ({self.trials_ungraded} "
            f"ended in {ungraded_why(self.infra_errors, self.task_errors)})"
        )

    @property
    def incomplete_note(self) -> str:
        if self.trials_ungraded:
            return f"INCOMPLETE: {self.progress}; the figures cover the graded trials only"
        return (
            f"INCOMPLETE: {self.progress} (an interrupted run); the figures cover those trials only"
        )


def _metric(m) -> tuple[float, float | None, float | None] | None:
    if isinstance(m, int | float):
        return float(m), None, None
    if isinstance(m, dict):
        v = m.get("value", m.get("mean", m.get("estimate")))
        if isinstance(v, int | float):
            lo, hi = m.get("ci_low"), m.get("ci_high")
            return (
                float(v),
                lo if isinstance(lo, int | float) else None,
                (hi if isinstance(hi, int | float) else None),
            )
    return None


def eval_entry(name: str, summary: dict, run: dict) -> EvalEntry | None:
    """Read summary.json (+ run.json) of an eval run; None when it has no Pass@1."""
    src = summary.get("metrics") if isinstance(summary.get("metrics"), dict) else summary
    p1 = _metric(src.get("pass_at_1"))
    if p1 is None:
        return None
    per: dict = {}
    for dom, g in (src.get("per_domain") or {}).items():
        if not isinstance(g, dict):
            continue
        m = _metric(g.get("pass_at_1", g))
        if m is not None:
            per[dom] = (*m, g.get("n_tasks"))
    ds = run.get("dataset") or {}
    model = run.get("model") or {}
    return EvalEntry(
        name=name,
        dataset=str(ds.get("source") or "tasks") if isinstance(ds, dict) else str(ds),
        model=(model.get("name") if isinstance(model, dict) else str(model)) or None,
        n_tasks=src.get("n_tasks"),
        n_trials=src.get("n_trials"),
        pass_at_1=p1,
        per_domain=per,
        **_progress(src, run),
    )


def _progress(summary: dict, run: dict) -> dict:
    """complete / trials_planned / trials_done; for a summary.json written before apexrl
    recorded them, from run.json's selection (attempts x tasks, when no domain filter)."""
    if "complete" in summary:
        infra = summary.get("infra_errors")
        return {
            "complete": summary["complete"] is not False,
            "trials_planned": summary.get("trials_planned"),
            "trials_done": summary.get("trials_done"),
            "trials_ungraded": int(summary.get("trials_ungraded") or 0),
            "infra_errors": dict(infra) if isinstance(infra, dict) else {},
            "task_errors": dict(task) if isinstance(task := summary.get("task_errors"), dict)
            else {},
        }  # fmt: skip
    ds, done = run.get("dataset") or {}, summary.get("n_trials")
    n, attempts, limit = ds.get("n_tasks"), run.get("attempts"), run.get("limit")
    if run.get("domains") or not all(isinstance(x, int) for x in (n, attempts, done)):
        return {"complete": True, "trials_planned": None, "trials_done": done}
    planned = attempts * (min(limit, n) if isinstance(limit, int) else n)
    return {"complete": done >= planned, "trials_planned": planned, "trials_done": done}


def ungraded_why(infra: dict[str, int], task: dict[str, int]) -> str:
    """E.g. `an infrastructure error: judge_unavailable 2; a task error: bad_task_rubric 1`."""
    parts = []
    for what, by_class in (("an infrastructure error", infra), ("a task error", task)):
        if by_class:
            why = ", ".join(f"{k} {v}" for k, v in sorted(by_class.items(), key=lambda x: -x[1]))
            parts.append(f"{what}: {why}")
    return "; ".join(parts) or "an infrastructure error"


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6)):
        if n >= size:
            return f"{n / size:,.1f}{unit}"
    return f"{n:,}"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{100 * v:.2f}"


def _ci(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f"[{_pct(lo)}, {_pct(hi)}]"


def _front(meta: dict) -> str:
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n\n"


def eval_table(evals: list[EvalEntry]) -> str:
    rows = ["| run | domain | tasks | Pass@1 (%) | 95% CI |", "|---|---|---|---|---|"]
    for e in evals:
        v, lo, hi = e.pass_at_1
        rows.append(f"| {e.name} | all | {e.n_tasks or ''} | {_pct(v)} | {_ci(lo, hi)} |")
        for dom, (dv, dlo, dhi, n) in sorted(e.per_domain.items()):
            rows.append(f"| {e.name} | {dom} | {n or ''} | {_pct(dv)} | {_ci(dlo, dhi)} |")
    return "\n".join(rows) + "\n"


def model_card(
    *,
    repo: str,
    config: dict,
    base_model: str | None,
    license: str | None,
    evals: list[EvalEntry],
    recipe: str | None,
    manifest: dict | None,
    n_params: int,
    chat_template_source: str | None,
) -> str:
    name = repo.split("/")[-1]
    meta: dict = {}
    if license:
        meta["license"] = license
    if base_model:
        meta["base_model"] = base_model
    meta["library_name"] = "transformers"
    meta["pipeline_tag"] = "text-generation"
    meta["tags"] = ["apexrl", "agents", "reinforcement-learning", "tool-use"]
    if evals:
        results = []
        for e in evals:
            metrics = [
                {"type": "pass@1", "value": round(100 * e.pass_at_1[0], 2), "name": "Pass@1 (all)"}
            ]
            for dom, (dv, *_rest) in sorted(e.per_domain.items()):
                metrics.append(
                    {"type": "pass@1", "value": round(100 * dv, 2), "name": f"Pass@1 ({dom})"}
                )
            results.append(
                {
                    "task": {"type": "text-generation", "name": "Agentic knowledge work"},
                    "dataset": {"name": e.dataset, "type": e.dataset},
                    "metrics": metrics,
                }
            )
        meta["model-index"] = [{"name": name, "results": results}]
    out = [_front(meta), f"# {name}\n\n"]
    arch = ", ".join(config.get("architectures") or []) or config.get("model_type", "")
    out.append(
        f"A {arch} checkpoint ({_count(n_params)} parameters) trained as a tool-using agent "
        "for knowledge work (investment banking, law, management consulting) with reinforcement "
        "learning, published with apexrl.\n\n"
    )
    if base_model:
        out.append(f"- Base model: [{base_model}](https://huggingface.co/{base_model})\n")
    if chat_template_source:
        out.append(f"- Chat template: `{chat_template_source}` (use it: tool calls depend on it)\n")
    if config.get("max_position_embeddings"):
        out.append(f"- Context length: {config['max_position_embeddings']:,} tokens\n")
    out.append("\n## Evaluation\n\n")
    if evals:
        out.append(
            "Pass@1: share of tasks whose every rubric criterion was met, averaged over attempts; "
            "trials that did not complete count as failures. 95% confidence intervals by "
            "bootstrap over tasks.\n\n"
        )
        out.append(eval_table(evals))
        for e in evals:
            if not e.complete:
                out.append(f"\n**{e.name}: {e.incomplete_note}.**\n")
    else:
        out.append("No evaluation was attached (`apexrl publish model --eval RUN_DIR`).\n")
    if recipe or manifest:
        out.append("\n## Training\n\n")
        if recipe:
            out.append("Recipe (`apexrl train`):\n\n```toml\n" + recipe.strip() + "\n```\n\n")
        if manifest:
            out.append(
                "Manifest:\n\n```json\n"
                + json.dumps(manifest, indent=2, sort_keys=True)
                + "\n```\n"
            )
    out.append(
        "\n## Intended use and limits\n\n"
        "For research on tool-using agents in simulated work environments (files, documents, "
        "spreadsheets, slides, mail, chat, calendars). Not evaluated for giving financial, legal "
        "or business advice to people, for safety-critical use, or outside the tool set and "
        "chat template it was trained with; scores come from rubric grading of a fixed task set "
        "and do not transfer automatically to other tasks.\n"
    )
    out.append(f"\n_Card written by apexrl {__version__}._\n")
    return "".join(out)


TRACE_SCHEMA: list[tuple[str, str, str]] = [
    ("trial_id", "string", "trial id (task id + attempt)"),
    ("task_id", "string", "task id"),
    ("domain", "string", "investment-banking, law or management-consulting"),
    ("world_id", "string", "the world (environment) the task runs in"),
    ("attempt", "int32", "attempt number"),
    ("status", "string", "how the trial ended (complete, agent_timeout, error, ...)"),
    ("error_class", "string", "error class when the trial did not complete"),
    ("graded", "bool", "false when the trial ended in an infrastructure error: no score"),
    ("reward", "float64", "the trial's reward (0 for a model failure); null when not graded"),
    ("criteria_met", "int32", "rubric criteria met; null when not graded"),
    ("criteria_total", "int32", "rubric criteria"),
    ("criteria", "list<struct>", "verdicts: id, criterion, met, score, reason, source"),
    ("messages", "list<struct>", "the conversation (role, content, tool_calls as JSON, ...)"),
    ("turns", "int32", "model turns"),
    ("tool_calls", "int32", "tool calls"),
    ("tokens_in", "int64", "prompt tokens"),
    ("tokens_out", "int64", "sampled tokens"),
    ("duration_s", "float64", "wall time of the trial"),
    ("logs", "list<struct>", "trial log files (name, text; last 64 KiB each)"),
]  # fmt: skip
TOKEN_COLUMNS = [
    ("token_ids", "list<int32>", "the exact token stream (prompt, then each turn)"),
    ("loss_mask", "list<int8>", "1 for sampled tokens, 0 for prompt and observation tokens"),
]


def traces_card(
    *,
    repo: str,
    run: dict,
    summary: dict,
    n_rows: int,
    shards: list[str],
    include_tokens: bool,
    license: str | None,
    n_redactions: int,
    ungraded: dict[str, int] | None = None,
    task_errors: dict[str, int] | None = None,
    outside_plan: int = 0,
) -> str:
    meta: dict = {}
    if license:
        meta["license"] = license
    meta["pretty_name"] = repo.split("/")[-1]
    meta["tags"] = ["apexrl", "agent-traces", "tool-use", "trajectories"]
    meta["configs"] = [
        {
            "config_name": "default",
            "data_files": [{"split": "train", "path": "data/train-*.parquet"}],
        },
        {
            "config_name": "sessions",
            "data_files": [{"split": "train", "path": f"{SESSIONS_DIR}/*/*.jsonl"}],
        },
    ]
    model = (
        (run.get("model") or {}).get("name")
        if isinstance(run.get("model"), dict)
        else run.get("model")
    )
    ds = run.get("dataset") or {}
    out = [_front(meta), f"# Agent traces: {model or 'unknown model'}\n\n"]
    out.append(
        f"{n_rows} trials of an `apexrl eval run` (one row per trial) in {len(shards)} Parquet "
        "shard(s) under `data/`. The run's resolved configuration is in `run.json`, its metrics in "
        "`summary.json`.\n\n"
        f"Each trial is also one Session Traces file, `{SESSIONS_DIR}/<task>/<trial>.jsonl` (the "
        f"`sessions` config; harness `{HARNESS}`): a session header, then the system prompt, "
        "the task, every assistant turn with its tool calls and every tool result, which the "
        "Hub's trace viewer renders.\n\n"
    )
    out.append(_graded_note(n_rows, ungraded or {}, task_errors or {}, outside_plan))
    out.append("## Run\n\n")
    facts = [
        ("model", model),
        ("dataset", ds.get("source") if isinstance(ds, dict) else ds),
        ("dataset digest", ds.get("digest") if isinstance(ds, dict) else None),
        ("tasks", ds.get("n_tasks") if isinstance(ds, dict) else None),
        ("attempts", run.get("attempts")),
        ("agent", run.get("agent")),
        ("environment", run.get("environment")),
        ("judge", run.get("judge")),
        ("chat template", run.get("chat_template")),
        ("sampling", json.dumps(run["sampling"], sort_keys=True) if run.get("sampling") else None),
        ("budgets", json.dumps(run["budgets"], sort_keys=True) if run.get("budgets") else None),
        ("apexrl", run.get("apexrl_version")),
    ]
    out.extend(f"- {k}: `{v}`\n" for k, v in facts if v not in (None, ""))
    entry = eval_entry("this run", summary, run) if summary else None
    out.append("\n## Metrics\n\n")
    out.append(eval_table([entry]) if entry else "summary.json has no Pass@1.\n")
    if entry is not None and not entry.complete:
        out.append(f"\n**{entry.incomplete_note}.**\n")
    out.append("\n## Schema\n\n| column | type | description |\n|---|---|---|\n")
    cols = TRACE_SCHEMA + (TOKEN_COLUMNS if include_tokens else [])
    out.extend(f"| {c} | {t} | {d} |\n" for c, t, d in cols)
    out.append(
        "\n## Redaction\n\nBefore upload every text field was scanned for the secrets "
        "apexrl knows of and for credential patterns (cloud keys, tokens, private keys); "
        f"{n_redactions} occurrence(s) were replaced by `[REDACTED:<kind>]`.\n"
    )
    out.append(f"\n_Card written by apexrl {__version__}._\n")
    return "".join(out)


def _graded_note(
    n_rows: int, ungraded: dict[str, int], task: dict[str, int], outside_plan: int
) -> str:
    """How many rows carry a score: an ungraded trial's reward is null, not 0."""
    n = sum(ungraded.values()) + sum(task.values())
    if not n:
        text = f"All {n_rows} trials were graded (`graded` is true on every row)."
    else:
        text = (
            f"**{n} of {n_rows} trials are ungraded** ({ungraded_why(ungraded, task)}): "
            "their `graded` is false and their `reward` and `criteria_met` are null, so they "
            "are no failures of the model; average `reward` over the graded rows only."
        )
    if outside_plan:
        text += (
            f" {outside_plan} trial(s) of the run folder outside the run's plan (an earlier "
            "selection) are left out."
        )
    return text + "\n\n"


def _scanned(scanned: dict[str, int] | None) -> str:
    s = scanned or {}
    return (
        f"{s.get('text', 0)} text file(s) (UTF-8, UTF-16 or any 8-bit encoding), "
        f"{s.get('office/zip', 0)} office document(s) or archive(s) (zip, gzip, tar: every "
        "member), "
        f"{s.get('binary', 0)} binary file(s) (byte patterns, masked in place)"
    )


def dataset_card(
    *,
    repo: str,
    manifest: dict,
    license: str | None,
    shards: list[str],
    n_redactions: int,
    scanned: dict[str, int] | None = None,
) -> str:
    terms = manifest.get("data_terms") if isinstance(manifest.get("data_terms"), dict) else {}
    license = license or terms.get("license")  # the source's, recorded by `tasks pack`
    meta: dict = {"license": license or "other", "pretty_name": repo.split("/")[-1]}
    meta["tags"] = ["apexrl", "agents", "harbor", "tasks"]
    if terms.get("evaluation_only"):
        meta["tags"].append("evaluation-only")
    meta["configs"] = [
        {"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}
    ]
    out = [_front(meta), f"# {repo.split('/')[-1]}\n\n"]
    out.append(
        f"{manifest.get('n_tasks', 0)} agent tasks packed by `apexrl tasks pack`, "
        "one row per task; "
        "`task_binary` is a gzip tar of a Harbor task directory (instruction, environment, "
        "rubric verifier). Unpack with `apexrl tasks unpack hf://"
        f"{repo} -o TASKS`.\n\n"
    )
    out.append(
        f"- Licence: `{license or 'other'}` (set with `--license`; check the source data's terms)\n"
    )
    if terms.get("terms") or terms.get("evaluation_only"):
        mark = "**Evaluation only.** " if terms.get("evaluation_only") else ""
        out.append(f"- Terms of the source data: {mark}{terms.get('terms') or ''}\n")
    out.append(f"- Dataset digest: `{manifest.get('digest', '')}`\n")
    out.append(f"- Shards: {len(shards)}\n\n## Tasks per domain\n\n| domain | tasks |\n|---|---|\n")
    out.extend(f"| {d or '(none)'} | {n} |\n" for d, n in (manifest.get("domains") or {}).items())
    out.append("\n## Tasks per world\n\n| world | tasks |\n|---|---|\n")
    out.extend(f"| {w or '(none)'} | {n} |\n" for w, n in (manifest.get("worlds") or {}).items())
    out.append(
        "\n## Schema\n\n| column | type | description |\n|---|---|---|\n"
        "| path | string | task directory name |\n"
        "| task_binary | binary | gzip tar of the task directory |\n"
        "| task_id | string | task id |\n| world_id | string | world id |\n"
        "| domain | string | domain |\n| sha256 | string | sha256 of task_binary |\n"
        "| size_bytes | int64 | size of task_binary |\n"
    )
    out.append(
        f"\n## Redaction\n\nEvery file inside every task was scanned for secrets and "
        f"credential patterns before upload: {_scanned(scanned)}; "
        f"{n_redactions} occurrence(s) were redacted.\n"
    )
    out.append(f"\n_Card written by apexrl {__version__}._\n")
    return "".join(out)


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
