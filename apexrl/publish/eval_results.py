"""`.eval_results/<benchmark>.yaml`: a model's scores as the Hub shows them on the model page
and on the benchmark's leaderboard. Each file is a list of results, one per eval run on
that benchmark: `dataset` (`id`: the benchmark's Hub dataset, `task_id`, `revision` when the
run pinned one), `value` (Pass@1 in percent), `date`, `source` (`url`, `name`) and `notes`
(the run's 95% CI, tasks, attempts and judge). The `model-index` in the card is the older
way; both are written."""

from __future__ import annotations

import re

import yaml

from apexrl.errors import UsageError
from apexrl.publish.cards import EvalEntry

EVAL_DIR = ".eval_results"
DEFAULT_TASK = "default"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")


def parse_benchmark(text: str) -> tuple[str, str]:
    """`ORG/NAME[:TASK]` of `--benchmark` -> (dataset id, task id)."""
    ds, _, task = text.partition(":")
    if not _HUB_ID.match(ds) or ".." in ds:
        raise UsageError(
            f"--benchmark {text!r} is not a Hub dataset id",
            hint="use ORG/NAME or ORG/NAME:TASK (the task id of the benchmark's eval.yaml)",
        )
    return ds, task or DEFAULT_TASK


def hub_dataset(source: str) -> tuple[str, str | None] | None:
    """(dataset id, revision) of a run's dataset when it came from the Hub
    (`hf://ORG/NAME[@REV]`, or a bare ORG/NAME); None for a local folder or stdin."""
    text = source.removeprefix("hf://")
    if text.startswith(("/", ".", "~")) or " " in text:
        return None
    name, _, rev = text.partition("@")
    name = name.removeprefix("datasets/")
    if not _HUB_ID.match(name):
        return None
    return name, (rev if _HEX40.match(rev) else None)


def result(
    entry: EvalEntry, run: dict, *, dataset: str, task: str, revision: str | None, source: dict
) -> dict:
    """One result record of the list a `.eval_results` file holds."""
    v, lo, hi = entry.pass_at_1
    ds: dict = {"id": dataset, "task_id": task}
    if revision:
        ds["revision"] = revision
    out: dict = {"dataset": ds, "value": round(100 * v, 2)}
    created = run.get("created_at")
    if isinstance(created, str) and created:
        out["date"] = created
    out["source"] = source
    out["notes"] = _notes(entry, run, lo, hi)
    return out


def _notes(entry: EvalEntry, run: dict, lo: float | None, hi: float | None) -> str:
    parts = ["Pass@1 (%)"]
    if lo is not None and hi is not None:
        parts.append(f"95% CI [{100 * lo:.2f}, {100 * hi:.2f}] (bootstrap over tasks)")
    if entry.n_tasks:
        parts.append(f"{entry.n_tasks} tasks")
    if run.get("attempts"):
        parts.append(f"{run['attempts']} attempt(s) per task")
    judge = run.get("judge")
    judge = judge.get("model") if isinstance(judge, dict) else judge
    if isinstance(judge, str) and judge:
        parts.append(f"judge {judge}")
    parts.append(f"apexrl eval run {entry.name}")
    if not entry.complete:
        parts.append(entry.incomplete_note)
    return "; ".join(parts)


def eval_results_files(
    runs: list[tuple[EvalEntry, dict]],
    *,
    repo: str,
    benchmark: str | None = None,
    source_url: str | None = None,
) -> tuple[dict[str, str], list[str]]:
    """{repo path: YAML text} for the runs whose benchmark is known (their dataset's Hub id,
    or `benchmark`), and the names of the runs left out (a local dataset, no --benchmark)."""
    if source_url is not None and not re.match(r"^https://[^\s/]+/\S*$", source_url):
        raise UsageError(
            f"--eval-source {source_url!r} is not an https URL",
            hint="give the page the scores come from, e.g. https://huggingface.co/datasets/ORG/NAME",
        )
    by_file: dict[str, list[dict]] = {}
    names: dict[str, str] = {}
    left_out = []
    for entry, run in runs:
        ds_src = run.get("dataset") or {}
        src = ds_src.get("source") if isinstance(ds_src, dict) else ds_src
        if benchmark:
            (dataset, task), revision = parse_benchmark(benchmark), None
        else:
            found = hub_dataset(str(src or ""))
            if found is None:
                left_out.append(entry.name)
                continue
            (dataset, revision), task = found, DEFAULT_TASK
        source = {
            "url": source_url or f"https://huggingface.co/{repo}",
            "name": f"apexrl eval run {entry.name}" + ("" if source_url else " (model card)"),
        }
        path = _file_name(dataset, names)
        by_file.setdefault(path, []).append(
            result(entry, run, dataset=dataset, task=task, revision=revision, source=source)
        )
    files = {
        p: yaml.safe_dump(rows, sort_keys=False, allow_unicode=True) for p, rows in by_file.items()
    }
    return files, left_out


def _file_name(dataset: str, taken: dict[str, str]) -> str:
    """`.eval_results/<name>.yaml` for a benchmark; ORG_NAME when two share a name."""
    if dataset in taken:
        return taken[dataset]
    org, name = dataset.split("/")
    path = f"{EVAL_DIR}/{name}.yaml"
    if path in taken.values():
        path = f"{EVAL_DIR}/{org}_{name}.yaml"
    taken[dataset] = path
    return path
