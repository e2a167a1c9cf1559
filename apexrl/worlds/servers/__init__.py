"""MCP tool servers over a world (`archipelago/`: one module per app, listed by
`apexrl.worlds.surface`). Each module declares one `Server` (its name, world app, the
app's other names, archipelago's folder for it), registers its tools with `@SERVER.tool`
and defines `probe(world) -> str`, a readiness check that reads the server's data and
raises when it cannot serve it (returns a one-line summary).
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from typing import Any

from apexrl.worlds.servers.caps import capped
from apexrl.worlds.servers.server import Server

__all__ = ["CallFailed", "Server", "as_text", "guard"]


class CallFailed(Exception):
    """A failed call that the model sees in archipelago's words: an error result whose text
    is `Internal error: Error calling tool '<base name>': <message>` (what archipelago's
    servers answer when one of their tools raises), not the gateway's own prefix."""


def failed_call(tool: str, message: str) -> Any:
    """The error result a `CallFailed` raised by `tool` becomes."""
    from apexrl.worlds.servers.archipelago import failed

    return failed(tool, message, kind="Internal error")


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
    MCPError (a JSON-RPC error some archipelago servers answer with) passes as it is.
    Every answer is capped (`caps.capped`: text and image size limits, with a note)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def awrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return capped(as_text(await fn(*args, **kwargs)))
            except _EXPECTED as e:
                return _answer_failure(fn.__name__, e)

        return awrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return capped(as_text(fn(*args, **kwargs)))
        except _EXPECTED as e:
            return _answer_failure(fn.__name__, e)

    return wrapper


def _answer_failure(fn_name: str, e: Exception) -> Any:
    """What a guarded tool's exception becomes: a `CallFailed`, archipelago's error result;
    a ToolError or MCPError, itself (raised again); anything else, a ToolError."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    if isinstance(e, ToolError | MCPError):
        raise e
    if isinstance(e, CallFailed):
        return failed_call(fn_name, str(e))
    raise _tool_error(fn_name, e) from e


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
