"""`python -m apexrl.peer.stdio_gateway SERVER`: apexrl's gateway for one archipelago
server over stdio, on the world at / (/filesystem and /.apps_data), as `world verify`
starts it inside the sandbox archipelago's servers run in."""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from apexrl.worlds.gateway import build_gateway
    from apexrl.worlds.surface import ARCHIPELAGO
    from apexrl.worlds.world import open_world

    server = argv[0]
    world = open_world(Path("/"), world_id="verify")
    gw = build_gateway(world, apps=[ARCHIPELAGO.server(server).app], surface=ARCHIPELAGO)
    gw.mcp.run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
