"""`apexrl tasks ...`: expert data -> Harbor task dirs -> Parquet datasets, and back."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output

app = typer.Typer(help="Convert, pack, unpack, validate and split task datasets.", no_args_is_help=True)


@app.command("example")
def example(
    out: Path = typer.Option(..., "-o", "--out", help="Directory to write the example into."),
    seed: int = typer.Option(0, "--seed", help="Seed; the same seed gives the same bytes."),
) -> None:
    """Write a synthetic expert dataset in the APEX-Agents layout."""
    from apexrl.tasks.example import write_example

    summary = write_example(out, seed=seed)
    output.info(f"wrote example dataset to {out}")
    output.emit_records([summary], json_out=True)
