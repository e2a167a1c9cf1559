"""One gateway serving a world's MCP tool servers over streamable HTTP.

    /mcp/    the MCP endpoint (streamable HTTP); `/mcp` works too
    /health  200 {"status": "ok", ...} when every server came up, 503 naming the ones
             that did not
    /ready   the same check, for orchestrators that probe readiness separately
    POST /data/snapshot   (with `snapshot_path` set, as Mercor's world images serve it) the
             world's state: a tar.gz of `filesystem/` and `.apps_data/`

Which servers and tools are mounted is the tool surface (`apexrl.worlds.surface`):
archipelago's names (`excel_read_tab`, `code_execution_code_exec`, always prefixed with
the server's name).

Readiness: each server's data is probed before it is mounted (a bad mbox, chat
JSON or .ics fails loudly, naming the server and file), and `wait_ready` connects
an MCP client to the running gateway and checks that every mounted tool is listed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apexrl.errors import ApexError, ExitCode
from apexrl.host import ssl_context
from apexrl.worlds.models import ServerStatus
from apexrl.worlds.servers import guard
from apexrl.worlds.surface import Surface, get_surface
from apexrl.worlds.world import World, app_names

MCP_PATH = "/mcp/"


def tool_name(server: str, base: str, n_servers: int, surface: str | None = None) -> str:
    """docs/facts.md section 2: with several servers, tool names carry the server's name
    (archipelago's surface always prefixes)."""
    return get_surface(surface).tool_name(server, base, n_servers)


@dataclass
class Gateway:
    world: World
    servers: list[str]
    surface: Surface | None = None
    status: dict[str, ServerStatus] = field(default_factory=dict)
    mcp: Any = None  # mcp.server.MCPServer
    tool_names: list[str] = field(default_factory=list)
    # with a token, every path is served under /<token>/ only (a per-trial capability:
    # another trial's sandbox that reaches the port cannot use this world)
    token: str | None = None
    # POST here answers the world's snapshot (tar.gz); None: no such route
    snapshot_path: str | None = None
    info: dict[str, Any] = field(default_factory=dict)  # more facts for /health (task_slug)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.status.values())

    def failed(self) -> list[ServerStatus]:
        return [s for s in self.status.values() if not s.ok]

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "failed",
            "world_id": self.world.world_id,
            "surface": self.surface.name if self.surface else None,
            "servers": {n: s.model_dump() for n, s in self.status.items()},
            "n_tools": len(self.tool_names),
            **self.info,
        }

    def snapshot_tar_gz(self, dest: Path) -> None:
        """The world's state as a tar.gz at `dest`, taken while no tool call writes."""
        from apexrl.worlds.snapshot import snapshot

        with self.world.lock:
            snapshot(self.world, dest)

    def starlette_app(self, host: str = "127.0.0.1"):
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        app = self.mcp.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
        mcp_route = next(r for r in app.router.routes if getattr(r, "path", None) == MCP_PATH)

        async def health(request: Request) -> JSONResponse:
            return JSONResponse(self.health(), status_code=200 if self.ok else 503)

        app.router.routes.extend(
            [
                Route("/mcp", endpoint=mcp_route.endpoint),
                Route("/health", endpoint=health, methods=["GET"]),
                Route("/ready", endpoint=health, methods=["GET"]),
            ]
        )
        if self.snapshot_path:
            app.router.routes.append(
                Route(self.snapshot_path, endpoint=self._snapshot_endpoint, methods=["POST"])
            )
        return _TokenPrefix(app, self.token) if self.token else app

    async def _snapshot_endpoint(self, request: Any) -> Any:
        import tempfile

        import anyio
        from starlette.background import BackgroundTask
        from starlette.responses import FileResponse, JSONResponse

        fd, name = tempfile.mkstemp(prefix="apexrl-snapshot-", suffix=".tar.gz")
        os.close(fd)
        path = Path(name)
        try:
            await anyio.to_thread.run_sync(self.snapshot_tar_gz, path)
        except Exception as e:  # reported, never a half-written tar
            path.unlink(missing_ok=True)
            return JSONResponse({"error": f"snapshot failed: {type(e).__name__}: {e}"}, 500)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return FileResponse(
            path,
            media_type="application/gzip",
            filename=f"snapshot-{self.world.world_id}-{stamp}.tar.gz",
            background=BackgroundTask(path.unlink, missing_ok=True),
        )


class _TokenPrefix:
    """ASGI wrapper: only paths under /<token>/ reach the app (prefix stripped); 404 else."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.prefix = "/" + token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        import hmac

        if scope["type"] in ("http", "websocket"):
            path = scope.get("path", "")
            head = path[: len(self.prefix)]
            rest = path[len(self.prefix) :]
            if not hmac.compare_digest(head.encode(), self.prefix.encode()) or (
                rest and not rest.startswith("/")
            ):
                if scope["type"] == "http":
                    await send({"type": "http.response.start", "status": 404, "headers": []})
                    await send({"type": "http.response.body", "body": b"not found"})
                return
            scope = {**scope, "path": rest or "/", "raw_path": (rest or "/").encode()}
        await self.app(scope, receive, send)


def build_gateway(
    world: World,
    *,
    apps: list[str] | None = None,
    strict: bool = True,
    surface: str | Surface | None = None,
    snapshot_path: str | None = None,
) -> Gateway:
    """Probe each server's data and register its tools on one MCP server.

    apps: world app names (`files`, `sheets`, ...; default: the world's, else all).
    surface: a tool surface or its name (default: archipelago, the only one).
    strict: raise (naming the servers and why) when any server does not come up;
    otherwise serve the rest and report the failure on /health (503).
    snapshot_path: serve the world's snapshot on POST there (Mercor's `/data/snapshot`).
    """
    import inspect

    from mcp.server import MCPServer

    surf = surface if isinstance(surface, Surface) else get_surface(surface)
    specs = surf.for_apps(list(apps or world.apps or app_names()))
    chosen = [s.name for s in specs]
    gw = Gateway(world=world, servers=chosen, surface=surf, snapshot_path=snapshot_path)
    gw.mcp = MCPServer(
        name=f"apexrl-world-{world.world_id}",
        instructions=(
            f"Tools over the world {world.world_id!r}: "
            "its files, documents, mail, chat and calendar."
        ),
        log_level="WARNING",
        warn_on_duplicate_tools=True,
    )
    for spec in specs:
        name = spec.name
        try:
            detail = spec.probe(world)
            names = []
            for fn in spec.bind(world):
                tname = surf.tool_name(name, fn.__name__, len(chosen))
                desc = (inspect.getdoc(fn) or "") if surf.flat_schemas else None
                _add_tool(gw.mcp, fn, tname, desc, surf.flat_schemas)
                names.append(tname)
            gw.status[name] = ServerStatus(name=name, ok=True, detail=detail, tools=names)
            gw.tool_names.extend(names)
        except Exception as e:  # a server that cannot come up is reported, never dropped
            gw.status[name] = ServerStatus(name=name, ok=False, detail=f"{type(e).__name__}: {e}")
    if strict and not gw.ok:
        lines = "; ".join(f"{s.name}: {s.detail}" for s in gw.failed())
        raise ApexError(
            f"world {world.world_id}: {len(gw.failed())} server(s) did not come up: {lines}",
            hint="fix the world data named above, or leave the server out with --apps",
            code=ExitCode.CHECK_FAILED,
        )
    return gw


# (tool name, function, signature, description, flat) -> a registered Tool: the argument
# model and JSON schema depend on the signature only, and cost ~2 ms a tool to build, so a
# gateway (or a fork server's child) reuses them and swaps in its own world's function.
_TOOL_TEMPLATES: dict[tuple, Any] = {}


def _add_tool(mcp: Any, fn: Any, tname: str, desc: str | None, flat: bool) -> None:
    import inspect

    sig = str(inspect.signature(fn))
    key = (tname, fn.__module__, fn.__qualname__, sig, inspect.iscoroutinefunction(fn), desc, flat)
    manager = mcp._tool_manager
    tools = getattr(manager, "_tools", None)
    template = _TOOL_TEMPLATES.get(key)
    if template is not None and isinstance(tools, dict) and tname not in tools:
        tools[tname] = template.model_copy(update={"fn": guard(fn)})
        return
    mcp.add_tool(guard(fn), name=tname, description=desc, structured_output=False)
    tool = manager.get_tool(tname)
    if flat and tool is not None and isinstance(tool.parameters, dict):
        tool.parameters = inline_refs(tool.parameters)
    if tool is not None:
        _TOOL_TEMPLATES[key] = tool


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with local `$ref`s replaced by their definitions, `$defs` and the
    generated `title`s dropped: models see flat argument schemas, as archipelago's servers
    publish them (and ~30% fewer prompt tokens)."""
    defs = schema.get("$defs") or {}

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                key = ref.rsplit("/", 1)[-1]
                if key in defs and key not in seen:
                    rest = {k: v for k, v in node.items() if k != "$ref"}
                    return {**walk(defs[key], (*seen, key)), **walk(rest, seen)}
            out = {}
            for k, v in node.items():
                if k == "$defs" or (k == "title" and isinstance(v, str)):
                    continue
                if k == "properties" and isinstance(v, dict):  # names, not schema keywords
                    out[k] = {name: walk(sub, seen) for name, sub in v.items()}
                else:
                    out[k] = walk(v, seen)
            return out
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    return walk(schema, ())


# --- running --------------------------------------------------------------------------


def bind_socket(host: str, port: int) -> socket.socket:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose
    # proto says TCP; without it every keep-alive response waits ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(fam, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ApexError(
            f"cannot listen on {host}:{port}: {e}", hint="pick another --port (0 = any free port)"
        ) from e
    sock.listen(128)
    sock.setblocking(False)
    return sock


def urls(host: str, port: int, token: str | None = None) -> tuple[str, str]:
    h = "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)
    base = f"http://{h}:{port}" + (f"/{token}" if token else "")
    return base + MCP_PATH, base + "/health"


async def wait_ready(
    url: str, health_url: str, expected_tools: list[str], *, timeout_s: float = 30.0
) -> int:
    """Connect an MCP client to the gateway and check every expected tool is listed.

    Returns the number of tools; raises ApexError naming what is missing."""
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            async with httpx.AsyncClient(timeout=5, verify=ssl_context()) as hc:
                r = await hc.get(health_url)
            if r.status_code != 200:
                raise ApexError(f"gateway health check failed ({r.status_code}): {r.text[:500]}")
            left = max(1.0, deadline - time.monotonic())
            async with asyncio.timeout(left):
                http = httpx2.AsyncClient(timeout=left, verify=ssl_context())
                async with http, Client(streamable_http_client(url, http_client=http)) as c:
                    listed = {t.name for t in (await c.list_tools()).tools}
            missing = [t for t in expected_tools if t not in listed]
            if missing:
                raise ApexError(
                    f"gateway is up but {len(missing)} tools are missing: {', '.join(missing[:20])}"
                )
            return len(listed)
        except ApexError:
            raise
        except Exception as e:  # not up yet
            last = e
            await asyncio.sleep(0.1)
    raise ApexError(
        f"gateway at {url} did not become ready within {timeout_s:.0f}s: {last}",
        code=ExitCode.REMOTE,
    )


@dataclass
class RunningGateway:
    gateway: Gateway
    host: str
    port: int
    url: str
    health_url: str
    n_tools: int = 0


def _uvicorn_server(
    gateway: Gateway, host: str, port: int
) -> tuple[Any, socket.socket, RunningGateway]:
    """A uvicorn server for `gateway` (not started), the socket it will serve (bound now:
    port 0 picks a free one) and where it will answer."""
    import uvicorn

    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    url, health_url = urls(host, port, gateway.token)
    config = uvicorn.Config(gateway.starlette_app(host=host), log_level="warning", lifespan="on")
    return uvicorn.Server(config), sock, RunningGateway(gateway, host, port, url, health_url)


@contextlib.contextmanager
def serve_in_thread(
    gateway: Gateway, *, host: str = "127.0.0.1", port: int = 0, ready_timeout_s: float = 30.0
) -> Iterator[RunningGateway]:
    """Run the gateway in a background thread (tests, in-process agents); stops on exit."""
    server, sock, running = _uvicorn_server(gateway, host, port)
    port = running.port
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="apexrl-gateway", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ApexError(
                    f"gateway on {host}:{port} did not start within {ready_timeout_s:.0f}s"
                )
            time.sleep(0.02)
        if gateway.ok:
            running.n_tools = asyncio.run(
                wait_ready(
                    running.url, running.health_url, gateway.tool_names, timeout_s=ready_timeout_s
                )
            )
        yield running
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


async def serve_forever(
    gateway: Gateway, *, host: str, port: int, on_ready, ready_timeout_s: float = 30.0
) -> None:
    """Serve until cancelled (Ctrl-C); call `on_ready(RunningGateway)` once tools answer."""
    server, sock, running = _uvicorn_server(gateway, host, port)
    port = running.port
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not server.started:
            if task.done():
                task.result()
                raise ApexError(f"gateway on {host}:{port} stopped while starting")
            if time.monotonic() > deadline:
                raise ApexError(
                    f"gateway on {host}:{port} did not start within {ready_timeout_s:.0f}s"
                )
            await asyncio.sleep(0.02)
        running.n_tools = await wait_ready(
            running.url, running.health_url, gateway.tool_names, timeout_s=ready_timeout_s
        )
        on_ready(running)
        await task
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=10)
        sock.close()
