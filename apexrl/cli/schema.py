"""`apexrl schema NAME`: the JSON Schema of an artifact record."""

from __future__ import annotations

import typer

from apexrl.cli import output
from apexrl.errors import UsageError


def schema(
    name: str = typer.Argument(None, help="Record name; omit to list them."),
) -> None:
    """Print the JSON Schema of an artifact record (omit NAME to list names)."""
    from apexrl.schemas import all_schemas

    SCHEMAS = all_schemas()

    if not name:
        output.emit_records(
            (
                {"name": key, "description": (model.__doc__ or "").strip().split("\n")[0]}
                for key, model in SCHEMAS.items()
            ),
            columns=["name", "description"],
        )
        return
    if name not in SCHEMAS:
        import difflib

        close = difflib.get_close_matches(name, list(SCHEMAS), n=1)
        raise UsageError(
            f"unknown record {name!r}",
            hint=(f"did you mean {close[0]!r}? " if close else "") + "names: " + ", ".join(SCHEMAS),
        )
    output.emit_json(SCHEMAS[name].model_json_schema())
