"""`apexrl world ...`: serve a world's MCP tools, snapshot and diff its state, pack images."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Serve a world's MCP tool servers, snapshot and diff world state, pack world images.",
    no_args_is_help=True,
)


# Other modules add commands to this app (e.g. `world pack`).
try:
    from apexrl.cli import world_pack as _world_pack  # noqa: E402,F401
except ModuleNotFoundError as _e:  # pragma: no cover - until that module lands
    if _e.name != "apexrl.cli.world_pack":
        raise
