"""`apexrl image ...`: push world image archives to ECR or any OCI registry."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_STDOUT
from apexrl.images.push import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TAG,
    DEFAULT_TIMEOUT_S,
    MAX_CONCURRENCY,
)

app = typer.Typer(help="Push world images to ECR or any OCI registry.", no_args_is_help=True)


def _archives(items: list[str]) -> list[tuple[Path, str | None]]:
    """ARCHIVE paths, or `world pack` record files (.jsonl, `-` for stdin)."""
    from apexrl.errors import UsageError

    out: list[tuple[Path, str | None]] = []
    for item in items:
        if item == "-" or item.endswith((".jsonl", ".ndjson")):
            from apexrl.artifacts.jsonl import read_records
            from apexrl.artifacts.models import PackedImageRecord

            for rec in read_records(item, PackedImageRecord):
                out.append((Path(rec.archive), rec.world_id))
        else:
            p = Path(item)
            if not p.exists():
                raise UsageError(
                    f"{item}: no such archive", hint="build it with `apexrl world pack`"
                )
            out.append((p, None))
    if not out:
        raise UsageError("nothing to push", hint="pass archives or `world pack` output")
    return out


def option_value_problem(option: str, value: object) -> str | None:
    """Why a value given to one of `image push`'s options is refused, or None. A value
    that looks like an option (`--tag --dry-run`) is refused rather than taken as a tag."""
    if isinstance(value, str) and value.startswith("-"):
        return f"{option} got {value!r}, which looks like an option: give {option} a value"
    if option == "--timeout" and isinstance(value, float) and not 0 < value < float("inf"):
        return f"--timeout must be a positive number of seconds, not {value!r}"
    return None


def _checked(ctx: typer.Context, param: typer.CallbackParam, value):
    """The value checks of `image push`'s options (option_value_problem)."""
    if ctx.resilient_parsing or value is None:
        return value
    problem = option_value_problem(param.opts[-1] if param.opts else param.name, value)
    if problem:
        raise typer.BadParameter(problem)
    return value


def _checked_option(default, *decls: str, **kw):
    """An option whose value is checked by option_value_problem."""
    return typer.Option(default, *decls, callback=_checked, **kw)


@app.command("push")
def push(
    archives: list[str] = typer.Argument(
        ..., help="OCI image archives (from `world pack`), or its JSONL output ('-' = stdin)."
    ),
    to: str = _checked_option(
        ..., "--to", help="REGISTRY/REPO, e.g. <acct>.dkr.ecr.<region>.amazonaws.com/worlds."
    ),
    tag: str = _checked_option(
        DEFAULT_TAG, "--tag", help="Tag; {world_id} and {digest12} are filled in per image."
    ),
    concurrency: int = _checked_option(
        DEFAULT_CONCURRENCY,
        "-n",
        "--concurrency",
        min=1,
        max=MAX_CONCURRENCY,
        help="Parallel blob uploads.",
    ),
    retries: int | None = _checked_option(
        None,
        "--retries",
        min=1,
        help="Attempts per call on 5xx/429/connection errors (default 5).",
    ),
    timeout: float = _checked_option(
        DEFAULT_TIMEOUT_S, "--timeout", help="Seconds per registry call (connect/read)."
    ),
    registry_endpoint: str | None = _checked_option(
        None,
        "--registry-endpoint",
        envvar="APEXRL_REGISTRY_ENDPOINT",
        help="Send registry API calls to this base URL (e.g. http://127.0.0.1:5000) while "
        "records keep the --to reference. For tunnels, proxies and tests.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; contact nothing."),
    json_out: bool = JSON_STDOUT,
) -> None:
    """Push archives: skip blobs the registry has, upload the rest, then manifest and tag.

    Prints one image record per line (world_id, ref, digest): the --images
    input of `tasks convert`. Re-running finishes an interrupted push; an
    unchanged image uploads nothing.
    """
    from apexrl.images.push import plan_pushes
    from apexrl.images.refs import parse_reference

    dest = parse_reference(to, require_repo_only=True)
    plans = plan_pushes(_archives(archives), tag)
    as_json = json_out or not output.stdout_is_terminal()
    if dry_run:
        for path, src, _wid, t in plans:
            size = sum(b.size for b in src.blob_refs())
            output.info(
                f"would push {path} -> {dest.with_tag(t)} ({size} bytes, {src.manifest_digest})"
            )
        return
    from apexrl.images.push import push_images

    def on_record(rec: dict) -> None:  # NDJSON: each record as its image lands
        output.emit_records([rec], json_out=True)

    records, code = push_images(
        dest,
        plans,
        endpoint=registry_endpoint,
        concurrency=concurrency,
        retries=retries,
        timeout=timeout,
        progress=output.progress,
        on_info=output.info,
        on_error=output.error,
        on_record=on_record if as_json else lambda rec: None,
    )
    if not as_json:
        output.emit_records(records, title="pushed images")
    if code:
        raise typer.Exit(code)
