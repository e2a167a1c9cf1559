"""Word documents (.docx via python-docx): replacing a paragraph's text, and the
readiness check."""

from __future__ import annotations

from apexrl.worlds.apps import count_files
from apexrl.worlds.world import World


def _set_text(para, text: str) -> None:
    """Replace a paragraph's text, keeping the first run's formatting."""
    runs = para.runs
    if not runs:
        para.add_run(text)
        return
    runs[0].text = text
    for r in runs[1:]:
        r._element.getparent().remove(r._element)


def probe(world: World) -> str:
    return count_files(world, "docx", ".docx")
