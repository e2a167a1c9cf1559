"""Each world app's data, read and written the same way by every tool surface: mail's
mbox files, the calendar's .ics, the chat export, office files, PDFs, the code runner.
The MCP servers in `apexrl.worlds.servers` present them to an agent."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apexrl.worlds.world import World


def count_files(world: World, library: str, ext: str) -> str:
    """A file app's readiness check: its reading library imports, and the number of
    `ext` files ('.docx') in the world."""
    importlib.import_module(library)
    n = sum(1 for _ in world.fs_root.rglob(f"*{ext}")) if world.fs_root.is_dir() else 0
    return f"{n} {ext} files"
