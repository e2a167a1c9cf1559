"""Worlds: the world model, MCP tool servers + gateway (runtime), snapshots and diffs.

Heavy libraries (mcp, uvicorn, python-docx, openpyxl, ...) load inside functions.
"""

from apexrl.worlds.store import extract_zip_safely
from apexrl.worlds.world import World, app_names, open_world

__all__ = ["World", "app_names", "extract_zip_safely", "open_world"]
