"""`apexrl tasks ...`: expert data -> Harbor task dirs -> Parquet datasets, and back."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_NDJSON, JSON_TOO

app = typer.Typer(
    help="Convert, pack, unpack, validate and split task datasets.", no_args_is_help=True
)

# the options of the commands that write a folder (example) or datasets (pack, split)
FORCE_OPT = typer.Option(
    False, "--force", help="Replace a non-empty -o folder apexrl did not write."
)
SHARD_SIZE_OPT = typer.Option(256, "--shard-size", help="Target shard size in MB.")
# the source's licence and terms, recorded with the tasks (apexrl.tasks.terms)
LICENSE_OPT = typer.Option(
    None, "--license", help="The source's licence id (default: its dataset card's)."
)
TERMS_OPT = typer.Option(
    None, "--terms", help="The source's terms of use, in a sentence (default: its card's)."
)
EVAL_ONLY_OPT = typer.Option(
    False,
    "--evaluation-only",
    help="Mark the data evaluation-only (its terms forbid training): `train` then refuses it.",
)


def _say_terms(terms) -> None:
    if terms is not None:
        mark = "EVALUATION ONLY; " if terms.evaluation_only else ""
        output.info(
            f"terms: {mark}licence {terms.license or 'unstated'}"
            f"{': ' + terms.terms if terms.terms else ''} ({terms.origin})"
        )


@app.command("example")
def example(
    out: Path = typer.Option(..., "-o", "--out", help="Directory to write the example into."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same seed gives the same bytes."),
    force: bool = FORCE_OPT,
) -> None:
    """Write a synthetic expert dataset in the APEX-Agents layout."""
    from apexrl.tasks.example import write_example

    output.refuse_dash(out, "-o", "a folder of expert data")
    summary = write_example(out, seed=seed, force=force)
    output.info(f"wrote example dataset to {out}")
    output.emit_records([summary], json_out=True)


@app.command("synthetic")
def synthetic(
    out: Path = typer.Option(..., "-o", "--out", help="Directory to write the source into."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same seed gives the same bytes."),
    worlds: int = typer.Option(16, "--worlds", help="Worlds (two tasks each: read, find)."),
    avoid: Path = typer.Option(
        None,
        "--avoid",
        help="Another split's source: draw no (file, key, value) it has (a held-out set).",
    ),
    force: bool = FORCE_OPT,
) -> None:
    """Write the tool-use task family (answers only in the world's files) in the APEX-Agents
    layout: `tasks convert` it, then every command takes it."""
    from apexrl.tasks.tooluse import write_synthetic

    output.refuse_dash(out, "-o", "a folder of expert data")
    tasks = write_synthetic(out, seed=seed, n_worlds=worlds, avoid_src=avoid, force=force)
    output.info(f"wrote {len(tasks)} tool-use task(s) in {worlds} world(s) to {out}")
    kinds: dict[str, int] = {}
    for t in tasks:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    output.emit_records([{"out": str(out), "seed": seed, "tasks": kinds}], json_out=True)


def _fail_or_partial(errors: list, strict: bool) -> None:
    """Report skipped bad records; exit 5 when some were skipped."""
    import typer as _typer

    from apexrl.errors import ExitCode

    for e in errors:
        output.error(str(e))
    if errors:
        output.warn(f"{len(errors)} bad record(s) skipped; the rest were written")
        raise _typer.Exit(int(ExitCode.PARTIAL))


@app.command("convert")
def convert(
    src: Path = typer.Argument(..., help="APEX-layout folder (tasks_and_rubrics.json, ...)."),
    out: Path = typer.Option(..., "-o", "--out", help="Folder for the Harbor task directories."),
    images: Path = typer.Option(None, "--images", help="images.jsonl from `apexrl image push`."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first bad record."),
    force: bool = FORCE_OPT,
    json_out: bool = JSON_TOO,
    grader_from: Path = typer.Option(
        None,
        "--grader-from",
        help="archipelago checkout whose grading runner each task's tests/ runs "
        "(the recipe's tasks); the judge is named at run time (GRADING_MODEL, ...).",
    ),
    grader_network: str = typer.Option(
        None,
        "--grader-network",
        help="With --grader-from: 'verifier' (the default: only grading has network; an "
        "environment that switches per phase, e.g. local) or 'public' (the whole trial, "
        "the agent's code too, as the recipe's sandboxes; Modal, docker).",
        show_default=False,
    ),
    license: str = LICENSE_OPT,
    terms: str = TERMS_OPT,
    evaluation_only: bool = EVAL_ONLY_OPT,
) -> None:
    """Convert expert task data into Harbor task directories (one record per task), with
    the source's licence and terms in each task's metadata."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import claim_output, convert_all, load_images
    from apexrl.tasks.grader_from import resolve_grader_source

    output.refuse_dash(out, "-o", "a folder of task directories")
    if grader_from is None and grader_network is not None:
        from apexrl.errors import UsageError

        raise UsageError("--grader-network is for --grader-from", hint="add --grader-from PATH")
    grader = (
        resolve_grader_source(grader_from, grader_network or "verifier") if grader_from else None
    )
    source = load_source(src, strict=strict)
    from apexrl.tasks.terms import with_flags

    source.terms = with_flags(
        source.terms, license=license, terms=terms, evaluation_only=evaluation_only
    )
    _say_terms(source.terms)
    image_map = load_images(images) if images else {}
    created = not out.exists()
    claim_output(out, src, force=force)
    errors = list(source.bad)
    records = []
    try:
        with output.progress("convert", total=len(source.tasks)) as advance:
            for outcome in convert_all(source, out, image_map, strict=strict, grader=grader):
                if outcome.error:
                    errors.append(outcome.error)
                else:
                    records.append(outcome.record)
                advance()
    except BaseException:
        _remove_if_bare(out, created)
        raise
    output.emit_records(
        records, json_out=json_out, columns=["path", "task_id", "domain", "world_id", "n_criteria"]
    )
    output.info(f"converted {len(records)} task(s) into {out}")
    _fail_or_partial(errors, strict)


@app.command("pack")
def pack(
    tasks_dir: Path = typer.Argument(..., help="Folder of Harbor task directories."),
    out: Path = typer.Option(..., "-o", "--out", help="Dataset folder to write."),
    shard_size: float = SHARD_SIZE_OPT,
    force: bool = FORCE_OPT,
    strict: bool = typer.Option(
        False, "--strict", help="Stop at the first bad task (nothing written)."
    ),
    license: str = LICENSE_OPT,
    terms: str = TERMS_OPT,
    evaluation_only: bool = EVAL_ONLY_OPT,
) -> None:
    """Pack task directories into a sharded Parquet dataset (path, task_binary, metadata);
    the tasks' licence and terms go into its _dataset.json. Each task is validated as
    `tasks validate` does: a bad one is skipped and named (exit 5), or with --strict
    stops the pack."""
    from apexrl.errors import UsageError
    from apexrl.tasks.dataset import write_dataset
    from apexrl.tasks.meta import find_task_meta
    from apexrl.tasks.pack import checked_task_dirs, find_task_dirs, pack_dirs
    from apexrl.tasks.terms import merge, with_flags

    output.refuse_dash(out, "-o", "a dataset folder (shards and a manifest)")
    if not tasks_dir.is_dir():
        raise UsageError(f"{tasks_dir} is not a directory")
    dirs = find_task_dirs(tasks_dir)
    if not dirs:
        raise UsageError(f"no task directories (with task.toml) under {tasks_dir}")
    dirs, bad = checked_task_dirs(dirs, strict=strict)
    if not dirs:  # every task is bad: nothing to pack (exit 1)
        for e in bad[:-1]:
            output.error(str(e))
        raise bad[-1]
    metas = [find_task_meta(d, require_world=False) for d in dirs]
    data_terms = with_flags(
        merge([m.data_terms if m else None for m in metas]),
        license=license,
        terms=terms,
        evaluation_only=evaluation_only,
    )
    _say_terms(data_terms)
    with output.progress("pack", total=len(dirs)) as advance:
        manifest = write_dataset(
            pack_dirs(dirs, on_done=advance),
            out,
            shard_mb=shard_size,
            force=force,
            inputs=[tasks_dir],
            data_terms=data_terms,
        )
    output.info(f"packed {manifest.n_tasks} task(s) into {len(manifest.shards)} shard(s) at {out}")
    output.emit_records(
        [{"out": str(out.absolute()), **manifest.model_dump(mode="json")}],
        columns=["out", "n_tasks", "shards", "digest"],
    )
    _fail_or_partial(bad, strict)


@app.command("unpack")
def unpack(
    dataset: str = typer.Argument(
        ...,
        help="Dataset folder, .parquet file, hf://org/name[@rev], or - (`tasks ls` records "
        "or paths on stdin).",
    ),
    out: Path = typer.Option(..., "-o", "--out", help="Folder for the task directories."),
    strict: bool = typer.Option(False, "--strict", help="Stop at the first bad row."),
    json_out: bool = JSON_TOO,
) -> None:
    """Extract a Parquet task dataset into task directories, safely and resumably."""
    from apexrl.tasks.unpack import unpack_dataset

    output.refuse_dash(out, "-o", "a folder of task directories")
    if dataset == "-":
        from apexrl.tasks.selection import materialize

        dirs = materialize(_selection_or(dataset), out, copy_dirs=True)
        output.emit_records(
            [{"path": d.name, "task_dir": str(d.absolute())} for d in dirs], json_out=json_out
        )
        output.info(f"unpacked {len(dirs)} task(s) into {out}")
        return
    errors: list = []
    created = not out.exists()
    try:
        with output.progress("unpack", total=_row_total(dataset)) as advance:
            results = unpack_dataset(
                dataset, out, strict=strict, on_row=lambda r: advance(), on_error=errors.append
            )
    except BaseException:
        _remove_if_bare(out, created)
        raise
    output.emit_records(
        [{"path": r.path, "status": r.status, "sha256": r.sha256} for r in results],
        json_out=json_out,
        columns=["path", "status", "sha256"],
    )
    written = sum(r.status == "written" for r in results)
    output.info(
        f"unpacked {len(results)} task(s) into {out} "
        f"({written} written, {len(results) - written} unchanged)"
    )
    _fail_or_partial(errors, strict)


@app.command("validate")
def validate(
    path: str = typer.Argument(
        ...,
        help="Task dir(s) folder, a dataset (folder of shards, .parquet, hf://), or - "
        "(`tasks ls` records or paths on stdin).",
    ),
    no_op: bool = typer.Option(
        False,
        "--no-op",
        help="Negative control: grade each task's initial world with an empty answer; a "
        "criterion met is a finding (exit 5).",
    ),
    oracle: bool = typer.Option(
        False,
        "--oracle",
        help="Positive control: grade the gold answer and gold files; a criterion not met "
        "is a finding (exit 5).",
    ),
    worlds: Path = typer.Option(
        None, "--worlds", help="World store for the controls (<world_id>/ or .zip files)."
    ),
    judge: str = typer.Option(
        None, "--judge", help="LiteLLM judge model for the controls' free-text criteria."
    ),
    judge_api_base: str = typer.Option(
        None, "--judge-api-base", help="OpenAI-compatible URL serving the judge."
    ),
    json_out: bool = JSON_TOO,
) -> None:
    """Check tasks: Harbor config, instruction, rubric, verifier entrypoint, metadata, env keys;
    with --no-op / --oracle, grade each task's rubric against its negative / positive control."""
    import tempfile

    from apexrl.artifacts.models import Finding
    from apexrl.errors import ExitCode, UsageError
    from apexrl.tasks.pack import find_task_dirs
    from apexrl.tasks.unpack import unpack_dataset
    from apexrl.tasks.validate import validate_task_dir

    bad_rows: list[Finding] = []
    with tempfile.TemporaryDirectory(prefix="apexrl-validate-") as tmp:
        root = Path(path)
        if path == "-":
            from apexrl.tasks.selection import materialize

            materialize(_selection_or(path), Path(tmp), copy_dirs=True)
            root = Path(tmp)
        elif (
            path.startswith("hf://")
            or root.is_file()
            or (root.is_dir() and any(root.rglob("*.parquet")))
        ):
            # every bad row is a finding (not only the first); the good rows are checked
            unpack_dataset(
                path,
                Path(tmp),
                strict=False,
                on_error=lambda e: bad_rows.append(
                    Finding(where=e.where, check="row", message=e.detail)
                ),
            )
            root = Path(tmp)
        if not root.is_dir():
            raise UsageError(f"{path} does not exist")
        dirs = find_task_dirs(root)
        if not dirs and not bad_rows:
            raise UsageError(f"no task directories (with task.toml) under {path}")
        findings = bad_rows + [f for d in dirs for f in validate_task_dir(d)]
        controls = [c for c, on in (("no-op", no_op), ("oracle", oracle)) if on]
        n_control = 0
        if controls:
            found = _control_findings(dirs, controls, worlds, judge, judge_api_base)
            n_control = sum(not f.message.startswith("not graded") for f in found)
            findings += found
    output.emit_records(
        findings, json_out=json_out, columns=["where", "check", "severity", "message"]
    )
    n_err = sum(f.severity == "error" for f in findings) - n_control
    output.info(
        f"validated {len(dirs) + len(bad_rows)} task(s): {n_err} error(s), "
        f"{len(findings) - n_err - n_control} warning(s)"
        + (f", {n_control} control finding(s)" if controls else "")
    )
    if n_err:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
    if n_control:
        raise typer.Exit(int(ExitCode.PARTIAL))


def _control_findings(dirs, controls, worlds, judge, judge_api_base) -> list:
    """Findings of the no-op / oracle controls (apexrl.grading.controls): one per task and
    control that got a criterion wrong; notes on stderr for unjudged criteria."""
    from apexrl.artifacts.models import Finding
    from apexrl.errors import ApexError, BadRecordError
    from apexrl.grading.controls import run_control
    from apexrl.grading.judge import JudgeSettings
    from apexrl.worlds.store import WorldStore

    settings = None
    if judge:
        from apexrl.grading.requirements import judge_credentials

        judge_credentials(judge, judge_api_base)  # exit 3 before any work
        settings = JudgeSettings(model=judge, api_base=judge_api_base)
    store = WorldStore(worlds) if worlds else None
    out, unjudged, no_world = [], 0, 0
    with output.progress("controls", total=len(dirs) * len(controls)) as advance:
        for d in dirs:
            for control in controls:
                try:
                    r = run_control(d, control, store=store, judge=settings)
                except (ApexError, ValueError, OSError) as e:
                    where = e.where if isinstance(e, BadRecordError) else d.name
                    out.append(Finding(where=where, check=control, message=f"not graded: {e}"))
                    advance()
                    continue
                unjudged += r.unjudged
                no_world += not r.world
                what = "met by the initial world and an empty answer" if control == "no-op" \
                    else "not met by the gold answer and files"  # fmt: skip
                out.extend(
                    Finding(where=d.name, check=control, message=f"criterion {c} is {what}")
                    for c in r.wrong
                )
                advance()
    if unjudged:
        output.warn(f"{unjudged} criterion check(s) need the LLM judge: pass --judge to grade them")
    if no_world:
        output.warn(
            f"{no_world} control(s) ran on the task's own input files only (its world is not "
            "in --worlds)"
        )
    return out


@app.command("split")
def split(
    dataset: str = typer.Argument(..., help="Dataset folder, .parquet file, or hf://org/name."),
    out: Path = typer.Option(..., "-o", "--out", help="Writes OUT/train and OUT/eval datasets."),
    by: str = typer.Option("world", "--by", help="Grouping key; only 'world' is supported."),
    eval_fraction: float = typer.Option(0.2, "--eval-fraction", help="Share of tasks for eval."),
    seed: int = typer.Option(0, "--seed"),
    shard_size: float = SHARD_SIZE_OPT,
    force: bool = FORCE_OPT,
) -> None:
    """Split a dataset into train and eval sets that share no world."""
    from apexrl.tasks.split import split_dataset

    output.refuse_dash(out, "-o", "two dataset folders (train, eval)")
    summaries = split_dataset(
        dataset,
        out,
        by=by,
        eval_fraction=eval_fraction,
        seed=seed,
        shard_mb=shard_size,
        force=force,
        on_warning=output.warn,
    )
    output.emit_records(summaries, columns=["split", "out", "n_tasks", "fraction", "worlds"])


@app.command("ls")
def ls(
    dataset: str = typer.Argument(
        ...,
        help="Dataset folder, .parquet file, hf://org/name, a folder of task dirs, "
        "or - (records or paths on stdin).",
    ),
    json_out: bool = JSON_NDJSON,
) -> None:
    """List tasks: path, task id, domain, world, size, and where each is (dataset, shard
    and row, or task folder: absolute paths, so `eval run --tasks -` can take them)."""
    from apexrl.tasks.listing import list_tasks

    output.emit_records(
        list_tasks(_selection_or(dataset)),
        json_out=json_out,
        columns=["path", "task_id", "domain", "world_id", "size_bytes"],
    )


def _row_total(dataset: str) -> int | None:
    """The bar's total: rows in the dataset's Parquet footers (None when not local)."""
    from apexrl.tasks.dataset import row_count

    try:
        return None if dataset.startswith("hf://") else row_count(dataset)
    except Exception:  # unreadable: unpack itself says why
        return None


def _remove_if_bare(out: Path, created: bool) -> None:
    """A failed command leaves no folder it created that holds only its bookkeeping."""
    import shutil

    if created and out.is_dir() and all(p.name.startswith(".") for p in out.iterdir()):
        shutil.rmtree(out, ignore_errors=True)


def _selection_or(source: str):
    """`-`: the task selection piped on stdin (apexrl.tasks.selection); else `source`."""
    if source != "-":
        return source
    import sys

    from apexrl.tasks.selection import parse_selection, read_lines

    return parse_selection(read_lines(sys.stdin))
