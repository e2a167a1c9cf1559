"""PDF files (pypdf): opening one, and the readiness check."""

from __future__ import annotations

from pathlib import Path

from apexrl.errors import ApexError
from apexrl.worlds.apps import count_files
from apexrl.worlds.world import World


def _reader(p: Path):
    from pypdf import PdfReader

    try:
        return PdfReader(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a PDF: {e}") from e


def probe(world: World) -> str:
    return count_files(world, "pypdf", ".pdf")
