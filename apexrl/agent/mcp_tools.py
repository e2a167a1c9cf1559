"""The agent's side of a world's MCP gateway: readiness, tool listing, classified calls.

    box = ToolBox(url)                      # http://host:port/mcp/
    await box.connect(ready_timeout_s=60)   # waits for /health, then lists tools
    out = await box.call("filesystem_read_text_file", {"file_path": "/a.txt"}, timeout_s=600)
    out.status  # ok | timeout | mcp_error | empty_content | fatal_mcp_error

Classification (docs/facts.md section 5):
  ok               the tool answered with non-empty content
  mcp_error        the tool answered with isError (bad arguments, missing file,
                   unknown tool): the model sees the message and can fix its call
  empty_content    the tool answered with nothing
  timeout          no answer within the per-call timeout (the gateway is still up)
  fatal_mcp_error  the gateway cannot be reached or the session broke; the caller
                   reconnects once (`reconnect`) and retries

Replies are read through a byte cap (`max_reply_bytes`, the `tool_reply_max_bytes`
budget): a reply that grows past it is refused while it streams in (never held whole),
and the model reads an mcp_error saying so. The world's tool servers cap their replies at
the source as well (`apexrl.worlds.servers.caps`); this cap holds for any server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

ToolStatus = Literal["ok", "timeout", "mcp_error", "empty_content", "fatal_mcp_error"]


# How long one attempt to open the session and list the tools may take before it is
# retried. archipelago's environment gateway (Mercor's images) starts its servers for each
# new session: ~25 s to the first tools/list on a loaded 2-CPU machine, so a short cap
# would never let the agent connect to it.
OPEN_ATTEMPT_S = 120.0


DEFAULT_REPLY_MAX_BYTES = 16 * 1024 * 1024


class GatewayNotReady(Exception):
    """The gateway did not answer /health and tools/list in time."""


class ToolsNotOffered(Exception):
    """The allowlist names a tool the world's gateway does not list (a usage error of the
    run, not a score: the trial fails as infrastructure)."""


@dataclass
class ToolOutcome:
    status: ToolStatus
    text: str
    duration_s: float
    error: str | None = None


def refused_text(name: str, limit: int) -> str:
    return (
        f"Error: the reply of the tool {name} was larger than {limit:,} bytes (the limit of "
        "one tool reply) and was not read. Ask for a smaller part: a page, a range of lines "
        "or cells, or a search."
    )


@dataclass
class ToolBox:
    url: str  # the MCP endpoint (…/mcp/)
    headers: dict[str, str] = field(default_factory=dict)
    max_reply_bytes: int = DEFAULT_REPLY_MAX_BYTES  # 0: no cap
    refused: int = 0  # replies refused for their size
    tools: list[dict] = field(default_factory=list)  # OpenAI function schemas
    names: set[str] = field(default_factory=set)
    # the tools offered to the agent (None: every tool the gateway lists); a call to any
    # other is answered like a call to a tool that does not exist
    allow: list[str] | None = None
    _client: Any = None
    _owner: asyncio.Task | None = None
    _stop: asyncio.Event | None = None
    reconnects: int = 0

    @property
    def health_url(self) -> str:
        base = self.url.rstrip("/")
        if base.endswith("/mcp"):
            base = base[: -len("/mcp")]
        return base + "/health"

    async def healthy(self, timeout_s: float = 3.0) -> bool:
        import httpx

        try:
            async with httpx.AsyncClient(timeout=timeout_s) as hc:
                r = await hc.get(self.health_url)
            return r.status_code == 200
        except (httpx.HTTPError, OSError):
            return False

    async def connect(self, *, ready_timeout_s: float = 60.0) -> None:
        """Wait for /health (200) and a tools/list that answers; keep the session open."""
        deadline = time.monotonic() + ready_timeout_s
        last = "no answer"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GatewayNotReady(
                    f"MCP gateway at {self.url} not ready within {ready_timeout_s:.0f}s: {last}"
                )
            if await self.healthy(timeout_s=min(3.0, left)):
                try:
                    async with asyncio.timeout(max(0.5, min(OPEN_ATTEMPT_S, left))):
                        await self._open()
                        listed = await self._client.list_tools()
                    self._set_tools(listed.tools)
                    break
                except Exception as e:  # not up yet, or the session broke while opening
                    last = f"{type(e).__name__}: {e}"
                    await self.close()
            else:
                last = f"{self.health_url} not healthy"
            await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        missing = sorted(set(self.allow or ()) - self.names)
        if missing:
            await self.close()
            raise ToolsNotOffered(
                f"the tool allowlist names {', '.join(missing)}, which the MCP gateway at "
                f"{self.url} does not list (it lists: {', '.join(sorted(self.names)) or 'none'})"
            )
        if self.allow is not None:
            keep = set(self.allow)
            self.tools = [t for t in self.tools if t["function"]["name"] in keep]
            self.names &= keep

    async def _open(self) -> None:
        """Open the MCP session in its own task.

        The MCP client runs its transport in an anyio task group; when the gateway
        dies, that group cancels the task that entered it. Entering it in a
        dedicated owner task keeps that cancellation away from the agent's loop:
        a dead gateway shows as the owner task ending, never as a stray
        CancelledError in the caller."""
        await self.close()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future = loop.create_future()
        stop = asyncio.Event()
        self._stop = stop
        self._owner = asyncio.create_task(self._own(ready, stop), name="apexrl-mcp-session")
        done, _ = await asyncio.wait({ready, self._owner}, return_when=asyncio.FIRST_COMPLETED)
        if ready in done and not ready.cancelled() and ready.exception() is None:
            self._client = ready.result()
            return
        err = (
            self._owner.exception() if self._owner.done() and not self._owner.cancelled() else None
        )
        raise ConnectionError(f"MCP session did not open: {err or 'closed'}")

    async def _own(self, ready: asyncio.Future, stop: asyncio.Event) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        try:
            async with contextlib.AsyncExitStack() as stack:
                hc = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers={**self.headers, "accept-encoding": "identity"},
                        timeout=httpx2.Timeout(30.0, read=300.0),  # the SDK's own defaults
                        transport=_capped_transport_class()(self),
                    )
                )
                target = streamable_http_client(
                    self.url, http_client=hc, max_sse_event_size=self.max_reply_bytes or None
                )
                client = await stack.enter_async_context(Client(target))
                ready.set_result(client)
                await stop.wait()
        except BaseException as e:  # noqa: BLE001 - the session ended; callers see it as fatal
            if not ready.done():
                ready.set_exception(ConnectionError(f"{type(e).__name__}: {e}"))
            if isinstance(e, asyncio.CancelledError) and stop.is_set():
                return
            if not isinstance(e, Exception):
                return

    def _set_tools(self, tools: list) -> None:
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.input_schema or {"type": "object", "properties": {}},
                },
            }
            for t in tools
        ]
        self.names = {t.name for t in tools}

    async def reconnect(self, *, ready_timeout_s: float = 30.0) -> None:
        self.reconnects += 1
        await self.close()
        await self.connect(ready_timeout_s=ready_timeout_s)

    @property
    def alive(self) -> bool:
        return self._client is not None and self._owner is not None and not self._owner.done()

    async def close(self) -> None:
        owner, stop = self._owner, self._stop
        self._owner, self._stop, self._client = None, None, None
        if owner is None:
            return
        if stop is not None:
            stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), timeout=5)
        except (TimeoutError, Exception, asyncio.CancelledError):
            owner.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, timeout=2)

    async def call(self, name: str, arguments: dict[str, Any], *, timeout_s: float) -> ToolOutcome:
        t0 = time.monotonic()

        def done(status: ToolStatus, text: str, error: str | None = None) -> ToolOutcome:
            return ToolOutcome(status, text, time.monotonic() - t0, error)

        if name not in self.names:
            avail = ", ".join(sorted(self.names)[:50])
            return done(
                "mcp_error",
                f"Error: there is no tool named {name!r}. Available tools: {avail}",
                "unknown_tool",
            )
        if not self.alive:
            return done("fatal_mcp_error", "Error: the tool gateway is not connected.", "closed")
        owner = self._owner
        assert owner is not None
        refused = self.refused
        task = asyncio.create_task(self._client.call_tool(name, arguments))
        finished, _ = await asyncio.wait(
            {task, owner}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
        )
        if task not in finished:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, timeout=2)
            if owner in finished:
                return done("fatal_mcp_error", "Error: the tool gateway session ended.", "ended")
            if await self.healthy():
                return done(
                    "timeout",
                    f"Error: the tool {name} did not answer within {timeout_s:g} seconds.",
                    "timeout",
                )
            return done("fatal_mcp_error", "Error: the tool gateway stopped answering.", "down")
        if task.cancelled():
            return done("fatal_mcp_error", "Error: the tool call was cancelled.", "cancelled")
        if self.refused != refused:
            return done("mcp_error", refused_text(name, self.max_reply_bytes), "reply_too_large")
        exc = task.exception()
        if exc is not None:
            err = f"{type(exc).__name__}: {exc}"[:500]
            if self.alive and await self.healthy():
                # the gateway is up: a protocol-level error the model may be able to fix
                return done("mcp_error", f"Error calling {name}: {err}", err)
            return done("fatal_mcp_error", f"Error: the tool gateway failed: {err}", err)
        res = task.result()
        text = _content_text(res.content)
        if getattr(res, "is_error", False):
            return done("mcp_error", text or f"Error: the tool {name} failed.", "is_error")
        if not text.strip():
            return done("empty_content", "(the tool returned no content)", "empty")
        return done("ok", text)


def _content_text(content: list | None) -> str:
    parts: list[str] = []
    for c in content or []:
        kind = getattr(c, "type", None)
        if kind == "text":
            parts.append(c.text)
        elif kind == "image":
            parts.append(f"[image {getattr(c, 'mime_type', '')}]")
        elif kind == "resource":
            res = getattr(c, "resource", None)
            parts.append(getattr(res, "text", None) or f"[resource {getattr(res, 'uri', '')}]")
        else:
            with contextlib.suppress(Exception):
                parts.append(json.dumps(c.model_dump(mode="json"), ensure_ascii=False))
    return "\n".join(parts)


@functools.cache
def _capped_transport_class() -> type:
    """httpx2's own transport, each POST's response body counted as it streams in: past
    the box's `max_reply_bytes` it is cut and refused (at once when its length header
    says so). A compressed body is refused too: its size on the wire says nothing of its
    size read. (A class made on first use: httpx2 is imported lazily.)"""
    import httpx2

    from apexrl.host import ssl_context

    class ReplyTooLarge(httpx2.StreamError):
        """Raised inside the body stream: the MCP client's JSON and SSE readers end the
        request as failed; the ToolBox tells the model why."""

    class CappedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, box: ToolBox, refuse: str | None) -> None:
            self._inner, self._box, self._refuse = inner, box, refuse

        def _refused(self, why: str) -> Exception:
            self._box.refused += 1
            return ReplyTooLarge(f"tool reply refused: {why}")

        async def __aiter__(self):
            if self._refuse:
                raise self._refused(self._refuse)
            n, limit = 0, self._box.max_reply_bytes
            async for chunk in self._inner:
                n += len(chunk)
                if n > limit:
                    raise self._refused(f"over {limit} bytes")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncBaseTransport):
        def __init__(self, box: ToolBox, inner: Any = None) -> None:
            self._box = box
            self._inner = inner or httpx2.AsyncHTTPTransport(verify=ssl_context())

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            limit = self._box.max_reply_bytes
            if request.method != "POST" or limit <= 0:
                return response  # the GET stream: notifications, each SSE event capped
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            length = response.headers.get("content-length", "")
            refuse = None
            if encoding not in ("", "identity"):
                refuse = f"compressed ({encoding})"
            elif length.isdigit() and int(length) > limit:
                refuse = f"{length} bytes, over {limit}"
            return httpx2.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=CappedStream(response.stream, self._box, refuse),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport
