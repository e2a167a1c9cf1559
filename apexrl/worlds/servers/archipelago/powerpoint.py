"""archipelago `powerpoint` server: .pptx decks (python-pptx), slides 0-based."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.servers import slides as _slides
from apexrl.worlds.servers.archipelago import file_arg, new_file, vpath
from apexrl.worlds.world import World

PptxPath = Annotated[str, Field(description="Path of the .pptx file, e.g. '/docs/deck.pptx'.")]
Layout = Literal[
    "title", "title_and_content", "section_header", "two_content", "title_only", "blank"
]
# python-pptx's default template: layout name -> index
_LAYOUTS = {
    "title": 0,
    "title_and_content": 1,
    "section_header": 2,
    "two_content": 3,
    "title_only": 5,
    "blank": 6,
}
MAX_READ = 10_000


class BulletContent(BaseModel):
    items: list[str] = Field(default_factory=list)


class TableContent(BaseModel):
    rows: list[list[str]] = Field(default_factory=list)
    header: bool = True


class SlideDefinition(BaseModel):
    layout: Layout = "title_and_content"
    title: str | None = None
    subtitle: str | None = None
    bullets: BulletContent | None = None
    table: TableContent | None = None
    notes: str | None = None


class PresentationMetadata(BaseModel):
    title: str | None = None
    subject: str | None = None
    author: str | None = None
    comments: str | None = None


def _pptx(world: World, path: str):
    return file_arg(world, path, (".pptx",))


def _build(prs, s: SlideDefinition, index: int | None = None) -> None:
    from pptx.util import Inches

    layouts = prs.slide_layouts
    slide = prs.slides.add_slide(layouts[min(_LAYOUTS[s.layout], len(layouts) - 1)])
    if s.title and slide.shapes.title is not None:
        slide.shapes.title.text = s.title
    body = [ph for ph in slide.placeholders if ph.placeholder_format.idx != 0]
    if s.subtitle and s.layout in ("title", "section_header") and body:
        body[0].text_frame.text = s.subtitle
    if s.bullets and s.bullets.items:
        ph = body[0] if body and s.layout in ("title_and_content", "two_content") else None
        frame = (
            ph or slide.shapes.add_textbox(Inches(1), Inches(1.6), Inches(8), Inches(5))
        ).text_frame
        frame.text = s.bullets.items[0]
        for item in s.bullets.items[1:]:
            frame.add_paragraph().text = item
    if s.table and s.table.rows:
        rows = s.table.rows
        shape = slide.shapes.add_table(
            len(rows),
            max(len(r) for r in rows),
            Inches(0.5),
            Inches(1.8),
            Inches(9),
            Inches(0.4) * len(rows),
        )
        for ri, row in enumerate(rows):
            for ci, val in enumerate(row):
                shape.table.cell(ri, ci).text = str(val)
    if s.notes:
        slide.notes_slide.notes_text_frame.text = s.notes
    if index is not None and index < len(prs.slides) - 1:
        ids = prs.slides._sldIdLst
        el = ids[-1]
        ids.remove(el)
        ids.insert(index, el)


def _markdown(prs) -> str:
    out = []
    for i, s in enumerate(prs.slides):
        d = _slides._slide_texts(s)
        out.append(f"## Slide {i}: {d['title']}".rstrip())
        out.extend(d["text"])
        for t in d["tables"]:
            out.extend("| " + " | ".join(r) + " |" for r in t)
        if d["notes"]:
            out.append(f"Notes: {d['notes']}")
        out.append("")
    return "\n".join(out)


def tools(world: World) -> list:
    def read_slides(
        file_path: PptxPath,
        start: Annotated[int | None, Field(ge=0, description="First character (0-based).")] = None,
        end: Annotated[int | None, Field(ge=0, description="End character (default 500).")] = None,
    ) -> str:
        """The deck's text as markdown (one section per slide), characters start..end
        (at most 10,000 per call)."""
        text = _markdown(_slides._open(_pptx(world, file_path)))
        a = start or 0
        b = end if end is not None else a + 500
        if b < a:
            raise ApexError("end must not be before start")
        if b - a > MAX_READ:
            raise ApexError(f"at most {MAX_READ} characters per call (end - start)")
        chunk = text[a:b]
        more = f"\n[characters {a}-{min(b, len(text))} of {len(text)}]" if b < len(text) else ""
        return chunk + more

    def read_completedeck(file_path: PptxPath) -> dict[str, Any]:
        """Overview of every slide: index (0-based), layout, title and text preview."""
        prs = _slides._open(_pptx(world, file_path))
        slides = []
        for i, s in enumerate(prs.slides):
            d = _slides._slide_texts(s)
            preview = " ".join(d["text"])[:200]
            slides.append(
                {
                    "slide_index": i,
                    "layout": s.slide_layout.name,
                    "title": d["title"],
                    "preview": preview,
                    "n_tables": len(d["tables"]),
                }
            )
        return {
            "file_path": vpath(world, world.fs_path(file_path)),
            "total_slides": len(slides),
            "slides": slides,
        }

    def read_individualslide(
        file_path: PptxPath,
        slide_index: Annotated[int, Field(ge=0, description="0-based slide index.")],
    ) -> dict[str, Any]:
        """One slide in detail: title, every shape with its kind, position and text,
        tables and speaker notes."""
        prs = _slides._open(_pptx(world, file_path))
        n = len(prs.slides)
        if not 0 <= slide_index < n:
            raise ApexError(f"slide_index {slide_index} out of range: the deck has {n} slides")
        s = prs.slides[slide_index]
        shapes = []
        n_img = 0
        for sh in s.shapes:
            item: dict[str, Any] = {
                "shape_id": sh.shape_id,
                "name": sh.name,
                "kind": str(sh.shape_type),
                "left": sh.left,
                "top": sh.top,
            }
            if sh.has_text_frame:
                item["text"] = sh.text_frame.text
            if getattr(sh, "has_table", False) and sh.has_table:
                item["table"] = [[c.text for c in r.cells] for r in sh.table.rows]
            if getattr(sh, "has_chart", False) and sh.has_chart:
                item["chart"] = str(sh.chart.chart_type)
            if hasattr(sh, "image"):
                item["annotation"] = f"slide{slide_index}_img{n_img}"  # for read_image
                n_img += 1
            shapes.append(item)
        d = _slides._slide_texts(s)
        return {
            "slide_index": slide_index,
            "layout": s.slide_layout.name,
            "title": d["title"],
            "shapes": shapes,
            "notes": d["notes"],
        }

    def create_deck(
        directory: Annotated[str, Field(description="Directory, e.g. '/presentations'.")],
        file_name: Annotated[str, Field(description="File name ending with .pptx.")],
        slides: Annotated[list[SlideDefinition], Field(min_length=1)],
        metadata: PresentationMetadata | None = None,
    ) -> str:
        """Create a .pptx from slide definitions (layout, title, subtitle, bullets.items,
        table.rows, notes)."""
        from pptx import Presentation

        with world.lock:
            p = new_file(world, directory, file_name, ".pptx")
            prs = Presentation()
            for s in slides:
                _build(prs, s)
            if metadata:
                for k in ("title", "subject", "author", "comments"):
                    if getattr(metadata, k):
                        setattr(prs.core_properties, k, getattr(metadata, k))
            p.parent.mkdir(parents=True, exist_ok=True)
            prs.save(str(p))
        return f"Presentation created: {vpath(world, p)} with {len(slides)} slide(s)"

    def delete_deck(file_path: PptxPath) -> str:
        """Delete a .pptx file."""
        p = _pptx(world, file_path)
        with world.lock:
            p.unlink()
        return f"Deleted {vpath(world, p)}"

    def add_slide(
        file_path: PptxPath,
        index: Annotated[int, Field(ge=0, description="0-based position of the new slide.")],
        layout: Layout = "title_and_content",
        title: str | None = None,
        subtitle: str | None = None,
        bullets: Annotated[list[str] | None, Field(min_length=1)] = None,
    ) -> str:
        """Insert a slide at a position of an existing deck."""
        p = _pptx(world, file_path)
        with world.lock:
            prs = _slides._open(p)
            n = len(prs.slides)
            if index > n:
                raise ApexError(f"index {index} out of range: the deck has {n} slides")
            spec = SlideDefinition(
                layout=layout,
                title=title,
                subtitle=subtitle,
                bullets=BulletContent(items=bullets) if bullets else None,
            )
            _build(prs, spec, index)
            prs.save(str(p))
        return f"Added slide at index {index} to {vpath(world, p)} ({n + 1} slides)"

    def insert_table(
        file_path: PptxPath,
        slide_index: Annotated[int, Field(ge=0, description="0-based slide index.")],
        rows: Annotated[list[list[str]], Field(min_length=1, description="Cells, row by row.")],
        header: Annotated[bool, Field(description="Bold the first row.")] = True,
        x: Annotated[float, Field(description="Left edge, inches.")] = 0.5,
        y: Annotated[float, Field(description="Top edge, inches.")] = 1.5,
        width: Annotated[float, Field(gt=0, description="Inches.")] = 9.0,
        height: Annotated[float, Field(gt=0, description="Inches.")] = 5.0,
    ) -> str:
        """Insert a table on a slide."""
        from pptx.util import Inches

        if len({len(r) for r in rows}) != 1 or not rows[0]:
            raise ApexError("rows must be non-empty and all have the same number of cells")
        p = _pptx(world, file_path)
        with world.lock:
            prs = _slides._open(p)
            n = len(prs.slides)
            if not 0 <= slide_index < n:
                raise ApexError(f"slide_index {slide_index} out of range: the deck has {n} slides")
            shape = prs.slides[slide_index].shapes.add_table(
                len(rows), len(rows[0]), Inches(x), Inches(y), Inches(width), Inches(height)
            )
            for ri, row in enumerate(rows):
                for ci, val in enumerate(row):
                    cell = shape.table.cell(ri, ci)
                    cell.text = str(val)
                    if ri == 0 and header:
                        for para in cell.text_frame.paragraphs:
                            for run in para.runs:
                                run.font.bold = True
            prs.save(str(p))
        return f"Inserted a {len(rows)}x{len(rows[0])} table on slide {slide_index}"

    def read_image(
        file_path: PptxPath,
        annotation: Annotated[
            str, Field(description="Key from read_individualslide, e.g. 'slide0_img0'.")
        ],
    ):
        """Return a picture of a slide, by the annotation key read_individualslide lists."""
        import base64
        import re

        from mcp.types import ImageContent

        m = re.fullmatch(r"@?slide(\d+)_img(\d+)", annotation.strip())
        if not m:
            raise ApexError(f"annotation {annotation!r} is not of the form 'slide{{N}}_img{{M}}'")
        prs = _slides._open(_pptx(world, file_path))
        si, ii = int(m.group(1)), int(m.group(2))
        if not 0 <= si < len(prs.slides):
            raise ApexError(f"slide {si} does not exist (the deck has {len(prs.slides)})")
        pics = [sh for sh in prs.slides[si].shapes if hasattr(sh, "image")]
        if ii >= len(pics):
            raise ApexError(f"slide {si} has {len(pics)} picture(s); no {annotation}")
        img = pics[ii].image
        return ImageContent(
            type="image", data=base64.b64encode(img.blob).decode(), mimeType=img.content_type
        )

    return [
        create_deck,
        delete_deck,
        add_slide,
        insert_table,
        read_image,
        read_slides,
        read_completedeck,
        read_individualslide,
    ]


def probe(world: World) -> str:
    return _slides.probe(world)
