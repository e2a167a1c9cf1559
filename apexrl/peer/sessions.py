"""MCP client sessions on both runtimes, with one way to call a tool and read the result.

`peer_session` starts one archipelago server (stdio, in bubblewrap) over a world folder;
`apexrl_session` serves apexrl's own server for the same app over another copy (its
gateway, streamable HTTP on 127.0.0.1). Both yield a `ToolClient`; a result is reduced
to what a model sees: the error flag and each content block (text as it is, an image
as its MIME type and a hash of its bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apexrl.peer.launch import bwrap_argv, bwrap_path, server_env
from apexrl.peer.runtime import Runtime

START_TIMEOUT_S = 120.0
CALL_TIMEOUT_S = 120.0


@dataclass
class Reply:
    """What a model sees of one call."""

    error: bool
    blocks: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"error": self.error, "content": self.blocks}


def reply_of(result: Any) -> Reply:
    blocks = []
    for b in result.content:
        if getattr(b, "type", None) == "text":
            blocks.append(b.text)
        elif getattr(b, "type", None) == "image":
            import base64

            digest = hashlib.sha256(base64.b64decode(b.data)).hexdigest()[:16]
            mime = getattr(b, "mime_type", None) or getattr(b, "mimeType", None)
            blocks.append(f"<image {mime} sha256:{digest}>")
        else:
            blocks.append(f"<{getattr(b, 'type', type(b).__name__)} block>")
    err = getattr(result, "is_error", None)
    if err is None:
        err = getattr(result, "isError", False)
    return Reply(error=bool(err), blocks=blocks)


class ToolClient:
    """Calls tools of one server by base name; `wrap` puts flat arguments into the
    envelope a tool's schema asks for (archipelago's `input`/`request`)."""

    def __init__(self, session: Any, prefix: str, envelopes: bool) -> None:
        self.session = session
        self.prefix = prefix
        self.envelopes = envelopes
        self.schemas: dict[str, dict] = {}

    async def load(self) -> list[str]:
        listed = await asyncio.wait_for(self.session.list_tools(), CALL_TIMEOUT_S)
        self.schemas = {t.name: _schema(t) for t in listed.tools}
        return list(self.schemas)

    def name(self, base: str) -> str:
        return f"{self.prefix}_{base}" if self.prefix else base

    def wrap(self, base: str, args: dict[str, Any]) -> dict[str, Any]:
        if not self.envelopes:
            return args
        props = (self.schemas.get(self.name(base)) or {}).get("properties") or {}
        if len(props) == 1:
            (key,) = props
            if key in ("input", "request") and key not in args:
                return {key: args}
        return args

    async def call(self, base: str, args: dict[str, Any]) -> Reply:
        try:
            result = await asyncio.wait_for(
                self.session.call_tool(self.name(base), self.wrap(base, args)), CALL_TIMEOUT_S
            )
        except TimeoutError:
            return Reply(error=True, blocks=[f"<no reply in {CALL_TIMEOUT_S:.0f} s>"])
        except Exception as e:  # protocol errors (archipelago raises some as MCP errors)
            return Reply(error=True, blocks=[_protocol_error(e)])
        return reply_of(result)


def _schema(tool: Any) -> dict:
    return getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None) or {}


def _protocol_error(e: BaseException) -> str:
    err = getattr(e, "error", None)
    if err is not None and getattr(err, "message", None) is not None:
        return str(err.message)
    return str(e) or type(e).__name__


@contextlib.asynccontextmanager
async def _stdio_session(
    argv: list[str], env: dict[str, str], log: Path, prefix: str, *, envelopes: bool
) -> AsyncIterator[ToolClient]:
    """A server started as `argv` (its stderr appended to `log`), over stdio."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    with open(log, "a") as errlog:
        async with asyncio.timeout(START_TIMEOUT_S):
            client = Client(
                stdio_client(params, errlog=errlog), read_timeout_seconds=CALL_TIMEOUT_S
            )
            await client.__aenter__()
        try:
            tc = ToolClient(client, prefix, envelopes=envelopes)
            await tc.load()
            yield tc
        finally:
            await client.__aexit__(None, None, None)


@contextlib.asynccontextmanager
async def peer_session(rt: Runtime, world: Path) -> AsyncIterator[ToolClient]:
    argv = bwrap_argv(bwrap_path(), rt, world)
    log = world.parent / f".peer-{rt.server.folder}.log"
    async with _stdio_session(argv, server_env(rt), log, "", envelopes=True) as tc:
        yield tc


# apexrl's servers whose replies depend on where the world is (code_exec's folder and
# the paths its commands see): verify runs them in the peer's own sandbox layout, world
# at /filesystem and /.apps_data, so both sides' code runs in the same place
IN_SANDBOX = {"code_execution"}


@contextlib.asynccontextmanager
async def apexrl_session(server: str, world: Path) -> AsyncIterator[ToolClient]:
    if server in IN_SANDBOX:
        async with _sandboxed_apexrl(server, world) as tc:
            yield tc
        return
    from mcp import Client

    from apexrl.worlds.gateway import build_gateway
    from apexrl.worlds.surface import ARCHIPELAGO
    from apexrl.worlds.world import open_world

    w = open_world(world)
    spec = ARCHIPELAGO.server(server)
    try:
        gw = build_gateway(w, apps=[spec.app], surface=ARCHIPELAGO)
        async with Client(gw.mcp, read_timeout_seconds=CALL_TIMEOUT_S) as client:
            tc = ToolClient(client, server, envelopes=False)
            await tc.load()
            yield tc
    finally:
        w.close()


@contextlib.asynccontextmanager
async def _sandboxed_apexrl(server: str, world: Path) -> AsyncIterator[ToolClient]:
    """apexrl's gateway for `server` over stdio, in the sandbox `peer_session` uses."""
    import os
    import sys

    from apexrl.peer.launch import sandbox_argv

    command = [sys.executable, "-m", "apexrl.peer.stdio_gateway", server]
    argv = sandbox_argv(bwrap_path(), world, "/", command)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONDONTWRITEBYTECODE": "1",
        **{k: os.environ[k] for k in ("PYTHONPATH", "VIRTUAL_ENV") if k in os.environ},
    }
    log = world.parent / f".apexrl-{server}.log"
    async with _stdio_session(argv, env, log, server, envelopes=False) as tc:
        yield tc
