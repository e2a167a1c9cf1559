"""`--runtime archipelago`: a world served by archipelago's own MCP servers behind
apexrl's gateway.

The gateway (token prefix, /health, readiness, the local sandbox around it) is
apexrl's; every tool behind it is one of archipelago's servers, started from the
runtimes `make peer` built for a checkout (`apexrl.peer.runtime`) and spoken to over
stdio. The agent sees archipelago's tool names under the recipe's server prefixes
(`excel_read_tab`, `code_execution_code_exec`), the servers' own argument schemas with
their `input`/`request` envelope taken off (as the recipe shows them to the model;
the gateway puts the envelope back on dispatch), the servers' own descriptions, and
every result as the server returned it. A call the server refuses with a protocol
error comes back as an error result carrying the server's message.

Where the servers run:
  nested  inside the local sandbox (the trial's namespaces, uid and limits), each in
          namespaces of its own, as apexrl's code tool runs each command: a user
          namespace with no capability left, its own PID namespace (the gateway is not
          in it) and /proc, its own mount namespace, and no network when the task
          allows none. The world is at /filesystem and /.apps_data (the sandbox binds
          the trial's world there).
  bwrap   on the host (`world serve`): each in bubblewrap over the world
          (`apexrl.peer.launch`), no network.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apexrl.errors import ApexError, ExitCode, UsageError
from apexrl.peer.launch import bwrap_argv, bwrap_path, server_env
from apexrl.peer.runtime import Runtime, by_name
from apexrl.worlds.gateway import Gateway

START_TIMEOUT_S = 180.0
CALL_TIMEOUT_S = 900.0
ENVELOPES = ("input", "request")
RUNTIMES = ("apexrl", "archipelago")

# Run by `unshare` as root of the server's new user namespace: a /proc of its own PID
# namespace where the kernel allows one (else the sandbox's own /proc, the one apexrl's
# gateway sees: the servers read /proc/cpuinfo and /proc/self), then no capability left.
_STAGE = (
    "mount -t proc -o nosuid,nodev,noexec proc /proc 2>/dev/null; "
    'exec setpriv --no-new-privs --bounding-set=-all --inh-caps=-all -- "$@"'
)


def check_runtime(name: str | None) -> str:
    value = (name or "apexrl").strip().lower()
    if value not in RUNTIMES:
        raise UsageError(
            f"unknown runtime {name!r}",
            hint="--runtime apexrl (apexrl's own servers) or archipelago (a checkout's own)",
        )
    return value


@dataclass(frozen=True)
class PeerPlan:
    """What a gateway needs to run a checkout's servers: JSON-safe, handed from the
    host to the sandboxed gateway on its stdin."""

    servers: tuple[tuple[str, str], ...]  # (apexrl's server name, runtime root)
    checkout: str
    key: str
    commit: str | None = None

    def runtimes(self) -> list[Runtime]:
        return [Runtime(by_name()[name], Path(root)) for name, root in self.servers]

    def as_json(self) -> dict[str, Any]:
        return {
            "servers": [list(s) for s in self.servers],
            "checkout": self.checkout,
            "key": self.key,
            "commit": self.commit,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PeerPlan:
        return cls(
            servers=tuple((str(n), str(r)) for n, r in d["servers"]),
            checkout=str(d["checkout"]),
            key=str(d["key"]),
            commit=d.get("commit"),
        )

    def read_only_paths(self) -> list[str]:
        """Host folders the sandbox shows read-only: each runtime (its copy of the server,
        venv and shim) and the Python 3.13 its venv was made from."""
        out: list[str] = []
        for rt in self.runtimes():
            out.append(str(rt.root))
            real = Path(os.path.realpath(rt.python))
            prefix = str(real.parent.parent)
            if not prefix.startswith(("/usr/", "/bin", "/lib")) and prefix not in out:
                out.append(prefix)
        return out


def checkout_record(checkout: str | Path | None) -> tuple[Path, str | None, str]:
    """(the checkout's folder, its git commit or None, its content key) for run.json."""
    from apexrl.artifacts.checkout import checkout_commit
    from apexrl.peer.runtime import find_checkout

    root = find_checkout(checkout)
    return root, checkout_commit(root), _key(root)


_KEYS: dict[str, str] = {}


def _key(root: Path) -> str:
    """The checkout's content key, hashed once per process."""
    from apexrl.peer.runtime import checkout_key

    if str(root) not in _KEYS:
        _KEYS[str(root)] = checkout_key(root)
    return _KEYS[str(root)]


def prepare_runtime(checkout: str | Path | None, on_progress=None) -> None:
    """Before any trial: every server's runtime is built (once, shown as it goes). Which
    environments can run them is the environment registry's `peer_runtime`, checked by
    the trial spec (apexrl.envs.registry.check_runtime)."""
    plan_for(None, checkout, on_progress=on_progress)


def plan_for(
    apps: list[str] | None,
    checkout: str | Path | None = None,
    *,
    build: bool = True,
    on_progress=None,
) -> PeerPlan:
    """The servers serving `apps` (world app names; None: all) from `checkout` (else
    $APEXRL_ARCHIPELAGO, else the default), built first when missing (`build`)."""
    from apexrl.peer.runtime import runtimes
    from apexrl.worlds.surface import ARCHIPELAGO
    from apexrl.worlds.world import app_names

    root, commit, key = checkout_record(checkout)
    specs = ARCHIPELAGO.for_apps(list(apps or app_names()))
    names = [s.name for s in specs if s.name in by_name()]
    if not names:
        raise UsageError(f"none of the apps {apps} is served by archipelago's servers")
    rts = runtimes(root, servers=names, build=build, on_progress=on_progress)
    return PeerPlan(
        servers=tuple((n, str(rts[n].root)) for n in names),
        checkout=str(root),
        key=key,
        commit=commit,
    )


_PLANS: dict[str, PeerPlan] = {}


def cached_plan(checkout: str | Path | None) -> PeerPlan:
    """Every server of `checkout` (built when missing), once per process: a sandbox shows
    them all; its gateway starts those its world's apps need (`for_apps`)."""
    k = str(checkout or "")
    if k not in _PLANS:
        _PLANS[k] = plan_for(None, checkout)
    return _PLANS[k]


def for_apps(plan: PeerPlan, apps: list[str] | None) -> PeerPlan:
    """`plan` narrowed to the servers of `apps` (world app names; None or empty: all)."""
    from apexrl.worlds.surface import ARCHIPELAGO

    if not apps:
        return plan
    wanted = {s.name for s in ARCHIPELAGO.for_apps(list(apps))}
    return PeerPlan(
        servers=tuple(s for s in plan.servers if s[0] in wanted),
        checkout=plan.checkout,
        key=plan.key,
        commit=plan.commit,
    )


def nested_argv(rt: Runtime, *, network: bool) -> list[str]:
    """Start `rt`'s server in namespaces of its own inside the sandbox (module doc)."""
    ns = ["--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount"]
    if not network:
        ns.append("--net")
    return ["unshare", *ns, "--", "/bin/sh", "-c", _STAGE, "apexrl-peer", str(rt.python), "main.py"]


@dataclass
class Backend:
    """One running server: its MCP client and the tools it lists."""

    name: str  # apexrl's server name: the prefix of its tools
    client: Any
    tools: list[Any]


def flat_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The argument schema a model sees, and the envelope key taken off (or None)."""
    from apexrl.worlds.gateway import inline_refs

    flat = inline_refs(schema)
    props = flat.get("properties") or {}
    if len(props) == 1:
        (key,) = props
        inner = props[key]
        if key in ENVELOPES and isinstance(inner, dict) and inner.get("type") == "object":
            return inner, key
    return flat, None


def _proxy_class():
    from mcp.server import MCPServer
    from mcp.shared.exceptions import MCPError
    from mcp_types import CallToolResult, TextContent
    from mcp_types import Tool as MCPTool

    class PeerProxy(MCPServer):
        """An MCP server whose tools are other servers' tools (renamed, envelopes off)."""

        def __init__(self, backends: list[Backend], **kw: Any) -> None:
            super().__init__(**kw)
            self.route: dict[str, tuple[Backend, str, str | None]] = {}
            self.listed: list[Any] = []
            for b in backends:
                for t in b.tools:
                    name = f"{b.name}_{t.name}"
                    raw = getattr(t, "input_schema", None) or {}
                    schema, envelope = flat_schema(raw)
                    self.route[name] = (b, t.name, envelope)
                    self.listed.append(
                        MCPTool(
                            name=name,
                            title=getattr(t, "title", None),
                            description=t.description,
                            input_schema=schema,
                            annotations=getattr(t, "annotations", None),
                        )
                    )

        def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
            return None  # the server behind checks its own arguments

        async def list_tools(self) -> list[Any]:
            return list(self.listed)

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None):
            found = self.route.get(name)
            if found is None:
                return CallToolResult(
                    content=[TextContent(type="text", text=f"Unknown tool: {name}")],
                    is_error=True,
                )
            backend, base, envelope = found
            args = dict(arguments or {})
            if envelope is not None:
                args = {envelope: args}
            try:
                return await backend.client.call_tool(
                    base, args, read_timeout_seconds=CALL_TIMEOUT_S
                )
            except MCPError as e:  # the server's own refusal, as the model sees it
                msg = getattr(getattr(e, "error", None), "message", None) or str(e)
                return CallToolResult(content=[TextContent(type="text", text=msg)], is_error=True)

    return PeerProxy


def _leaves(e: BaseException) -> str:
    """An exception group's innermost exceptions, as one line."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_leaves(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def _hold(
    name: str,
    params: Any,
    errlog: Any,
    ready: asyncio.Future,
    stop: asyncio.Event,
) -> None:
    """Open one server's stdio session, report it, keep it until `stop` (one task opens
    and closes it: its cancel scopes stay in the task that made them)."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    try:
        async with Client(
            stdio_client(params, errlog=errlog), read_timeout_seconds=CALL_TIMEOUT_S
        ) as client:
            listed = await client.list_tools()
            ready.set_result(Backend(name, client, list(listed.tools)))
            await stop.wait()
    except BaseException as e:
        if not ready.done():
            err = RuntimeError(f"{name}: {_leaves(e)}")
            ready.set_exception(err)
        if not isinstance(e, Exception):
            raise


@contextlib.asynccontextmanager
async def start_servers(
    plan: PeerPlan,
    *,
    mode: str,
    network: bool = False,
    world: Path | None = None,
    errlog: Any = None,
    timeout_s: float = START_TIMEOUT_S,
) -> AsyncIterator[list[Backend]]:
    """Start every server of `plan` at once; yield them once each lists its tools."""
    from mcp import StdioServerParameters

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    tasks, futures = [], []
    for rt in plan.runtimes():
        env = server_env(rt)
        if mode == "nested":
            argv, cwd = nested_argv(rt, network=network), str(rt.main_dir)
        elif mode == "bwrap":
            assert world is not None
            argv, cwd = bwrap_argv(bwrap_path(), rt, world), None
        else:
            raise ValueError(mode)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
        fut: asyncio.Future = loop.create_future()
        futures.append(fut)
        tasks.append(
            asyncio.create_task(_hold(rt.server.name, params, errlog or sys.stderr, fut, stop))
        )
    try:
        try:
            async with asyncio.timeout(timeout_s):
                backends = list(await asyncio.gather(*futures))
        except TimeoutError:
            late = [
                rt.server.folder
                for rt, f in zip(plan.runtimes(), futures, strict=True)
                if not f.done()
            ]
            raise ApexError(
                f"archipelago's servers did not list their tools within {timeout_s:.0f} s: "
                + ", ".join(late),
                code=ExitCode.REMOTE,
            ) from None
        except Exception as e:
            raise ApexError(
                f"an archipelago server did not start: {_leaves(e)}",
                hint="see the gateway log; `make peer` builds the servers' runtimes",
                code=ExitCode.REMOTE,
            ) from e
        yield backends
    finally:
        stop.set()
        for f in futures:  # exceptions of servers that failed after another one did
            if f.done() and not f.cancelled():
                f.exception()
        done, pending = await asyncio.wait(tasks, timeout=15)
        for t in pending:
            t.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class PeerGateway(Gateway):
    """apexrl's gateway over archipelago's servers: /health also names the runtime and
    the checkout (its commit, when it is a git checkout, and its content key)."""

    plan: PeerPlan | None = None

    def health(self) -> dict[str, Any]:
        out = super().health()
        out["runtime"] = "archipelago"
        if self.plan is not None:
            out["checkout_commit"] = self.plan.commit
            out["checkout_key"] = self.plan.key
        return out


def build_peer_gateway(world: Any, plan: PeerPlan, backends: list[Backend]) -> PeerGateway:
    """apexrl's Gateway (token, /health, readiness) over the running servers."""
    from apexrl.worlds.models import ServerStatus

    proxy = _proxy_class()(backends, name=f"apexrl-world-{world.world_id}", log_level="WARNING")
    gw = PeerGateway(world=world, servers=[b.name for b in backends], plan=plan)
    gw.mcp = proxy
    for b in backends:
        names = [f"{b.name}_{t.name}" for t in b.tools]
        gw.status[b.name] = ServerStatus(
            name=b.name, ok=True, detail=f"archipelago {by_name()[b.name].folder}", tools=names
        )
        gw.tool_names.extend(names)
    return gw


async def serve_peer(
    world: Any,
    plan: PeerPlan,
    *,
    mode: str,
    network: bool,
    host: str,
    port: int,
    on_ready,
    token: str | None = None,
    ready_timeout_s: float = 30.0,
    errlog: Any = None,
    snapshot_path: str | None = None,
    info: dict[str, Any] | None = None,
) -> None:
    """Start the servers, then serve them until cancelled (`serve_forever`'s contract).
    `snapshot_path`, `info`: as for apexrl's gateway (an image profile's snapshot
    endpoint, more facts for /health)."""
    from apexrl.worlds.gateway import serve_forever

    world_root = Path(world.root) if mode == "bwrap" else None
    names = ", ".join(by_name()[n].folder for n, _ in plan.servers)
    print(
        f"apexrl: archipelago's servers ({names}) from {plan.checkout} "
        f"(commit {plan.commit or 'unknown'}, key {plan.key})",
        file=errlog or sys.stderr,
        flush=True,
    )
    async with start_servers(
        plan, mode=mode, network=network, world=world_root, errlog=errlog
    ) as backends:
        gw = build_peer_gateway(world, plan, backends)
        gw.token = token
        gw.snapshot_path = snapshot_path
        gw.info.update(info or {})
        await serve_forever(
            gw, host=host, port=port, on_ready=on_ready, ready_timeout_s=ready_timeout_s
        )


def told_plan(told: dict[str, Any]) -> PeerPlan | None:
    """The plan in the sandboxed gateway's start line, if it names one."""
    raw = told.get("peer")
    if not raw:
        return None
    return PeerPlan.from_json(raw if isinstance(raw, dict) else json.loads(raw))
