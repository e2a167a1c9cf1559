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
from enum import Enum
from typing import Any

from apexrl.worlds.servers.caps import capped
from apexrl.worlds.servers.server import Server

__all__ = ["Failed", "Server", "Style", "as_text", "failure", "guard"]


class Style(Enum):
    """How a peer server words a failure: its peer's error style, given to `Failed`."""

    TEXT = "text"  # the tool's ordinary result is the message (word, excel)
    INVALID_PARAMS = "Invalid params"  # an error result `Invalid params: ...`
    INTERNAL_ERROR = "Internal error"  # an error result `Internal error: ...`
    RPC_INVALID_PARAMS = "rpc Invalid params"  # a JSON-RPC error -32602 `Invalid params: ...`
    RPC_INTERNAL_ERROR = "rpc Internal error"  # a JSON-RPC error -32603 `Internal error: ...`


_RPC = {Style.RPC_INVALID_PARAMS: -32602, Style.RPC_INTERNAL_ERROR: -32603}


class Failed(Exception):
    """A tool's failure, answered in its peer's words (`failure`): `style` is the peer's
    error style; the text names the tool that raised it (`Error calling tool '<tool>':`,
    as archipelago's servers word a failure their tool raised) unless `tool` says another,
    or "" for none (a request that failed validation before reaching a tool)."""

    def __init__(self, message: str, style: Style = Style.TEXT, *, tool: str | None = None):
        super().__init__(message)
        self.style = style
        self.tool = tool


def failure(tool: str, message: str, style: Style) -> Any:
    """The answer to a failed call of `tool`: the message as the result (TEXT); an error
    result, or a raised JSON-RPC error, whose text is
    `<Invalid params|Internal error>: Error calling tool '<tool>': <message>`."""
    if style is Style.TEXT:
        return message
    from mcp.types import CallToolResult, TextContent

    named = f"Error calling tool {tool!r}: " if tool else ""
    text = f"{style.value.removeprefix('rpc ')}: {named}{message}"
    if style in _RPC:
        from mcp.shared.exceptions import MCPError

        raise MCPError(_RPC[style], text)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


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
    MCPError (a JSON-RPC error some archipelago servers answer with) passes as it is, a
    `Failed` becomes its peer's answer (`failure`).
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
    """What a guarded tool's exception becomes: a `Failed`, the answer in its peer's words
    (`failure`); a ToolError or MCPError, itself (raised again); anything else, a ToolError."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError

    if isinstance(e, ToolError | MCPError):
        raise e
    if isinstance(e, Failed):
        tool = fn_name if e.tool is None else e.tool
        return capped(as_text(failure(tool, str(e), e.style)))
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
