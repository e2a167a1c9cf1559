"""The action space of a world as records: what `apexrl world tools` prints."""

from __future__ import annotations

from typing import Any

from apexrl.worlds.models import ServerStatus, ToolRecord
from apexrl.worlds.world import World


def _args(schema: dict[str, Any]) -> str:
    req = set(schema.get("required") or [])
    return ", ".join(k if k in req else f"{k}?" for k in (schema.get("properties") or {}))


def list_tools(world: World, *, surface: str | None = None) -> tuple[list[ToolRecord], list]:
    """(records in listing order, servers that did not come up)."""
    import asyncio

    from apexrl.worlds.gateway import build_gateway

    gw = build_gateway(world, strict=False, surface=surface)
    owner = {t: s for s, st in gw.status.items() for t in st.tools}
    listed = {t.name: t for t in asyncio.run(gw.mcp.list_tools())}
    out = []
    for name in gw.tool_names:
        t = listed[name]
        schema = t.inputSchema if hasattr(t, "inputSchema") else t.input_schema
        out.append(
            ToolRecord(
                name=name,
                server=owner[name],
                surface=gw.surface.name,
                description=t.description or "",
                input_schema=schema,
                args=_args(schema),
            )
        )
    failed: list[ServerStatus] = gw.failed()
    return out, failed
