"""`apexrl world ...`: serve a world's MCP tools, snapshot and diff its state, pack images."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Serve a world's MCP tool servers, snapshot and diff world state, pack world images.",
    no_args_is_help=True,
)


# Other modules add commands to this app (e.g. `world pack`).
def _load_extensions() -> None:
    import importlib

    try:
        importlib.import_module("apexrl.cli.world_pack")
    except ModuleNotFoundError as e:  # pragma: no cover - until that module lands
        if e.name != "apexrl.cli.world_pack":
            raise


_load_extensions()
