"""Presentations (.pptx via python-pptx): opening a deck, and the readiness check."""

from __future__ import annotations

from pathlib import Path

from apexrl.errors import ApexError
from apexrl.worlds.world import World


def _open(p: Path):
    from pptx import Presentation

    try:
        return Presentation(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a .pptx: {e}") from e


def probe(world: World) -> str:
    import pptx  # noqa: F401

    n = sum(1 for _ in world.fs_root.rglob("*.pptx")) if world.fs_root.is_dir() else 0
    return f"{n} .pptx files"
