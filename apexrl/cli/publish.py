"""`apexrl publish ...`: checkpoints, eval traces and task datasets to the Hugging Face Hub."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_TOO

if TYPE_CHECKING:
    from apexrl.publish.stage import Plan

app = typer.Typer(
    help="Publish checkpoints, eval traces and task datasets to the Hugging Face Hub "
    "(redacted, resumable, verified).",
    no_args_is_help=True,
)

_REPO_RE = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
_COLUMNS = ["path", "size_bytes", "status", "sha256"]

REPO_OPT = typer.Option(..., "--repo", help="Hub repo id, ORG/NAME.")
PRIVATE_OPT = typer.Option(True, "--private/--public", help="Repo visibility when it is created.")
DRY_OPT = typer.Option(
    False, "--dry-run", help="Print the exact files, sizes and card; upload nothing."
)
STRICT_OPT = typer.Option(False, "--strict", help="Refuse to upload when a secret is found.")
STAGE_OPT = typer.Option(
    None, "--stage", help="Keep the staged (redacted) files in this new folder (default: temp)."
)
LICENSE_OPT = typer.Option(None, "--license", help="Licence id for the card (e.g. apache-2.0).")
COMMIT_OPT = typer.Option(
    20.0, "--commit-size", help="Size of each commit in GB (few large commits)."
)
# after each command's own options: how to stage, check, upload and report (see _run)
_RUN_OPTIONS = {
    "dry_run": (bool, DRY_OPT),
    "strict": (bool, STRICT_OPT),
    "stage": (Path, STAGE_OPT),
    "commit_size": (float, COMMIT_OPT),
    "json_out": (bool, JSON_TOO),
}


def _check_repo(repo: str) -> None:
    from apexrl.errors import UsageError

    if not _REPO_RE.match(repo) or ".." in repo:
        raise UsageError(
            f"--repo {repo!r} is not a Hub repo id", hint="use ORG/NAME, e.g. acme/apex-7b"
        )


@contextmanager
def _stage_dir(stage: Path | None):
    import shutil
    import tempfile

    from apexrl.errors import UsageError

    if stage is not None:
        if stage.exists() and any(stage.iterdir()):
            raise UsageError(f"--stage {stage} is not empty", hint="pass a new or empty folder")
        stage.mkdir(parents=True, exist_ok=True)
        yield stage
        return
    tmp = Path(tempfile.mkdtemp(prefix="apexrl-publish-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publishes(command: Callable[..., Callable[[Path], Plan]]) -> Callable[..., None]:
    """A publish command from `command`, which takes the command's own options and
    returns its staging (stage folder -> Plan): the options every publish command shares
    (_RUN_OPTIONS) follow its own, and the repo check and `_run` are done here."""
    sig = inspect.signature(command)
    own = {k: v for k, v in command.__annotations__.items() if k != "return"}
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=type_, default=opt)
        for name, (type_, opt) in _RUN_OPTIONS.items()
    ]

    @functools.wraps(command)
    def publish(**kwargs: Any) -> None:
        run = {name: kwargs.pop(name) for name in _RUN_OPTIONS}
        _check_repo(kwargs["repo"])
        _run(command(**kwargs), **run)

    del publish.__wrapped__  # typer reads the signature below, not the command's
    params = [*sig.parameters.values(), *shared]
    publish.__signature__ = sig.replace(parameters=params, return_annotation=None)  # type: ignore[attr-defined]
    publish.__annotations__ = {**own, **{n: t for n, (t, _) in _RUN_OPTIONS.items()}}
    return publish


def _run(
    plan_fn, *, dry_run: bool, strict: bool, stage: Path | None, commit_size: float, json_out: bool
) -> None:
    from apexrl.errors import ApexError, ExitCode
    from apexrl.publish import hub

    token = None if dry_run else hub.get_token()  # missing token: exit 3 before any work
    with _stage_dir(stage) as sdir:
        plan = plan_fn(sdir)
        for src, why in plan.skipped:
            output.info(f"not published: {src} ({why})")
        findings = plan.redactor.findings
        for f in findings:
            output.warn(f"secret redacted: {f.where}: {f.kind} x{f.count}")
        if findings and strict:
            raise ApexError(
                f"{plan.redactor.total} secret(s) found in files staged for {plan.repo}; "
                "--strict refuses to upload",
                hint="remove them from the source, or drop --strict to publish redacted copies",
                code=ExitCode.CHECK_FAILED,
            )
        what = f"{plan.repo_type} repo {plan.repo}@{plan.revision}"
        size = plan.size_bytes
        if dry_run:
            output.emit_records(
                _label(plan.records(), sdir, stage), json_out=json_out, columns=_COLUMNS
            )
            output.info(
                f"dry run: {len(plan.files)} file(s), {size:,} bytes to {what} "
                f"({'private' if plan.private else 'public'}); {plan.redactor.total} redaction(s)"
            )
            output.info("--- README.md (card) ---")
            output.err_console().print(plan.card, markup=False, highlight=False)
            return
        with output.progress(f"publish {plan.repo}", total=size) as advance:
            result, records = hub.upload(
                plan,
                token=token,
                commit_bytes=max(1, int(commit_size * 1024**3)),
                on_progress=advance,
                on_warn=output.warn,
            )
        output.emit_records(_label(records, sdir, stage), json_out=json_out, columns=_COLUMNS)
        output.info(
            f"published {result.n_files} file(s), {result.size_bytes:,} bytes to {what}: "
            f"{result.uploaded} sent, {result.unchanged} already there, "
            f"{result.commits} commit(s); verified. {result.url} @ {result.commit}"
        )


def _label(records: list, sdir: Path, stage: Path | None) -> list:
    """Staged copies in a temp folder (gone after the command) are named as such."""
    if stage is None:
        prefix = str(sdir) + "/"
        for r in records:
            if r.source.startswith(prefix):
                r.source = "(staged copy)"
    return records


@app.command("model")
@_publishes
def model(
    ckpt: Path = typer.Argument(..., help="Checkpoint folder (config, safetensors, tokenizer)."),
    repo: str = REPO_OPT,
    evals: list[Path] = typer.Option(
        [], "--eval", help="An `apexrl eval run` folder whose Pass@1 goes in the card (repeatable)."
    ),
    allow_incomplete: bool = typer.Option(
        False,
        "--allow-incomplete",
        help="Accept an interrupted --eval run (the card marks it INCOMPLETE).",
    ),
    benchmark: str = typer.Option(
        None,
        "--benchmark",
        help="Hub dataset (ORG/NAME[:TASK]) the --eval runs' .eval_results files name "
        "(default: each run's own dataset when it came from the Hub).",
    ),
    eval_source: str = typer.Option(
        None,
        "--eval-source",
        help="URL the .eval_results files cite as their source (e.g. the published traces; "
        "default: the model repo).",
    ),
    base_model: str = typer.Option(None, "--base-model", help="Hub id of the base model."),
    private: bool = PRIVATE_OPT,
    revision: str = typer.Option("main", "--revision", help="Branch to publish to."),
    license: str = LICENSE_OPT,
) -> Callable[[Path], Plan]:
    """Check a checkpoint, write its model card (and .eval_results/ for each --eval run's
    benchmark), upload it and verify what landed."""
    from apexrl.config import run_path
    from apexrl.publish.stage_model import stage_model

    return lambda sdir: stage_model(
        ckpt,
        repo=repo,
        stage_dir=sdir,
        evals=[run_path(e) for e in evals or []],
        allow_incomplete=allow_incomplete,
        benchmark=benchmark,
        eval_source=eval_source,
        base_model=base_model,
        private=private,
        revision=revision,
        license=license,
    )


@app.command("traces")
@_publishes
def traces(
    run_dir: Path = typer.Argument(..., help="An `apexrl eval run` folder."),
    repo: str = REPO_OPT,
    include_tokens: bool = typer.Option(
        False, "--include-tokens", help="Add the token ids and loss mask of every trial."
    ),
    private: bool = PRIVATE_OPT,
    license: str = LICENSE_OPT,
) -> Callable[[Path], Plan]:
    """Publish an eval run's trajectories as a Parquet dataset (one row per trial)."""
    from apexrl.config import run_path
    from apexrl.publish.stage_traces import stage_traces

    return lambda sdir: stage_traces(
        run_path(run_dir),
        repo=repo,
        stage_dir=sdir,
        include_tokens=include_tokens,
        private=private,
        license=license,
    )


@app.command("dataset")
@_publishes
def dataset(
    ds_dir: Path = typer.Argument(..., help="A dataset folder from `apexrl tasks pack`."),
    repo: str = REPO_OPT,
    private: bool = PRIVATE_OPT,
    license: str = LICENSE_OPT,
) -> Callable[[Path], Plan]:
    """Publish a packed task dataset with its card (counts per domain and world, schema)."""
    from apexrl.publish.stage_dataset import stage_dataset

    return lambda sdir: stage_dataset(
        ds_dir, repo=repo, stage_dir=sdir, private=private, license=license
    )
