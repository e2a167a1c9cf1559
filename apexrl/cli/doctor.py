"""`apexrl doctor`: what this machine can run. Never prints a secret's value."""

from __future__ import annotations

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_NDJSON


def doctor(
    ctx: typer.Context,
    json_out: bool = JSON_NDJSON,
    no_cache: bool = typer.Option(
        False,
        "--no-cache",
        help="Import every extra again instead of reusing the checks that passed since the "
        "last install (doctor remembers them per environment).",
    ),
) -> None:
    """Report Python, optional extras, GPUs, tools and which credentials are set."""
    from apexrl.doctor import collect_checks

    # the root command (cli/app.py) imports every command of its table: one that fails
    # to import is an install defect, named here
    root = ctx.find_root().command
    broken = root.load_all()
    rows = collect_checks(use_cache=not no_cache)
    rows.insert(
        1,
        {
            "section": "apexrl",
            "name": "commands",
            "ok": not broken,
            "detail": "; ".join(broken.values())
            or f"{len(root.list_commands(None))} command groups imported",
        },
    )
    for why in broken.values():
        output.error(why)
    output.emit_records(
        rows,
        json_out=json_out,
        columns=["section", "name", "ok", "detail"],
    )
    if broken:  # an install defect, not a missing extra
        raise typer.Exit(1)
