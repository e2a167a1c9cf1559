"""archipelago `powerpoint` server: .pptx decks (python-pptx), slides 0-based."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import slides as _slides
from apexrl.worlds.servers.archipelago import file_arg, new_file, transform_image, vpath
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


class SlideEditOperation(BaseModel):
    type: Literal[
        "replace_text",
        "delete_slide",
        "update_slide_title",
        "update_slide_subtitle",
        "set_bullets",
        "append_bullets",
        "clear_placeholder",
        "update_table_cell",
        "duplicate_slide",
        "set_notes",
    ]
    index: int | None = Field(None, description="0-based slide index")
    search: str | None = None
    replace: str | None = None
    match_case: bool = False
    title: str | None = None
    subtitle: str | None = None
    placeholder: str | None = Field(None, description="'title', 'body' (default) or 'subtitle'")
    items: list[str] | None = None
    table_idx: int | None = None
    row: int | None = None
    column: int | None = None
    text: str | None = None
    position: int | None = None
    notes: str | None = None


_SHAPES = {
    "rectangle": "RECTANGLE",
    "rounded_rectangle": "ROUNDED_RECTANGLE",
    "oval": "OVAL",
    "triangle": "ISOSCELES_TRIANGLE",
    "right_arrow": "RIGHT_ARROW",
    "left_arrow": "LEFT_ARROW",
    "up_arrow": "UP_ARROW",
    "down_arrow": "DOWN_ARROW",
    "pentagon": "REGULAR_PENTAGON",
    "hexagon": "HEXAGON",
    "star": "STAR_5_POINT",
    "heart": "HEART",
}


def _rgb(value: str | None, what: str):
    import re

    from pptx.dml.color import RGBColor

    if value is None:
        return None
    v = value.lstrip("#")
    if not re.fullmatch(r"[0-9A-Fa-f]{6}", v):
        raise ApexError(f"{what} {value!r} is not a 6-digit hex color")
    return RGBColor.from_string(v.upper())


def _slide(prs, index: int | None):
    n = len(prs.slides)
    if index is None or not 0 <= index < n:
        raise ApexError(f"slide index {index} out of range: the deck has {n} slides")
    return prs.slides[index]


def _placeholder(slide, name: str | None):
    if name == "title":
        ph = slide.shapes.title
    else:
        want = 1 if name in (None, "body", "subtitle") else None
        ph = next((p for p in slide.placeholders if p.placeholder_format.idx == want), None)
    if ph is None:
        raise ApexError(f"the slide has no {name or 'body'} placeholder")
    return ph


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

    def add_image(
        file_path: PptxPath,
        image_path: Annotated[str, Field(description="Image (.png, .jpg, .jpeg) in the sandbox.")],
        slide_index: Annotated[int, Field(ge=0)],
        x: float = 1.0,
        y: float = 1.5,
        width: float | None = None,
        height: float | None = None,
    ) -> str:
        """Place an image on a slide (inches; one of width/height keeps the aspect ratio)."""
        from pptx.util import Inches

        img = file_arg(world, image_path, (".png", ".jpg", ".jpeg"))
        p = _pptx(world, file_path)
        with world.lock:
            prs = _slides._open(p)
            _slide(prs, slide_index).shapes.add_picture(
                str(img),
                Inches(x),
                Inches(y),
                Inches(width) if width else None,
                Inches(height) if height else None,
            )
            prs.save(str(p))
        return f"Added {vpath(world, img)} to slide {slide_index}"

    def add_shape(
        file_path: PptxPath,
        slide_index: Annotated[int, Field(ge=0)],
        shape_type: Literal[
            "rectangle",
            "rounded_rectangle",
            "oval",
            "triangle",
            "right_arrow",
            "left_arrow",
            "up_arrow",
            "down_arrow",
            "pentagon",
            "hexagon",
            "star",
            "heart",
        ],
        x: float = 1.0,
        y: float = 1.0,
        width: Annotated[float, Field(gt=0)] = 2.0,
        height: Annotated[float, Field(gt=0)] = 2.0,
        fill_color: str | None = None,
        line_color: str | None = None,
        line_width: Annotated[float | None, Field(gt=0)] = None,
        text: str | None = None,
        text_color: str | None = None,
        font_size: Annotated[float | None, Field(gt=0)] = None,
    ) -> str:
        """Draw a shape (rectangle, oval, arrow, star, ...) with optional colors and text."""
        from pptx.enum.shapes import MSO_SHAPE
        from pptx.util import Inches, Pt

        fill, line, tcolor = (
            _rgb(fill_color, "fill_color"),
            _rgb(line_color, "line_color"),
            _rgb(text_color, "text_color"),
        )
        if (tcolor or font_size) and not text:
            raise ApexError("text_color and font_size need text")
        p = _pptx(world, file_path)
        with world.lock:
            prs = _slides._open(p)
            sh = _slide(prs, slide_index).shapes.add_shape(
                getattr(MSO_SHAPE, _SHAPES[shape_type]),
                Inches(x),
                Inches(y),
                Inches(width),
                Inches(height),
            )
            if fill:
                sh.fill.solid()
                sh.fill.fore_color.rgb = fill
            if line:
                sh.line.color.rgb = line
            if line_width:
                sh.line.width = Pt(line_width)
            if text:
                sh.text_frame.text = text
                for run in sh.text_frame.paragraphs[0].runs:
                    if tcolor:
                        run.font.color.rgb = tcolor
                    if font_size:
                        run.font.size = Pt(font_size)
            prs.save(str(p))
        return f"Added a {shape_type} to slide {slide_index}"

    def insert_chart(
        presentation_path: PptxPath,
        slide_index: Annotated[int, Field(ge=0)],
        spreadsheet_path: Annotated[str, Field(description="The .xlsx holding the data.")],
        sheet_name: str,
        data_range: Annotated[str, Field(description="'A1:D5': first column categories.")],
        chart_type: Literal["bar", "line", "pie", "area", "scatter", "doughnut", "radar"] = "bar",
        title: str | None = None,
        position: Literal["body", "left", "right"] = "body",
        include_header: bool = True,
    ) -> str:
        """Chart a range of a spreadsheet (computed values) on a slide."""
        from openpyxl.utils import range_boundaries
        from pptx.chart.data import CategoryChartData, XyChartData
        from pptx.enum.chart import XL_CHART_TYPE
        from pptx.util import Inches

        from apexrl.worlds.apps import sheets as _sheets
        from apexrl.worlds.servers.archipelago.excel import computed_values

        x = file_arg(world, spreadsheet_path, (".xlsx", ".xlsm"))
        wb, cached = _sheets._load(x), _sheets._load(x, data_only=True)
        if sheet_name not in wb.sheetnames:
            raise ApexError(f"no sheet {sheet_name!r}; sheets are {wb.sheetnames}")
        try:
            c1, r1, c2, r2 = range_boundaries(data_range)
        except ValueError:
            raise ApexError(f"data_range {data_range!r} is not A1 notation") from None
        if None in (c1, r1, c2, r2) or c2 <= c1:
            raise ApexError("data_range needs a category column and at least one value column")
        grid = computed_values(wb, cached, sheet_name, (c1, r1, c2, r2))
        head = grid[0] if include_header else [f"Series {i}" for i in range(c2 - c1 + 1)]
        rows = grid[1:] if include_header else grid

        def num(v):
            try:
                return float(v)
            except (TypeError, ValueError):
                raise ApexError(f"{v!r} in {data_range} is not a number") from None

        if chart_type == "scatter":
            data = XyChartData()
            for j in range(1, len(head)):
                ser = data.add_series(str(head[j]))
                for r in rows:
                    ser.add_data_point(num(r[0]), num(r[j]))
        else:
            data = CategoryChartData()
            data.categories = [str(r[0]) for r in rows]
            for j in range(1, len(head)):
                data.add_series(str(head[j]), [num(r[j]) for r in rows])
        kind = {
            "bar": "COLUMN_CLUSTERED",
            "line": "LINE",
            "pie": "PIE",
            "area": "AREA",
            "scatter": "XY_SCATTER",
            "doughnut": "DOUGHNUT",
            "radar": "RADAR",
        }[chart_type]
        left, w = {"body": (0.5, 9.0), "left": (0.5, 4.5), "right": (5.0, 4.5)}[position]
        p = _pptx(world, presentation_path)
        with world.lock:
            prs = _slides._open(p)
            frame = _slide(prs, slide_index).shapes.add_chart(
                getattr(XL_CHART_TYPE, kind),
                Inches(left),
                Inches(1.5),
                Inches(w),
                Inches(5),
                data,
            )
            if title:
                frame.chart.has_title = True
                frame.chart.chart_title.text_frame.text = title
            prs.save(str(p))
        return f"Inserted a {chart_type} chart of {sheet_name}!{data_range} on slide {slide_index}"

    def modify_image(
        file_path: PptxPath,
        slide_index: Annotated[int, Field(ge=0)],
        image_index: Annotated[int, Field(ge=0, description="0-based picture on the slide.")],
        operation: Literal["rotate", "flip", "brightness", "contrast", "crop"],
        rotation: Annotated[float | None, Field(ge=0, le=360)] = None,
        flip: Literal["horizontal", "vertical"] | None = None,
        brightness: Annotated[float | None, Field(gt=0)] = None,
        contrast: Annotated[float | None, Field(gt=0)] = None,
        crop_left: Annotated[int | None, Field(ge=0)] = None,
        crop_top: Annotated[int | None, Field(ge=0)] = None,
        crop_right: int | None = None,
        crop_bottom: int | None = None,
    ) -> str:
        """Rotate, flip, brighten, change the contrast of, or crop a picture on a slide."""
        p = _pptx(world, file_path)
        with world.lock:
            prs = _slides._open(p)
            pics = [sh for sh in _slide(prs, slide_index).shapes if hasattr(sh, "image")]
            if image_index >= len(pics):
                raise ApexError(f"image_index {image_index} out of range: {len(pics)} picture(s)")
            pic = pics[image_index]
            part = pic.part.related_part(pic._element.blip_rId)
            part._blob = transform_image(
                part.blob,
                operation,
                rotation=rotation,
                flip=flip,
                brightness=brightness,
                contrast=contrast,
                crop=(crop_left, crop_top, crop_right, crop_bottom),
            )
            prs.save(str(p))
        return f"Applied {operation} to picture {image_index} on slide {slide_index}"

    def edit_slides(
        file_path: PptxPath,
        operations: Annotated[
            list[SlideEditOperation],
            Field(
                min_length=1, description="Edits applied in order (indexes shift after deletes)."
            ),
        ],
        metadata: PresentationMetadata | None = None,
    ) -> str:
        """Batch edits: replace_text, delete_slide, update_slide_title/subtitle, set_bullets,
        append_bullets, clear_placeholder, update_table_cell, duplicate_slide, set_notes."""
        import copy

        p = _pptx(world, file_path)
        with world.lock:
            prs = _slides._open(p)
            for i, op in enumerate(operations):
                try:
                    t = op.type
                    if t == "replace_text":
                        if not op.search:
                            raise ApexError("replace_text needs search")
                        n = 0
                        for sl in prs.slides:
                            for sh in sl.shapes:
                                if not sh.has_text_frame:
                                    continue
                                for para in sh.text_frame.paragraphs:
                                    for run in para.runs:
                                        src = run.text if op.match_case else run.text.lower()
                                        key = op.search if op.match_case else op.search.lower()
                                        if key in src:
                                            start = src.index(key)
                                            run.text = (
                                                run.text[:start]
                                                + (op.replace or "")
                                                + run.text[start + len(key) :]
                                            )
                                            n += 1
                        if not n:
                            raise ApexError(f"{op.search!r} not found")
                        continue
                    sl = _slide(prs, op.index)
                    if t == "delete_slide":
                        ids = prs.slides._sldIdLst
                        el = ids[op.index]
                        prs.part.drop_rel(el.rId)
                        ids.remove(el)
                    elif t == "update_slide_title":
                        _placeholder(sl, "title").text_frame.text = op.title or ""
                    elif t == "update_slide_subtitle":
                        _placeholder(sl, "subtitle").text_frame.text = op.subtitle or ""
                    elif t in ("set_bullets", "append_bullets"):
                        if not op.items:
                            raise ApexError(f"{t} needs items")
                        tf = _placeholder(sl, op.placeholder).text_frame
                        items = list(op.items)
                        if t == "set_bullets" or not tf.text:
                            tf.text = items.pop(0)
                        for it in items:
                            tf.add_paragraph().text = it
                    elif t == "clear_placeholder":
                        _placeholder(sl, op.placeholder).text_frame.clear()
                    elif t == "update_table_cell":
                        tables = [sh for sh in sl.shapes if getattr(sh, "has_table", False)]
                        if op.table_idx is None or not 0 <= op.table_idx < len(tables):
                            raise ApexError(f"table_idx out of range: the slide has {len(tables)}")
                        op_row, op_col = op.row or 0, op.column or 0
                        tables[op.table_idx].table.cell(op_row, op_col).text = op.text or ""
                    elif t == "duplicate_slide":
                        new = prs.slides.add_slide(sl.slide_layout)
                        for ph in list(new.placeholders):
                            ph._element.getparent().remove(ph._element)
                        for sh in sl.shapes:
                            new.shapes._spTree.append(copy.deepcopy(sh._element))
                        pos = len(prs.slides) - 1 if op.position is None else op.position
                        ids = prs.slides._sldIdLst
                        el = ids[-1]
                        ids.remove(el)
                        ids.insert(min(pos, len(ids)), el)
                    elif t == "set_notes":
                        sl.notes_slide.notes_text_frame.text = op.notes or ""
                except ApexError as e:
                    raise ApexError(f"operations[{i}] ({op.type}): {e.message}") from None
                except (IndexError, KeyError, ValueError) as e:
                    raise ApexError(f"operations[{i}] ({op.type}): {e}") from None
            if metadata:
                for k in ("title", "subject", "author", "comments"):
                    if getattr(metadata, k):
                        setattr(prs.core_properties, k, getattr(metadata, k))
            prs.save(str(p))
        return f"Applied {len(operations)} operation(s) to {vpath(world, p)}"

    return [
        create_deck,
        delete_deck,
        add_slide,
        insert_table,
        read_image,
        add_image,
        add_shape,
        insert_chart,
        edit_slides,
        modify_image,
        read_slides,
        read_completedeck,
        read_individualslide,
    ]


def probe(world: World) -> str:
    return _slides.probe(world)
