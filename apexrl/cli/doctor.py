"""`apexrl doctor`: what this machine can run. Never prints a secret's value."""

from __future__ import annotations

import typer

from apexrl.cli import output


def doctor(
    json_out: bool = typer.Option(False, "--json", help="NDJSON output."),
    no_cache: bool = typer.Option(
        False,
        "--no-cache",
        help="Import every extra again instead of reusing the checks that passed since the "
        "last install (doctor remembers them per environment).",
    ),
) -> None:
    """Report Python, optional extras, GPUs, tools and which credentials are set."""
    from apexrl.doctor import collect_checks

    output.emit_records(
        collect_checks(use_cache=not no_cache),
        json_out=json_out,
        columns=["section", "name", "ok", "detail"],
    )
