"""`apexrl doctor`: what this machine can run. Never prints a secret's value."""

from __future__ import annotations

import typer

from apexrl.cli import output


def doctor(
    json_out: bool = typer.Option(False, "--json", help="NDJSON output."),
) -> None:
    """Report Python, optional extras, GPUs, tools and which credentials are set."""
    from apexrl.doctor import collect_checks

    output.emit_records(
        collect_checks(), json_out=json_out, columns=["section", "name", "ok", "detail"]
    )
