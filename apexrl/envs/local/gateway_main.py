"""The world's MCP gateway as the local sandbox runs it.

    python -m apexrl.envs.local.gateway_main WORLD_DIR WORLD_ID [READY_TIMEOUT_S]
    python -m apexrl.envs.local.gateway_main --wait WORLD_DIR [READY_TIMEOUT_S]

Prints one JSON line (url, health_url, n_tools) on stdout once every tool answers,
then serves until SIGTERM. With --wait it first imports everything the gateway
needs, prints {"warm": true}, and waits for one stdin line {"world_id": ...}: a
sandbox started ahead of its trial (the local environment keeps one warm) only has
to build and serve the gateway once its world has been copied in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable, Callable

WARM_IMPORTS = (
    "base64",
    "dateutil.rrule",
    "dateutil.tz",
    "docx",
    "docx.shared",
    "encodings.utf_8_sig",
    "fpdf",
    "fpdf.fonts",
    "icalendar",
    "mimetypes",
    "openpyxl",
    "openpyxl.chart",
    "openpyxl.styles",
    "openpyxl.utils.cell",
    "pptx",
    "pptx.chart.data",
    "pptx.dml.color",
    "pptx.enum.chart",
    "pptx.enum.shapes",
    "pptx.util",
    "pypdf",
    "pypdfium2",
    "zoneinfo",
)


def _preload(serve_once: bool = False) -> None:
    """Import what the gateway needs and warm its code paths on an empty world. With
    `serve_once` (the fork server) also serve that world once on a loopback port until
    it answers (uvicorn's and the MCP client's lazy imports, the tool templates), so a
    forked gateway only builds and serves its own world."""
    import importlib

    import httpx  # noqa: F401  (wait_ready's client)
    import mcp.client  # noqa: F401
    import mcp.server  # noqa: F401
    import starlette.applications  # noqa: F401
    import uvicorn  # noqa: F401

    import apexrl.worlds.gateway  # noqa: F401
    from apexrl.worlds.surface import get_surface

    for spec in get_surface().servers:
        importlib.import_module(spec.module)
    # Warm the probe and registration code paths on an empty world, then drop it.
    import tempfile
    from pathlib import Path

    from apexrl.host import ssl_context
    from apexrl.worlds.gateway import build_gateway

    ssl_context()
    from apexrl.worlds.world import open_world

    with tempfile.TemporaryDirectory(prefix="warm-") as d:
        (Path(d) / "filesystem").mkdir()
        (Path(d) / ".apps_data").mkdir()
        gw = build_gateway(open_world(Path(d), world_id="warm"), strict=False)
        if serve_once:
            import importlib

            for mod in WARM_IMPORTS:  # what the tools and probes import on first use
                with contextlib.suppress(ImportError):
                    importlib.import_module(mod)
            from apexrl.worlds.gateway import serve_forever

            async def once() -> None:
                task = asyncio.current_task()
                with contextlib.suppress(asyncio.CancelledError):
                    await serve_forever(
                        gw, host="127.0.0.1", port=0, on_ready=lambda r: task.cancel()
                    )

            asyncio.run(once())


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _say_ready(r) -> None:
    """The one JSON line the local environment waits for (a RunningGateway's address)."""
    _say({"url": r.url, "health_url": r.health_url, "port": r.port, "n_tools": r.n_tools})


def _until_sigterm(serve: Callable[[], Awaitable[None]]) -> None:
    """Run `serve()` until it ends or SIGTERM cancels it."""

    async def run() -> None:
        task = asyncio.current_task()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve()

    asyncio.run(run())


def serve(world_dir: str, world_id: str, timeout: float, token: str | None = None) -> None:
    from apexrl.worlds.gateway import build_gateway, serve_forever
    from apexrl.worlds.world import open_world

    world = open_world(world_dir, world_id=world_id)
    gw = build_gateway(world, strict=True)
    gw.token = token  # told on stdin: never in argv or the environment

    _until_sigterm(
        lambda: serve_forever(
            gw, host="127.0.0.1", port=0, on_ready=_say_ready, ready_timeout_s=timeout
        )
    )


def serve_peer(
    world_dir: str, world_id: str, timeout: float, token: str | None, told: dict
) -> None:
    """Serve the world with archipelago's servers (apexrl.peer.gateway), each started in
    namespaces of its own inside this sandbox, with no network when the task has none."""
    from apexrl.peer.gateway import for_apps, told_plan
    from apexrl.peer.gateway import serve_peer as serve_servers
    from apexrl.worlds.world import open_world

    world = open_world(world_dir, world_id=world_id)
    plan = for_apps(told_plan(told), world.apps)

    _until_sigterm(
        lambda: serve_servers(
            world,
            plan,
            mode="nested",
            network=told.get("code_network") is not False,
            host="127.0.0.1",
            port=0,
            on_ready=_say_ready,
            token=token,
            ready_timeout_s=timeout,
        )
    )


def wait_and_serve(world_dir: str, timeout: float) -> int:
    """Say {"warm": true}, read the trial's world id, token and code network from stdin,
    serve. The imports are done (`_preload`, or the fork server's)."""
    _say({"warm": True})
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # released unused
    told = json.loads(line)
    world_id, token = told["world_id"], told.get("token")
    import os

    if told.get("peer"):  # runtime archipelago: the checkout's own servers
        serve_peer(world_dir, world_id, timeout, token, told)
        return 0

    os.environ["APEXRL_CODE_SANDBOX"] = "1"  # each code command a sandbox of its own
    if told.get("code_network") is False:  # the code tool runs with no network
        os.environ["APEXRL_CODE_NO_NETWORK"] = "1"
    if told.get("code_egress"):  # ... but for the trial's egress proxy
        from apexrl.envs.local import egress

        os.environ["APEXRL_CODE_EGRESS"] = egress.SANDBOX_SOCKET
        os.environ["APEXRL_CODE_EGRESS_PROXY"] = egress.proxy_env()["HTTPS_PROXY"]
    serve(world_dir, world_id, timeout, token)
    return 0


def harden() -> None:
    """The local sandbox's gateway: not dumpable (nothing it starts can ptrace it or read
    its memory through /proc), and a seccomp filter its children inherit."""
    import ctypes

    from apexrl.envs.local import seccomp

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
    seccomp.install()


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--wait":  # the local sandbox's fresh gateway
        world_dir = argv[1]
        timeout = float(argv[2]) if len(argv) > 2 else 30.0
        harden()
        _preload()
        return wait_and_serve(world_dir, timeout)
    else:
        world_dir, world_id, token = argv[0], argv[1], None
        timeout = float(argv[2]) if len(argv) > 2 else 30.0
    serve(world_dir, world_id, timeout, token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
