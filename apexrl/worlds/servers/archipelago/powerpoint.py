"""archipelago `powerpoint` server: .pptx decks (python-pptx), slides 0-based, in
archipelago's result formats (measured against its presentations server with
`apexrl world verify`): every answer is compact JSON with `success` first and `error`
last (the other fields null on failure); argument checks the peer makes in its request
model (paths, ranges of a few numbers) answer as JSON-RPC `Invalid params` errors;
read_slides is the deck as markdown in the layout MarkItDown gives a .pptx (slide
markers, `#` titles, pipe tables, picture links, notes), cut to [start, end)."""

from __future__ import annotations

import contextlib
import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import slides as _slides
from apexrl.worlds.servers import Failed, Server, Style
from apexrl.worlds.servers.archipelago import (
    ImageCache,
    existing_file,
    file_arg,
    image_file,
    path_problem,
    transform_image,
)
from apexrl.worlds.world import World

SERVER = Server(
    "powerpoint",
    app="slides",
    aliases=("presentations", "pptx"),
    peer_folder="presentations",
    state={"images": ImageCache},
)

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
EMU_PER_INCH = 914400
# placeholder type numbers named in the order of the schema's ST_PlaceholderType list
# (title, body, ctrTitle, ...), which is how the peer names a placeholder's kind
_PH_NAMES = (
    "TITLE",
    "BODY",
    "CENTER_TITLE",
    "SUBTITLE",
    "DATE",
    "SLIDE_NUMBER",
    "FOOTER",
    "HEADER",
    "OBJECT",
    "CHART",
    "TABLE",
    "BITMAP",
    "ORG_CHART",
    "MEDIA_CLIP",
    "SLIDE_IMAGE",
    "PICTURE",
)
# each tool's answer fields, between `success` and `error`
FIELDS: dict[str, tuple[str, ...]] = {
    "read_completedeck": ("total_slides", "slides"),
    "read_slides": ("content", "start", "end", "total_length"),
    "read_individualslide": (
        "slide_index",
        "total_slides",
        "layout",
        "components",
        "images",
        "notes",
    ),
    "create_deck": ("file_name", "file_path"),
    "delete_deck": ("file_path",),
    "add_slide": ("index", "file_path"),
    "insert_table": ("slide_index", "rows", "cols"),
    "add_shape": ("slide_index", "shape_type", "position"),
    "add_image": ("slide_index", "position"),
    "modify_image": ("image_index", "slide_index", "operation"),
    "insert_chart": ("slide_index", "chart_type", "title"),
    "edit_slides": ("file_path", "operations_applied"),
}


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _answer(tool: str, values: dict[str, Any] | None, error: str | None = None) -> str:
    out: dict[str, Any] = {"success": error is None}
    for k in FIELDS[tool]:
        out[k] = None if values is None else values.get(k)
    out["error"] = error
    return _dump(out)


def _json_answer(fn):
    """The tool's dict (or failure) as the peer's JSON answer."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            got = fn(*args, **kwargs)
        except Failed as e:
            if e.style is not Style.TEXT:
                raise
            return _answer(name, None, str(e))
        except ApexError as e:
            return _answer(name, None, e.message if hasattr(e, "message") else str(e))
        return _answer(name, got) if isinstance(got, dict) else got

    return wrapper


def _invalid(field: str, message: str, *, value_error: bool = True) -> Failed:
    """A request-model check failing: the peer's JSON-RPC Invalid params error."""
    why = f"Value error, {message}" if value_error else message
    return Failed(f"Validation error: request.{field}: {why}", Style.RPC_INVALID_PARAMS, tool="")


def _path(world: World, file_path: str, field: str = "file_path"):
    """The deck a tool names: checked as the peer's request model checks it, then
    'File not found' as a failure."""
    problem = path_problem(file_path, ".pptx")
    if problem:
        raise _invalid(field, problem)
    return existing_file(world, file_path)


def _open_deck(p, what: str):
    import zipfile

    from pptx import Presentation

    if not zipfile.is_zipfile(p):
        raise Failed(f"Failed to parse {what}: BadZipFile('File is not a zip file')")
    try:
        return Presentation(str(p))
    except Exception as e:
        raise Failed(f"Failed to parse {what}: {e!r}") from None


def _inches(v) -> float:
    return round((v or 0) / EMU_PER_INCH, 2)


def _slide_range(prs, slide_index: int):
    n = len(prs.slides)
    if not 0 <= slide_index < n:
        raise Failed(f"Slide index {slide_index} is out of range (0-{n - 1})")
    return prs.slides[slide_index]


def _is_picture(sh) -> bool:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if sh.shape_type == MSO_SHAPE_TYPE.PICTURE:
        return True
    return sh.shape_type == MSO_SHAPE_TYPE.PLACEHOLDER and hasattr(sh, "image")


def _md_shape(sh, title) -> str:
    import re

    out = ""
    if _is_picture(sh):
        try:
            alt = sh._element._nvXxPr.cNvPr.attrib.get("descr", "")
        except Exception:
            alt = ""
        alt = re.sub(r"\s+", " ", re.sub(r"[\r\n\[\]]", " ", alt)).strip()
        out += "\n![" + (alt or sh.name) + "](" + re.sub(r"\W", "", sh.name) + ".jpg)\n"
    if getattr(sh, "has_table", False) and sh.has_table:
        rows = [[c.text for c in r.cells] for r in sh.table.rows]
        lines = [
            "| " + " | ".join(rows[0]) + " |",
            "| " + " | ".join("---" for _ in rows[0]) + " |",
        ]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        out += "\n".join(lines).strip() + "\n"
    if getattr(sh, "has_text_frame", False) and sh.has_text_frame:
        if title is not None and sh._element is title._element:
            out += "# " + sh.text.lstrip() + "\n"
        else:
            out += sh.text + "\n"
    if getattr(sh, "shapes", None) is not None and not getattr(sh, "has_text_frame", False):
        for sub in _by_position(sh.shapes):
            out += _md_shape(sub, title)
    return out


def _by_position(shapes):
    inf = float("-inf")
    return sorted(shapes, key=lambda x: (x.top if x.top else inf, x.left if x.left else inf))


def _markdown(prs) -> str:
    import re

    md = ""
    for n, slide in enumerate(prs.slides, start=1):
        md += f"\n\n<!-- Slide number: {n} -->\n"
        title = slide.shapes.title
        for sh in _by_position(slide.shapes):
            md += _md_shape(sh, title)
        md = md.strip()
        if slide.has_notes_slide:
            md += "\n\n### Notes:\n"
            frame = slide.notes_slide.notes_text_frame
            if frame is not None:
                md += frame.text
            md = md.strip()
    # MarkItDown's last pass: lines right-stripped, runs of blank lines cut to one
    md = "\n".join(line.rstrip() for line in re.split(r"\r?\n", md.strip()))
    return re.sub(r"\n{3,}", "\n\n", md)


class BulletContent(BaseModel):
    items: list[str] = Field(default_factory=list)


class TableContent(BaseModel):
    rows: list[list[str]] = Field(default_factory=list)
    header: bool = True


class TwoColumnContent(BaseModel):
    left: BulletContent | None = None
    right: BulletContent | None = None


class SlideDefinition(BaseModel):
    layout: Layout = "title_and_content"
    title: str | None = None
    subtitle: str | None = None
    bullets: BulletContent | None = None
    table: TableContent | None = None
    columns: TwoColumnContent | None = Field(
        None, description="two_content only: left and right bullet columns"
    )
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
        raise _invalid(what, "Color must be a valid hex string like 'FF0000' or '#FF0000'")
    return RGBColor.from_string(v.upper())


def _slide(prs, index: int | None):
    return _slide_range(prs, index if index is not None else -1)


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
    if s.columns is not None and s.layout == "two_content":
        for ph, col in zip(body[:2], (s.columns.left, s.columns.right), strict=False):
            if col is not None and col.items:
                ph.text_frame.text = col.items[0]
                for item in col.items[1:]:
                    ph.text_frame.add_paragraph().text = item
    if s.table and s.table.rows:
        rows = s.table.rows
        # over the content placeholder, in its place and size (the placeholder stays)
        box = (
            (body[0].left, body[0].top, body[0].width, body[0].height)
            if body
            else (Inches(0.5), Inches(1.8), Inches(9), Inches(0.4) * len(rows))
        )
        shape = slide.shapes.add_table(len(rows), max(len(r) for r in rows), *box)
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


@SERVER.tool
@_json_answer
def create_deck(
    world: World,
    directory: Annotated[str, Field(description="Directory, e.g. '/presentations'.")],
    file_name: Annotated[str, Field(description="File name ending with .pptx.")],
    slides: Annotated[list[SlideDefinition], Field(description="At least one slide.")],
    metadata: PresentationMetadata | None = None,
) -> dict[str, Any]:
    """Create a .pptx from slide definitions (layout, title, subtitle, bullets.items,
    table.rows, notes)."""
    from pptx import Presentation

    if not isinstance(directory, str) or not directory.startswith("/"):
        raise _invalid("directory", "Directory must start with /")
    if "/" in file_name:
        raise _invalid("file_name", "File name cannot contain /")
    if not file_name.lower().endswith(".pptx"):
        raise _invalid("file_name", "File name must end with .pptx")
    if not slides:
        raise _invalid(
            "slides",
            "List should have at least 1 item after validation, not 0",
            value_error=False,
        )
    for i, sd in enumerate(slides):
        if sd.table is not None and sd.layout not in ("title_and_content", "two_content"):
            raise _invalid(
                f"slides.{i}.table",
                "Tables are only supported on title_and_content or two_content layouts",
            )
    vp = f"{directory.rstrip('/')}/{file_name}"
    try:
        p = world.fs_path(vp)
    except ApexError as e:
        raise Failed(str(e)) from None
    from apexrl.worlds.servers.archipelago.word import REFUSE_OVERWRITE_ENV, refuse_overwrite

    if refuse_overwrite() and p.exists():
        raise Failed(f"File already exists: {vp} (set {REFUSE_OVERWRITE_ENV}=0 to replace it)")
    with world.lock:
        prs = Presentation()
        for sd in slides:
            _build(prs, sd)
        if metadata:
            for k in ("title", "subject", "author", "comments"):
                if getattr(metadata, k):
                    setattr(prs.core_properties, k, getattr(metadata, k))
        p.parent.mkdir(parents=True, exist_ok=True)
        prs.save(str(p))
    return {"file_name": file_name, "file_path": vp}


@SERVER.tool
@_json_answer
def delete_deck(world: World, file_path: PptxPath) -> dict[str, Any]:
    """Delete a .pptx file."""
    try:
        p = _path(world, file_path)
    except Failed as e:
        if e.style is not Style.TEXT:
            raise
        return {"file_path": file_path}  # the peer answers success for a missing file
    with world.lock:
        p.unlink()
    return {"file_path": file_path}


@SERVER.tool
@_json_answer
def add_slide(
    world: World,
    file_path: PptxPath,
    index: Annotated[int, Field(description="0-based position of the new slide.")],
    layout: Layout = "title_and_content",
    title: str | None = None,
    subtitle: str | None = None,
    bullets: list[str] | None = None,
) -> dict[str, Any]:
    """Insert a slide at a position of an existing deck."""
    p = _path(world, file_path)
    with world.lock:
        prs = _open_deck(p, "presentation")
        n = len(prs.slides)
        if not 0 <= index <= n:
            raise Failed(f"Index {index} is out of range. Total slides: {n}. Maximum index: {n}")
        spec = SlideDefinition(
            layout=layout,
            title=title,
            subtitle=subtitle,
            bullets=BulletContent(items=bullets) if bullets else None,
        )
        _build(prs, spec, index)
        prs.save(str(p))
    return {"index": index, "file_path": file_path}


@SERVER.tool
@_json_answer
def edit_slides(
    world: World,
    file_path: PptxPath,
    operations: Annotated[
        list[SlideEditOperation],
        Field(min_length=1, description="Edits applied in order (indexes shift after deletes)."),
    ],
    metadata: PresentationMetadata | None = None,
) -> str:
    """Batch edits: replace_text, delete_slide, update_slide_title/subtitle, set_bullets,
    append_bullets, clear_placeholder, update_table_cell, duplicate_slide, set_notes."""
    import copy

    p = _path(world, file_path)
    with world.lock:
        prs = _open_deck(p, "presentation")
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
                    # no match is no failure (the peer reports the operation applied)
                    continue
                if op.index is None or not 0 <= op.index < len(prs.slides):
                    raise Failed(f"Slide index {op.index} is out of range")
                sl = prs.slides[op.index]
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
                    # the copy keeps its layout's (empty) placeholders under the copied
                    # shapes and goes right after the original, as the peer's does
                    new = prs.slides.add_slide(sl.slide_layout)
                    for sh in sl.shapes:
                        new.shapes._spTree.append(copy.deepcopy(sh._element))
                    pos = op.index + 1 if op.position is None else op.position
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
    return {"file_path": file_path, "operations_applied": len(operations)}


@SERVER.tool
@_json_answer
def add_image(
    world: World,
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

    img = image_file(world, image_path)
    p = _path(world, file_path)
    with world.lock:
        prs = _open_deck(p, "presentation")
        _slide(prs, slide_index).shapes.add_picture(
            str(img),
            Inches(x),
            Inches(y),
            Inches(width) if width else None,
            Inches(height) if height else None,
        )
        prs.save(str(p))
    return {"slide_index": slide_index, "position": [float(x), float(y)]}


@SERVER.tool
@_json_answer
def modify_image(
    world: World,
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
    p = _path(world, file_path)
    with world.lock:
        prs = _open_deck(p, "presentation")
        pics = [sh for sh in _slide(prs, slide_index).shapes if hasattr(sh, "image")]
        if image_index >= len(pics):
            raise Failed(
                f"Image index {image_index} is out of range (0-{len(pics) - 1}). "
                f"Found {len(pics)} image(s) on slide {slide_index}"
            )
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
    return {"image_index": image_index, "slide_index": slide_index, "operation": operation}


@SERVER.tool
@_json_answer
def insert_chart(
    world: World,
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
        raise Failed(f"Sheet '{sheet_name}' does not exist")
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
    p = _path(world, presentation_path, "presentation_path")
    with world.lock:
        prs = _open_deck(p, "presentation")
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
    return {"slide_index": slide_index, "chart_type": chart_type, "title": title}


@SERVER.tool
@_json_answer
def insert_table(
    world: World,
    file_path: PptxPath,
    slide_index: Annotated[int, Field(description="0-based slide index.")],
    rows: Annotated[list[list[str]], Field(description="Cells, row by row.")],
    header: Annotated[bool, Field(description="Bold the first row.")] = True,
    x: Annotated[float, Field(description="Left edge, inches.")] = 0.5,
    y: Annotated[float, Field(description="Top edge, inches.")] = 1.5,
    width: Annotated[float, Field(gt=0, description="Inches.")] = 9.0,
    height: Annotated[float, Field(gt=0, description="Inches.")] = 5.0,
) -> dict[str, Any]:
    """Insert a table on a slide."""
    from pptx.util import Inches

    if not rows:
        raise _invalid(
            "rows",
            "List should have at least 1 item after validation, not 0",
            value_error=False,
        )
    if len({len(r) for r in rows}) != 1:
        raise _invalid("rows", "All rows must have the same number of columns")
    p = _path(world, file_path)
    with world.lock:
        prs = _open_deck(p, "presentation")
        shape = _slide_range(prs, slide_index).shapes.add_table(
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
    return {"slide_index": slide_index, "rows": len(rows), "cols": len(rows[0])}


@SERVER.tool
@_json_answer
def add_shape(
    world: World,
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
    p = _path(world, file_path)
    with world.lock:
        prs = _open_deck(p, "presentation")
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
    return {
        "slide_index": slide_index,
        "shape_type": shape_type,
        "position": [float(x), float(y)],
    }


@SERVER.tool
def read_slides(
    world: World,
    file_path: PptxPath,
    start: Annotated[int | None, Field(description="First character (0-based).")] = None,
    end: Annotated[int | None, Field(description="End character, exclusive (default 500).")] = None,
) -> str:
    """The deck's text as markdown (slide markers, titles, tables, notes), characters
    start..end (at most 10,000 per call)."""
    a = start if start is not None else 0
    b = end if end is not None else 500
    try:
        p = _path(world, file_path)
    except Failed as e:
        if e.style is not Style.TEXT:
            raise
        return _answer("read_slides", None, str(e))
    if b <= a:
        return _answer("read_slides", None, "Invalid range: end must be greater than start")
    if b - a > MAX_READ:
        return _answer("read_slides", None, "Invalid range: maximum range is 10,000 characters")
    try:
        from pptx import Presentation

        text = _markdown(Presentation(str(p)))
    except Exception:
        raise Failed(
            "Could not convert stream to Markdown. No converter attempted a conversion, "
            "suggesting that the filetype is simply not supported.",
            Style.RPC_INTERNAL_ERROR,
        ) from None
    return _answer(
        "read_slides", {"content": text[a:b], "start": a, "end": b, "total_length": len(text)}
    )


@SERVER.tool
@_json_answer
def read_completedeck(world: World, file_path: PptxPath) -> dict[str, Any]:
    """Overview of every slide: index (0-based), title and its other text."""
    prs = _open_deck(_path(world, file_path), "presentation")
    slides = []
    for i, sl in enumerate(prs.slides):
        # the first title placeholder with text (a duplicated slide has an empty one
        # from its layout under the copied title)
        title = next(
            (
                sh
                for sh in sl.placeholders
                if int(sh.placeholder_format.type) in (1, 3) and sh.text_frame.text.strip()
            ),
            None,
        )
        head = title.text_frame.text.strip() if title is not None else ""
        texts = []
        for sh in sl.shapes:
            if title is not None and sh._element is title._element:
                continue
            if getattr(sh, "has_text_frame", False) and sh.has_text_frame:
                t = sh.text_frame.text.strip()
                if t:
                    texts.append(t)
        slides.append(
            {
                "slide_index": i,
                "title": head or f"Slide {i}",
                "content": "\n".join(texts) if texts else "(No content)",
            }
        )
    return {"total_slides": len(slides), "slides": slides}


@SERVER.tool
@_json_answer
def read_individualslide(
    world: World,
    images: ImageCache,
    file_path: PptxPath,
    slide_index: Annotated[int, Field(description="0-based slide index.")],
) -> dict[str, Any]:
    """One slide in detail: its layout, every shape (kind, position in inches, text,
    table cells), its pictures (keys for read_image) and speaker notes."""
    if slide_index < 0:
        raise _invalid(
            "slide_index", "Input should be greater than or equal to 0", value_error=False
        )
    prs = _open_deck(_path(world, file_path), "slide")
    n = len(prs.slides)
    if slide_index >= n:
        raise Failed(f"Slide index {slide_index} is out of range. Total slides: {n}")
    sl = prs.slides[slide_index]
    comps: list[dict[str, Any]] = []
    pics: list[dict[str, Any]] = []
    for i, sh in enumerate(sl.shapes):
        c: dict[str, Any] = {
            "index": i,
            "type": str(sh.shape_type),
            "name": sh.name,
            "position": {
                "left": _inches(sh.left),
                "top": _inches(sh.top),
                "width": _inches(sh.width),
                "height": _inches(sh.height),
            },
        }
        if sh.is_placeholder:
            kind = int(sh.placeholder_format.type)
            c["placeholder"] = (
                _PH_NAMES[kind] if 0 <= kind < len(_PH_NAMES) else sh.placeholder_format.type.name
            )
        if getattr(sh, "has_table", False) and sh.has_table:
            rows = [[cell.text for cell in r.cells] for r in sh.table.rows]
            c["component_type"] = "TABLE"
            c["table_size"] = {"rows": len(rows), "columns": len(rows[0]) if rows else 0}
            c["table_data"] = rows
        elif getattr(sh, "has_text_frame", False) and sh.has_text_frame and sh.text:
            c["value"] = sh.text_frame.text
        if _is_picture(sh):
            j = len(pics)
            ann = f"slide{slide_index}_img{j}"
            pics.append(
                {
                    "annotation": ann,
                    "slide_index": slide_index,
                    "image_index": j,
                    "width": (sh.width or 0) / EMU_PER_INCH,
                    "height": (sh.height or 0) / EMU_PER_INCH,
                }
            )
            with contextlib.suppress(Exception):  # an image PIL cannot read is not kept
                images.keep(file_path, ann, sh.image.blob)
        comps.append(c)
    notes = None
    if sl.has_notes_slide and sl.notes_slide.notes_text_frame is not None:
        notes = sl.notes_slide.notes_text_frame.text or None
    return {
        "slide_index": slide_index,
        "total_slides": n,
        "layout": sl.slide_layout.name,
        "components": comps,
        "images": pics,
        "notes": notes,
    }


@SERVER.tool
def read_image(
    world: World,
    images: ImageCache,
    file_path: PptxPath,
    annotation: Annotated[
        str, Field(description="Key from read_individualslide, e.g. 'slide0_img0'.")
    ],
):
    """Return a picture of a slide, by the key read_individualslide listed (read the
    slide first)."""
    img = images.image(file_path, (annotation or "").strip())
    if img is None:
        raise Failed(
            f"Image not found in cache for file '{file_path}' with annotation '{annotation}'. "
            "Make sure you've called read_individualslide first to extract images.",
            Style.RPC_INVALID_PARAMS,
        )
    return img


def probe(world: World) -> str:
    return _slides.probe(world)
