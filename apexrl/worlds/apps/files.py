"""The world's filesystem/: its readiness check (the files inside the world, links out
not followed)."""

from __future__ import annotations

import os
from pathlib import Path

from apexrl.errors import ApexError
from apexrl.worlds.world import World


def _walk(world: World, base: Path):
    root_r = world.fs_root.resolve()
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for d in list(dirnames):
            full = Path(dirpath) / d
            if not full.resolve().is_relative_to(root_r):
                dirnames.remove(d)  # never follow a link out of the world
        for f in sorted(filenames):
            full = Path(dirpath) / f
            if full.resolve().is_relative_to(root_r):
                yield full


def probe(world: World) -> str:
    if not world.fs_root.is_dir():
        raise ApexError(f"{world.fs_root} is not a folder")
    n = sum(1 for _ in _walk(world, world.fs_root))
    return f"{n} files"
