"""The world's MCP gateway as the local sandbox runs it: `python -m apexrl.envs.gateway_main
WORLD_DIR WORLD_ID READY_TIMEOUT_S`.

Prints one JSON line (url, health_url, n_tools) on stdout once every tool answers,
then serves until SIGTERM. Imports only what the gateway needs (no CLI), so it is
ready sooner than `apexrl world serve`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys


def main(argv: list[str]) -> int:
    from apexrl.worlds.gateway import build_gateway, serve_forever
    from apexrl.worlds.world import open_world

    world_dir, world_id = argv[0], argv[1]
    timeout = float(argv[2]) if len(argv) > 2 else 30.0
    world = open_world(world_dir, world_id=world_id)
    gw = build_gateway(world, strict=True)

    def on_ready(r) -> None:
        line = {"url": r.url, "health_url": r.health_url, "port": r.port, "n_tools": r.n_tools}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    async def run() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve_forever(
                gw, host="127.0.0.1", port=0, on_ready=on_ready, ready_timeout_s=timeout
            )

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
