"""`apexrl config`: every setting and environment variable, its value and its source."""

from __future__ import annotations

import typer

from apexrl.cli import output


def config(
    json_out: bool = typer.Option(False, "--json", help="One JSON record per setting."),
    all_: bool = typer.Option(
        False, "--all", help="Also the variables apexrl sets inside sandboxes and images."
    ),
) -> None:
    """List every setting and environment variable with its value and source.

    Sources, highest first: the environment, .env, apexrl.toml, the default. Secrets
    are shown only as set or not."""
    from apexrl.config import listing

    rows = [r for r in listing() if all_ or r["scope"] != "sandbox"]
    output.emit_records(
        rows, json_out=json_out, columns=["name", "value", "source", "default", "help"]
    )
