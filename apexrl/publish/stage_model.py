"""Stage a checkpoint for `publish model`: config, tokenizer, weights (from where they are),
train files and remote code redacted into the stage folder, and the model card."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from apexrl.errors import BadRecordError, UsageError
from apexrl.publish import cards
from apexrl.publish.checkpoint import INDEX, check_checkpoint
from apexrl.publish.eval_results import eval_results_files
from apexrl.publish.redact import Redactor
from apexrl.publish.stage import Plan, finish_with_card, new_plan, redacted_copy, stage_text

TOKENIZER_FILES = {
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
}
MODEL_FILES = {"config.json", "generation_config.json", INDEX} | TOKENIZER_FILES
TRAIN_FILES = ("recipe.toml", "apexrl_manifest.json", "manifest.json")  # from `apexrl train`
TEXT_SUFFIXES = (".json", ".jsonl", ".jinja", ".txt", ".toml", ".md", ".yaml", ".yml", ".py")


def stage_model(
    ckpt: Path,
    *,
    repo: str,
    stage_dir: Path,
    evals: list[Path] = (),
    base_model: str | None = None,
    private: bool = True,
    revision: str = "main",
    license: str | None = None,
    redactor: Redactor | None = None,
    allow_incomplete: bool = False,
    benchmark: str | None = None,
    eval_source: str | None = None,
) -> Plan:
    ckpt = Path(ckpt)
    if not ckpt.is_dir():
        raise UsageError(f"checkpoint folder {ckpt} does not exist")
    info = check_checkpoint(ckpt)
    plan = new_plan(
        repo, "model", private=private, revision=revision, stage_dir=stage_dir, redactor=redactor
    )
    entries: list[tuple[str, Path]] = []
    weights = set(info.weight_files)
    code = _remote_code(ckpt, info.config)
    for p in sorted(ckpt.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(ckpt).as_posix()
        if rel in weights:
            entries.append((rel, _weights_file(plan, rel, p)))
        elif rel in MODEL_FILES or rel in TRAIN_FILES or rel in code:
            entries.append((rel, redacted_copy(plan, rel, p)))
        elif rel == "README.md":
            plan.skipped.append((str(p), "replaced by the generated model card"))
        else:
            plan.skipped.append(
                (str(p), "not part of a published checkpoint (weights, config, tokenizer)")
            )

    recipe = (ckpt / "recipe.toml").read_text() if (ckpt / "recipe.toml").is_file() else None
    manifest = None
    found = _find_manifest(ckpt)
    if found is not None:
        manifest = cards.read_json(found) or None
        if manifest and found.parent != ckpt:  # `apexrl train` writes it beside the checkpoints
            entries.append(
                ("apexrl_manifest.json", redacted_copy(plan, "apexrl_manifest.json", found))
            )
    if base_model is None:
        base_model = _base_model(info.config, manifest)
    entries_eval = []
    runs = []
    for run_dir in evals:
        run_dir = Path(run_dir)
        summary = cards.read_json(run_dir / "summary.json")
        if not summary:
            raise UsageError(
                f"{run_dir}: no readable summary.json",
                hint="pass a finished `apexrl eval run` folder to --eval",
            )
        run = cards.read_json(run_dir / "run.json")
        entry = cards.eval_entry(run_dir.name, summary, run)
        if entry is None:
            raise BadRecordError(f"{run_dir / 'summary.json'}", "has no pass_at_1 metric")
        if not entry.complete and not allow_incomplete:
            fix = (
                "`apexrl eval run ... --retry-errors` or `apexrl eval regrade` grades them"
                if entry.trials_ungraded
                else "rerun its `apexrl eval run` command to finish it"
            )
            if entry.task_errors:  # broken tasks: rerunning them unchanged fails the same way
                fix = (
                    "fix the broken task(s) or their world (summary.json's error_messages name "
                    "the file), then `apexrl eval run ... --retry-task-errors`"
                    + (f"; {fix}" if entry.infra_errors else "")
                )
            progress = (
                entry.progress
                if entry.trials_ungraded
                else f"{entry.trials_done} of {entry.trials_planned} trials have a result"
            )
            raise BadRecordError(
                str(run_dir),
                f"the eval run is incomplete ({progress}): its figures are not the run's",
                hint=f"{fix}, or pass --allow-incomplete (the card then says INCOMPLETE)",
            )
        entries_eval.append(entry)
        runs.append((entry, run))
    files, left_out = eval_results_files(
        runs, repo=repo, benchmark=benchmark, source_url=eval_source
    )
    for rel, text in files.items():
        entries.append((rel, stage_text(plan, rel, plan.redactor.text(text, rel).encode())))
    for name in left_out:
        plan.skipped.append(
            (name, "no .eval_results file: its dataset is not a Hub dataset (pass --benchmark)")
        )
    card = cards.model_card(
        repo=repo,
        config=info.config,
        base_model=base_model,
        license=license,
        evals=entries_eval,
        recipe=plan.redactor.text(recipe, "README.md") if recipe else None,
        manifest=plan.redactor.obj(manifest, "README.md") if manifest else None,
        n_params=info.n_params,
        chat_template_source=info.chat_template_source,
    )
    return finish_with_card(plan, entries, card)


def _remote_code(ckpt: Path, config: dict) -> set[str]:
    """The modules a trust_remote_code checkpoint needs (named by config.json's auto_map)."""
    refs = config.get("auto_map") or {}
    names = set()
    for v in refs.values():
        for ref in v if isinstance(v, list) else [v]:
            if isinstance(ref, str) and "--" not in ref and "." in ref:  # "module.Class"
                names.add(ref.rsplit(".", 1)[0] + ".py")
    return {n for n in names if "/" not in n and (ckpt / n).is_file()}


def _weights_file(plan: Plan, rel: str, path: Path) -> Path:
    """The shard itself, or a copy with a redacted `__metadata__` when its header
    carries a secret (the tensor data is copied unchanged)."""
    from apexrl.publish.checkpoint import read_safetensors_header

    header, start = read_safetensors_header(path)
    meta = header.get("__metadata__")
    if not isinstance(meta, dict):
        return path
    red = plan.redactor.obj(meta, f"{rel} (__metadata__)")
    if red == meta:
        return path
    raw = json.dumps({**header, "__metadata__": red}, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    out = plan.stage_dir / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as src, open(out, "wb") as dst:
        dst.write(struct.pack("<Q", len(raw)) + raw)
        src.seek(start)
        shutil.copyfileobj(src, dst, 16 * 1024 * 1024)
    return out


def _find_manifest(ckpt: Path) -> Path | None:
    """apexrl_manifest.json in the checkpoint or up to three folders above it."""
    for d in [ckpt, *list(ckpt.resolve().parents)[:3]]:
        for name in (
            ("apexrl_manifest.json", "manifest.json") if d == ckpt else ("apexrl_manifest.json",)
        ):
            if (d / name).is_file():
                return d / name
    return None


def _base_model(config: dict, manifest: dict | None) -> str | None:
    m = manifest or {}
    for cand in (m.get("base_model"), m.get("model"), config.get("_name_or_path")):
        if isinstance(cand, str) and cand.count("/") == 1 and not cand.startswith((".", "/")):
            return cand
    return None
