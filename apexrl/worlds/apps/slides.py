"""Presentations (.pptx via python-pptx): the readiness check."""

from __future__ import annotations

from apexrl.worlds.apps import count_files
from apexrl.worlds.world import World


def probe(world: World) -> str:
    return count_files(world, "pptx", ".pptx")
