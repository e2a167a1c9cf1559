"""`world serve` as a library call: one world behind one gateway until interrupted.

The gateway is chosen here: apexrl's own servers (`apexrl.worlds.gateway`), or, with
runtime "archipelago", the checkout's own servers each in bubblewrap behind apexrl's
gateway (`apexrl.peer.gateway`). The image profile gives the default port, the
snapshot endpoint and what /health says.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from apexrl.worlds.models import ServeRecord


class _Terminated(Exception):
    """SIGTERM reached `serve_world` (docker/podman stop)."""


def _raise_terminated(_signum, _frame) -> None:
    raise _Terminated


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises _Terminated in the main thread instead of ending the process at once.

    uvicorn takes SIGTERM while it serves: it shuts down gracefully, puts back the handler
    it found (this one) and raises the signal again, so the gateway's own shutdown is
    unchanged and only its last step, which used to end the process before any `finally`
    (a zip's extracted world stayed in the temp folder), now unwinds the stack."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _end_by_sigterm() -> None:
    """End as SIGTERM's default would (exit status -15 to the parent), after the cleanup:
    not an interpreter exit, which would wait on the servers' worker threads."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def serve_world(
    world: Path,
    *,
    profile: str = "apexrl",
    runtime: str = "apexrl",
    peer: Path | None = None,
    apps: list[str] | None = None,
    workdir: Path | None = None,
    world_id: str | None = None,
    task_slug: str | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
    ready_timeout_s: float = 30.0,
    on_ready: Callable[[ServeRecord], None],
    on_info: Callable[[str], None] = lambda _msg: None,
) -> None:
    """Serve WORLD's MCP tools over streamable HTTP until interrupted (Ctrl-C: "stopped"
    to `on_info`; SIGTERM: the same, then the process ends by that signal). `on_ready`
    gets the record once every server answers; a server that cannot come up raises. A
    zip's extracted world is removed however serving ends."""
    from apexrl.envs.profiles import get_profile
    from apexrl.errors import UsageError
    from apexrl.peer.gateway import check_runtime
    from apexrl.worlds.world import open_world

    prof = get_profile(profile)
    port = prof.port if port is None else port
    runtime = check_runtime(runtime)
    if runtime != "archipelago" and peer is not None:
        raise UsageError("--peer names the checkout for --runtime archipelago")
    terminated = False
    with _sigterm_unwinds():
        w = open_world(world, workdir=workdir, apps=apps, world_id=world_id)
        try:
            _serve_open_world(
                w,
                prof,
                runtime=runtime,
                peer=peer,
                task_slug=task_slug,
                host=host,
                port=port,
                ready_timeout_s=ready_timeout_s,
                on_ready=on_ready,
                on_info=on_info,
            )
        except KeyboardInterrupt:
            on_info("stopped")
        except _Terminated:
            terminated = True
        finally:
            w.close()
    if terminated:
        on_info("stopped (SIGTERM)")
        _end_by_sigterm()


def _serve_open_world(
    w,
    prof,
    *,
    runtime: str,
    peer: Path | None,
    task_slug: str | None,
    host: str,
    port: int,
    ready_timeout_s: float,
    on_ready: Callable[[ServeRecord], None],
    on_info: Callable[[str], None],
) -> None:
    import asyncio

    from apexrl.worlds.gateway import build_gateway, serve_forever

    info = {"profile": prof.name, **({"task_slug": task_slug} if task_slug else {})}
    plan = None
    if runtime == "archipelago":
        from apexrl.peer.gateway import plan_for

        plan = plan_for(w.apps or None, peer, on_progress=on_info)
        servers = [name for name, _ in plan.servers]
    else:
        gw = build_gateway(w, strict=True, snapshot_path=prof.snapshot_endpoint)
        gw.info.update(info)
        servers = gw.servers

    def ready(r) -> None:
        on_ready(
            ServeRecord(
                world_id=w.world_id,
                url=r.url,
                health_url=r.health_url,
                host=r.host,
                port=r.port,
                world_dir=str(w.root),
                servers=servers,
                n_tools=r.n_tools,
                snapshot_url=(
                    r.health_url.removesuffix("/health") + prof.snapshot_endpoint
                    if prof.snapshot_endpoint
                    else None
                ),
            )
        )

    if plan is None:
        asyncio.run(
            serve_forever(gw, host=host, port=port, on_ready=ready, ready_timeout_s=ready_timeout_s)
        )
        return
    import tempfile

    from apexrl.peer.gateway import serve_peer

    log = tempfile.NamedTemporaryFile(  # noqa: SIM115  (closed below)
        "a", prefix="apexrl-peer-", suffix=".log", delete=False
    )
    with log as errlog:
        on_info(f"archipelago's servers log to {errlog.name}")
        asyncio.run(
            serve_peer(
                w,
                plan,
                mode="bwrap",
                network=False,
                host=host,
                port=port,
                on_ready=ready,
                ready_timeout_s=ready_timeout_s,
                errlog=errlog,
                snapshot_path=prof.snapshot_endpoint,
                info=info,
            )
        )
