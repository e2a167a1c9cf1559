"""Presentations (.pptx via python-pptx): opening a deck, a slide's texts, and the
readiness check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.world import World


def _open(p: Path):
    from pptx import Presentation

    try:
        return Presentation(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a .pptx: {e}") from e


def _slide_texts(slide) -> dict[str, Any]:
    title = slide.shapes.title.text if slide.shapes.title is not None else ""
    texts = []
    tables = []
    for shape in slide.shapes:
        if shape.has_text_frame:
            if slide.shapes.title is not None and shape.shape_id == slide.shapes.title.shape_id:
                continue
            t = "\n".join(p.text for p in shape.text_frame.paragraphs if p.text)
            if t:
                texts.append(t)
        if getattr(shape, "has_table", False) and shape.has_table:
            tables.append([[c.text for c in row.cells] for row in shape.table.rows])
    notes = ""
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame.text
    return {"title": title, "text": texts, "tables": tables, "notes": notes}


def probe(world: World) -> str:
    import pptx  # noqa: F401

    n = sum(1 for _ in world.fs_root.rglob("*.pptx")) if world.fs_root.is_dir() else 0
    return f"{n} .pptx files"
