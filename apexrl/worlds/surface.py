"""Tool surfaces: which servers a world gateway mounts and which tools each one lists.

A surface is data: its server modules in mount order. Each module declares one
`apexrl.worlds.servers.Server` (the name its tools are prefixed with, the world app it
serves (`files`, `docs`, `sheets`, ...) and the other names a world may give that app,
archipelago's folder for it) and registers its tools with `@SERVER.tool`, in listing
order: names are typed once, in the module. The world apps are the default surface's
(`apexrl.worlds.world.app_names`): one module added to `modules` adds a server and its app.
The modules are imported when a surface's servers are first read.

The one surface, `archipelago`, is the server and tool names, arguments and semantics of
Mercor's archipelago MCP servers, the action space recipe-trained checkpoints learned:
`code_execution_code_exec(code=...)`, `excel_read_tab`, `filesystem_search_files`,
`pdfs_read_pdf_pages`, ... Tool names are always prefixed with the server's name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from apexrl.errors import UsageError

if TYPE_CHECKING:
    from apexrl.worlds.servers.server import Server

DEFAULT_SURFACE = "archipelago"


@dataclass(frozen=True)
class Surface:
    name: str
    always_prefix: bool
    modules: tuple[str, ...]  # server modules (each declares `SERVER`), in mount order
    description: str = ""
    flat_schemas: bool = False  # inline $refs, drop generated titles (as archipelago lists)

    @property
    def servers(self) -> tuple[Server, ...]:
        return declared(self.modules)

    def server(self, name: str) -> Server:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)

    def for_apps(self, apps: list[str]) -> list[Server]:
        """The servers serving `apps` (world app names), in this surface's order."""
        return [s for s in self.servers if s.app in apps]

    def tool_name(self, server: str, base: str, n_servers: int) -> str:
        return f"{server}_{base}" if (self.always_prefix or n_servers > 1) else base


@functools.cache
def declared(modules: tuple[str, ...]) -> tuple[Server, ...]:
    """The `SERVER` each module declares."""
    import importlib

    return tuple(importlib.import_module(m).SERVER for m in modules)


_A = "apexrl.worlds.servers.archipelago"

ARCHIPELAGO = Surface(
    name="archipelago",
    always_prefix=True,
    flat_schemas=True,
    description="archipelago's MCP servers (the recipe's action space)",
    modules=tuple(
        f"{_A}.{m}"
        for m in (
            "filesystem",
            "word",
            "excel",
            "powerpoint",
            "pdfs",
            "mail",
            "chat",
            "calendar",
            "code_execution",
        )
    ),
)

SURFACES: dict[str, Surface] = {s.name: s for s in (ARCHIPELAGO,)}


def get_surface(name: str | None = None) -> Surface:
    """The surface called `name` (None: archipelago)."""
    key = (name or DEFAULT_SURFACE).strip().lower()
    try:
        return SURFACES[key]
    except KeyError:
        raise UsageError(
            f"unknown tool surface {key!r}", hint=f"known surfaces: {', '.join(SURFACES)}"
        ) from None
