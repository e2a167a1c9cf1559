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
import sys
from collections.abc import Callable
from typing import Any

from apexrl.worlds.servers.caps import capped


class Server:
    """One tool server, declared in its module:

        SERVER = Server("word", app="docs", aliases=("documents",), peer_folder="documents")

        @SERVER.tool
        def read_document_content(world: World, file_path: str) -> str: ...

    `name` prefixes its tool names, `app` is the world app it serves (`files`, `docs`, ...)
    and `aliases` the other names a world's `apps` list may give that app (lower-case, '_'
    for '-' and ' '); `peer_folder` is archipelago's `mcp_servers/<folder>` serving the
    same tools. Tools are module-level functions registered with `@SERVER.tool`, listed in
    registration order: the function name is the tool's base name, its docstring the
    description. Their leading parameters named `world` or a key of `state` are given by
    the gateway (`bind`) and hidden from the tool's schema; `state` makes one object per
    gateway (an image cache a read fills and read_image answers from). The module's
    `probe(world) -> str` reads the server's data and raises when it cannot serve it."""

    def __init__(
        self,
        name: str,
        *,
        app: str,
        aliases: tuple[str, ...] = (),
        peer_folder: str | None = None,
        state: dict[str, Callable[[], Any]] | None = None,
    ) -> None:
        self.name = name
        self.app = app
        self.aliases = aliases
        self.peer_folder = peer_folder or name
        self.state = dict(state or {})
        self.module = sys._getframe(1).f_globals.get("__name__", "")
        self._tools: dict[str, Callable[..., Any]] = {}

    def __repr__(self) -> str:
        return f"Server({self.name!r}, app={self.app!r}, module={self.module!r})"

    def tool(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register `fn` as a tool (returned unchanged: callable directly with its world)."""
        name = fn.__name__
        if name in self._tools:
            raise ValueError(f"server {self.name!r} already has a tool {name!r}")
        self._tools[name] = fn
        return fn

    @property
    def tools(self) -> tuple[str, ...]:
        """The tool base names, in listing order."""
        return tuple(self._tools)

    def probe(self, world: Any) -> str:
        return sys.modules[self.module].probe(world)

    def bind(self, world: Any) -> list[Callable[..., Any]]:
        """The tools as the gateway registers them: `world` (and one object per `state`
        key) given, the rest of the signature as the schema shows it."""
        given = {"world": world, **{k: make() for k, make in self.state.items()}}
        return [_bound(fn, given) for fn in self._tools.values()]


def _bound(fn: Callable[..., Any], given: dict[str, Any]) -> Callable[..., Any]:
    sig = inspect.signature(fn, eval_str=True)
    params = list(sig.parameters.values())
    lead = []
    for p in params:
        if p.name not in given:
            break
        lead.append(given[p.name])
    shown = sig.replace(parameters=params[len(lead) :])
    if any(p.name in given for p in shown.parameters.values()):
        raise TypeError(f"{fn.__qualname__}: {', '.join(given)} must be its first parameters")
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def abound(*args: Any, **kwargs: Any) -> Any:
            return await fn(*lead, *args, **kwargs)

        abound.__signature__ = shown  # type: ignore[attr-defined]
        return abound

    @functools.wraps(fn)
    def bound(*args: Any, **kwargs: Any) -> Any:
        return fn(*lead, *args, **kwargs)

    bound.__signature__ = shown  # type: ignore[attr-defined]
    return bound


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
