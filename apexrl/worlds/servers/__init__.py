"""MCP tool servers over a world. Each module defines:

- `tools(world) -> list[callable]`: the tool functions bound to the world; the
  function name is the tool's base name and its docstring the description;
- `probe(world) -> str`: a readiness check that reads the server's data and raises
  when it cannot serve it (returns a one-line summary).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

from apexrl.worlds.world import SERVERS


def server_module(name: str) -> ModuleType:
    if name not in SERVERS:
        raise KeyError(name)
    return importlib.import_module(f"apexrl.worlds.apps.{name}")


def _tool_error(fn_name: str, e: BaseException) -> Exception:
    from mcp.server.mcpserver.exceptions import ToolError

    msg = getattr(e, "message", None) or str(e) or type(e).__name__
    hint = getattr(e, "hint", None)
    if hint:
        msg = f"{msg} (hint: {hint})"
    return ToolError(msg)


_EXPECTED = (Exception,)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn any exception a tool raises into a ToolError whose text the agent sees; an
    MCPError (a JSON-RPC error some archipelago servers answer with) passes as it is."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return as_text(await fn(*args, **kwargs))
            except (ToolError, MCPError):
                raise
            except _EXPECTED as e:
                raise _tool_error(fn.__name__, e) from e

        return awrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return as_text(fn(*args, **kwargs))
        except (ToolError, MCPError):
            raise
        except _EXPECTED as e:
            raise _tool_error(fn.__name__, e) from e

    return wrapper


def as_text(result: Any) -> Any:
    """Tool results go to a model: compact JSON for structures, strings as they are;
    MCP content blocks (an image a tool rendered) pass through unchanged."""
    if isinstance(result, str):
        return result
    if _is_result(result):  # a tool that sets the error flag and the whole text itself
        return result
    if _is_content(result) or (
        isinstance(result, list) and result and all(_is_content(r) for r in result)
    ):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def _is_result(x: Any) -> bool:
    from mcp.types import CallToolResult

    return isinstance(x, CallToolResult)


def _is_content(x: Any) -> bool:
    from mcp.types import ImageContent, TextContent

    return isinstance(x, ImageContent | TextContent)


def cap_text(text: str, limit: int) -> str:
    """Keep head 2/3 and tail 1/3 of `text` when it is longer than `limit` chars."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters omitted ...]\n{text[-tail:] if tail else ''}"
