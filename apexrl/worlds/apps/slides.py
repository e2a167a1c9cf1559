"""Presentations (.pptx via python-pptx): read a deck or one slide, create a deck, add a slide."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from apexrl.errors import ApexError
from apexrl.worlds.world import World


class SlideSpec(BaseModel):
    title: str = ""
    bullets: list[str] = []
    notes: str | None = None


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


def deck_text(p: Path) -> str:
    prs = _open(p)
    out = []
    for i, s in enumerate(prs.slides, start=1):
        d = _slide_texts(s)
        out.append(f"[slide {i}] {d['title']}")
        out.extend(d["text"])
        for t in d["tables"]:
            out.extend(" | ".join(r) for r in t)
        if d["notes"]:
            out.append(f"(notes) {d['notes']}")
    return "\n".join(out)


def _pptx(world: World, path: str, *, must_exist: bool = True) -> Path:
    if not path.lower().endswith(".pptx"):
        raise ApexError(f"{path!r} is not a .pptx file")
    return world.fs_path(path, must_exist=must_exist)


def _add(prs, spec: SlideSpec) -> None:
    layout = (
        prs.slide_layouts[1]
        if spec.bullets and len(prs.slide_layouts) > 1
        else prs.slide_layouts[5 if len(prs.slide_layouts) > 5 else 0]
    )
    slide = prs.slides.add_slide(layout)
    if slide.shapes.title is not None:
        slide.shapes.title.text = spec.title
    if spec.bullets:
        body = next((ph for ph in slide.placeholders if ph.placeholder_format.idx == 1), None)
        if body is None:
            from pptx.util import Inches

            body = slide.shapes.add_textbox(Inches(1), Inches(1.5), Inches(8), Inches(5))
        tf = body.text_frame
        tf.text = spec.bullets[0]
        for b in spec.bullets[1:]:
            tf.add_paragraph().text = b
    if spec.notes:
        slide.notes_slide.notes_text_frame.text = spec.notes


def tools(world: World) -> list:
    def read_deck(path: str) -> dict[str, Any]:
        """Read a whole .pptx: for each slide its number, title and text."""
        prs = _open(_pptx(world, path))
        slides = []
        for i, s in enumerate(prs.slides, start=1):
            d = _slide_texts(s)
            slides.append({"slide": i, **d})
        return {"path": path, "slides": slides, "n_slides": len(slides)}

    def read_slide(path: str, slide: int) -> dict[str, Any]:
        """Read one slide (numbered from 1) of a .pptx: title, text boxes, tables, notes."""
        prs = _open(_pptx(world, path))
        n = len(prs.slides)
        if not 1 <= slide <= n:
            raise ApexError(f"slide {slide} does not exist (the deck has {n})")
        return {"slide": slide, **_slide_texts(prs.slides[slide - 1])}

    def create_deck(path: str, slides: list[SlideSpec]) -> str:
        """Create a new .pptx with the given slides ({title, bullets, notes}).
        Refuses to overwrite an existing file."""
        from pptx import Presentation

        p = _pptx(world, path, must_exist=False)
        if p.exists():
            raise ApexError(f"{path!r} already exists; use add_slide")
        with world.lock:
            prs = Presentation()
            for s in slides:
                _add(prs, s)
            p.parent.mkdir(parents=True, exist_ok=True)
            prs.save(str(p))
        return f"created {world.rel(p)} with {len(slides)} slides"

    def add_slide(
        path: str, title: str, bullets: list[str] | None = None, notes: str | None = None
    ) -> str:
        """Append a slide with a title, bullet points and optional speaker notes to a .pptx."""
        p = _pptx(world, path)
        with world.lock:
            prs = _open(p)
            _add(prs, SlideSpec(title=title, bullets=bullets or [], notes=notes))
            prs.save(str(p))
            n = len(prs.slides)
        return f"added slide {n} to {world.rel(p)}"

    return [read_deck, read_slide, create_deck, add_slide]


def probe(world: World) -> str:
    import pptx  # noqa: F401

    n = sum(1 for _ in world.fs_root.rglob("*.pptx")) if world.fs_root.is_dir() else 0
    return f"{n} .pptx files"
