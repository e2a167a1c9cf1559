"""A tool server's declaration: its names and its tools (see `Server`)."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any


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
