"""`apexrl doctor`: what this machine can run. Never prints a secret's value."""

from __future__ import annotations

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_NDJSON


def doctor(
    json_out: bool = JSON_NDJSON,
    no_cache: bool = typer.Option(
        False,
        "--no-cache",
        help="Import every extra again instead of reusing the checks that passed since the "
        "last install (doctor remembers them per environment).",
    ),
) -> None:
    """Report Python, optional extras, GPUs, tools and which credentials are set."""
    from apexrl.cli.groups import BROKEN_GROUPS, COMMAND_GROUPS
    from apexrl.doctor import collect_checks

    rows = collect_checks(use_cache=not no_cache)
    rows.insert(
        1,
        {
            "section": "apexrl",
            "name": "commands",
            "ok": not BROKEN_GROUPS,
            "detail": "; ".join(BROKEN_GROUPS.values())
            or f"{len(COMMAND_GROUPS)} command groups imported",
        },
    )
    for why in BROKEN_GROUPS.values():
        output.error(why)
    output.emit_records(
        rows,
        json_out=json_out,
        columns=["section", "name", "ok", "detail"],
    )
    if BROKEN_GROUPS:  # an install defect, not a missing extra
        raise typer.Exit(1)
