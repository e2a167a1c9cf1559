"""archipelago `word` server: .docx documents (python-docx), in archipelago's result
formats (measured against its documents server with `apexrl world verify`): reports
with a title line, `=`/`-` rules and `Status: success`, failures as ordinary one-line
results. Elements are addressed by the identifiers read_document_content prints:
'body.p.N' (the N-th body paragraph), 'body.p.N.r.M' (a run of it),
'body.tbl.T.r.R.c.C' (a table cell), 'header.s.S.p.N' / 'footer.s.S.p.N'.

read_document_content pages by size, not by a fixed paragraph count: paragraphs and
tables go onto a page in document order until their estimated size passes a budget
(the sizes below reproduce the peer's page breaks)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import docs as _docs
from apexrl.worlds.servers import Failed, Server, Style
from apexrl.worlds.servers.archipelago import (
    ImageCache,
    existing_file,
    image_file,
    path_problem,
    transform_image,
)
from apexrl.worlds.world import World

SERVER = Server(
    "word",
    app="docs",
    aliases=("documents", "document", "docx"),
    peer_folder="documents",
    state={"images": ImageCache},
)

RULE = "=" * 80
DASH = "-" * 80
# page budget and size estimates (characters) of read_document_content's pages
PAGE_BUDGET = 40_000
PARA_COST = 90
RUN_COST = 70
CELL_COST = 100
CELL_SHOWN = 40  # characters of a table cell shown
# archipelago's create_document / create_deck overwrite an existing file without a word;
# with this set (off by default) they refuse to, naming the file
REFUSE_OVERWRITE_ENV = "APEXRL_OFFICE_REFUSE_OVERWRITE"


def refuse_overwrite() -> bool:
    import os

    return os.environ.get(REFUSE_OVERWRITE_ENV, "").strip().lower() in ("1", "true", "yes")


DocxPath = Annotated[
    str, Field(description="Path of the .docx file, e.g. '/documents/report.docx'.")
]
Identifier = Annotated[
    str, Field(description="Identifier from read_document_content, e.g. 'body.p.3'.")
]


class ContentBlock(BaseModel):
    type: Literal[
        "paragraph",
        "heading",
        "bullet_list",
        "numbered_list",
        "table",
        "page_break",
        "section_break",
    ]
    text: str | None = Field(None, description="paragraph / heading text")
    level: int | None = Field(None, description="heading level 1-4")
    items: list[str] | None = Field(None, description="list items")
    rows: list[list[str]] | None = Field(None, description="table cells, row by row")
    header: bool | None = Field(None, description="bold the first table row (default true)")
    style: str | None = Field(None, description="named Word style")
    bold: bool | None = None
    italic: bool | None = None
    width: float | None = Field(None, description="table width in inches (headers/footers)")
    start_type: str | None = Field(
        None, description="section_break: new_page, continuous, odd_page or even_page"
    )


class DocumentMetadata(BaseModel):
    title: str | None = None
    subject: str | None = None
    author: str | None = None
    comments: str | None = None


def _path(world: World, file_path: str, *, must_exist: bool = True) -> Path:
    problem = path_problem(file_path, ".docx")
    if problem:
        raise Failed(problem)
    return existing_file(world, file_path, must_exist=must_exist)


def _open(p: Path, file_path: str):
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        return docx.Document(str(p))
    except PackageNotFoundError:
        raise Failed(
            f"Failed to read document: PackageNotFoundError(\"Package not found at '{file_path}'\")"
        ) from None
    except Exception as e:
        raise Failed(f"Failed to read document: {e!r}") from None


def _load(world: World, file_path: str):
    p = _path(world, file_path)
    return p, _open(p, file_path)


def _style(obj) -> str:
    try:
        s = obj.style
    except Exception:
        return ""
    return s.name if s is not None and s.name else ""


def _blip_ids(run) -> list[str]:
    ns = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"
    return [b.get(ns) for b in run._r.iter() if b.tag.endswith("}blip") and b.get(ns)]


def _fmt(run) -> list[str]:
    out = [n for n in ("bold", "italic", "underline") if getattr(run, n)]
    if run.font.strike:
        out.append("strikethrough")
    return out


def _body_blocks(d) -> list[tuple[str, Any]]:
    """The body's paragraphs and tables in document order."""
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    out = []
    for el in d.element.body.iterchildren():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag == "p":
            out.append(("p", Paragraph(el, d._body)))
        elif tag == "tbl":
            out.append(("t", Table(el, d._body)))
    return out


def _cost(kind: str, obj) -> int:
    if kind == "p":
        return PARA_COST + sum(RUN_COST + len(r.text) for r in obj.runs)
    return sum(CELL_COST + len(c.text) for row in obj.rows for c in row.cells)


def _pages(d) -> list[list[tuple[str, int, Any]]]:
    """Blocks (kind, index, object) split into pages by estimated size."""
    pages: list[list[tuple[str, int, Any]]] = [[]]
    used = 0
    counts = {"p": 0, "t": 0}
    for kind, obj in _body_blocks(d):
        i = counts[kind]
        counts[kind] += 1
        cost = _cost(kind, obj)
        if pages[-1] and used + cost > PAGE_BUDGET:
            pages.append([])
            used = 0
        pages[-1].append((kind, i, obj))
        used += cost
    return pages


def _heading_level(style: str) -> int | None:
    if style == "Title":
        return 0
    m = re.fullmatch(r"Heading (\d+)", style)
    return int(m.group(1)) if m else None


_ID = re.compile(
    r"^(body|header\.s\.(\d+)|footer\.s\.(\d+))\.(?:p\.(\d+)(?:\.r\.(\d+))?|tbl\.(\d+)\.r\.(\d+)\.c\.(\d+))$"
)


def _target(d, identifier: str) -> tuple[str, Any]:
    """('paragraph' | 'run' | 'cell', object) for an identifier; a parse failure as the
    peer words it."""
    ident = (identifier or "").strip()

    def fail(err: str) -> Failed:
        return Failed(
            f"Failed to parse identifier '{identifier}'. Please ensure the identifier is "
            f"valid from read_document_content tool. Error: {err}"
        )

    if not ident.startswith(("body", "header", "footer")):
        raise fail("ValueError(\"Identifier must start with 'body', 'header', or 'footer'\")")
    m = _ID.match(ident)
    if not m:
        raise fail(f"ValueError('Invalid identifier format: {ident}')")
    _, hs, fs, p, r, t, tr, tc = m.groups()
    try:
        if hs is not None or fs is not None:
            sec = d.sections[int(hs if hs is not None else fs)]
            container = sec.header if hs is not None else sec.footer
        else:
            container = d
        if p is not None:
            para = container.paragraphs[int(p)]
            if r is None:
                return "paragraph", para
            return "run", para.runs[int(r)]
        table = container.tables[int(t)]
        return "cell", table.rows[int(tr)].cells[int(tc)]
    except IndexError:
        raise fail("IndexError('list index out of range')") from None


def _para_line(ident: str, para, images: list[tuple[str, Any]]) -> list[str]:
    style = _style(para)
    head = f"[{ident}]" + (f" ({style})" if style and style != "Normal" else "")
    lines = [f"{head}: {para.text}"]
    runs = []
    key = ident.replace(".", "_").replace("_p_", "_p_")
    for j, r in enumerate(para.runs):
        blips = _blip_ids(r)
        if blips:
            ann = f"{key}_r{j}"
            runs.append(f"[{ident}.r.{j}]: IMAGE @{ann}")
            images.append((ann, (r, blips[0])))
            continue
        f = _fmt(r)
        if f:
            runs.append(f'[{ident}.r.{j}]: "{r.text}"({",".join(f)})')
    if runs:
        lines.append("  Runs: " + " | ".join(runs))
    return lines


def _rgb_hex(value: str) -> str | None:
    v = value[1:] if value.startswith("#") else value
    return v.upper() if re.fullmatch(r"[0-9A-Fa-f]{6}", v) else None


def _report(title: str, file_path: str, status: list[str], *sections: list[str]) -> str:
    out = [f"{title}: {file_path}", RULE, "", "Status: success", *status]
    for s in sections:
        out += ["", *s]
    return "\n".join(out) + "\n"


def _what(kind: str, identifier: str) -> str:
    return f"{kind} [{identifier}]"


def _section(d, section_index: int):
    secs = list(d.sections)
    if not 0 <= section_index < len(secs):
        raise Failed(f"Invalid section_index: {section_index}. Document has {len(secs)} sections.")
    return secs[section_index]


def _inches(length) -> float:
    return round(length / 914400, 4) if length is not None else 0.0


@SERVER.tool
def create_document(
    world: World,
    directory: Annotated[str, Field(description="Directory, e.g. '/' or '/reports'.")],
    file_name: Annotated[str, Field(description="File name ending with .docx.")],
    content: Annotated[list[ContentBlock], Field(description="Blocks, in order.")],
    metadata: DocumentMetadata | None = None,
) -> str:
    """Create a .docx from content blocks: paragraph, heading (level 1-4), bullet_list,
    numbered_list (items), table (rows, header), page_break, section_break."""
    import docx
    from docx.enum.section import WD_SECTION

    if not isinstance(directory, str) or not directory.startswith("/"):
        raise Failed("Directory must start with /")
    if not file_name.lower().endswith(".docx"):
        raise Failed("File name must end with .docx")
    if "/" in file_name:
        raise Failed("File name cannot contain /")
    if not content:
        raise Failed("Content must be a non-empty list")
    d = docx.Document()
    for b in content:
        if b.type == "paragraph":
            if not b.text:
                raise Failed("Paragraph text must not be empty")
            para = d.add_paragraph(style=b.style) if b.style else d.add_paragraph()
            run = para.add_run(b.text)
            if b.bold:
                run.bold = True
            if b.italic:
                run.italic = True
        elif b.type == "heading":
            if not b.text:
                raise Failed("Heading text must not be empty")
            level = max(1, min(4, b.level if b.level is not None else 1))
            if b.style:
                d.add_paragraph(b.text, style=b.style)
            else:
                d.add_heading(b.text, level=level)
        elif b.type in ("bullet_list", "numbered_list"):
            if not b.items:
                raise Failed("List items must not be empty")
            style = b.style or ("List Bullet" if b.type == "bullet_list" else "List Number")
            for item in b.items:
                d.add_paragraph(item, style=style)
        elif b.type == "table":
            rows = b.rows or []
            if not rows:
                raise Failed("Table must have at least one row")
            if len({len(r) for r in rows}) != 1:
                raise Failed("All table rows must have the same number of cells")
            t = d.add_table(rows=len(rows), cols=len(rows[0]))
            if b.style:
                t.style = b.style
            for ri, row in enumerate(rows):
                for ci, val in enumerate(row):
                    cell = t.cell(ri, ci)
                    cell.text = str(val)
                    if ri == 0 and b.header is not False:
                        for r in cell.paragraphs[0].runs:
                            r.bold = True
        elif b.type == "page_break":
            d.add_page_break()
        elif b.type == "section_break":
            kinds = {
                "new_page": WD_SECTION.NEW_PAGE,
                "continuous": WD_SECTION.CONTINUOUS,
                "odd_page": WD_SECTION.ODD_PAGE,
                "even_page": WD_SECTION.EVEN_PAGE,
            }
            d.add_section(kinds.get(b.start_type or "new_page", WD_SECTION.NEW_PAGE))
    if metadata:
        for k in ("title", "subject", "author", "comments"):
            if getattr(metadata, k):
                setattr(d.core_properties, k, getattr(metadata, k))
    vp = f"{directory.rstrip('/')}/{file_name}"
    try:
        p = world.fs_path(vp)
    except ApexError as e:
        raise Failed(f"Failed to create document: {e}") from None
    if refuse_overwrite() and p.exists():
        raise Failed(f"File already exists: {vp} (set {REFUSE_OVERWRITE_ENV}=0 to replace it)")
    with world.lock:
        p.parent.mkdir(parents=True, exist_ok=True)
        d.save(str(p))
    return f"Document {file_name} created at {vp}"


@SERVER.tool
def delete_document(world: World, file_path: DocxPath) -> str:
    """Delete a .docx file."""
    p = _path(world, file_path)
    with world.lock:
        p.unlink()
    return f"Document {file_path} deleted successfully"


@SERVER.tool
def get_document_overview(world: World, file_path: DocxPath) -> str:
    """Structure of a .docx: its headings (with identifiers), paragraph count and pages."""
    _, d = _load(world, file_path)
    paras = d.paragraphs
    heads = []
    for i, p in enumerate(paras):
        lvl = _heading_level(_style(p))
        if lvl is not None:
            heads.append(f"{'  ' * max(0, lvl - 1)}[body.p.{i}] {_style(p)}: {p.text}")
    pages = len(_pages(d))
    out = [
        f"Document Overview: {file_path}",
        RULE,
        "",
        "Status: success",
        f"Total Paragraphs: {len(paras)}",
        f"Total Headings: {len(heads)}",
        "",
        "PAGINATION INFO:",
        f"  Total Pages: {pages}",
        f"  Use read_document_content with page_index=0 to {pages - 1}",
        "  (Each page returns ~50 paragraphs)",
        "",
        RULE,
        "",
    ]
    if heads:
        out += ["Document Structure (headings):", DASH, *heads]
    else:
        out.append("No headings found in document.")
    return "\n".join(out) + "\n"


@SERVER.tool
def read_document_content(
    world: World,
    images: ImageCache,
    file_path: DocxPath,
    page_index: Annotated[
        int | None, Field(description="0-based page to read (default 0).")
    ] = None,
) -> str:
    """Read a .docx page by page: each paragraph with its identifier and style, runs
    with formatting or images, and the page's tables cell by cell."""
    _, d = _load(world, file_path)
    pages = _pages(d)
    page = page_index or 0
    if not 0 <= page < len(pages):
        raise Failed(
            f"Invalid page_index: {page}. Document has {len(pages)} pages (0 to {len(pages) - 1})."
        )
    blocks = pages[page]
    paras = [(i, o) for k, i, o in blocks if k == "p"]
    tables = [(i, o) for k, i, o in blocks if k == "t"]
    found: list[tuple[str, Any]] = []
    body: list[str] = []
    for i, para in paras:
        body += _para_line(f"body.p.{i}", para, found)
        body.append("")
    span = f"paragraphs {paras[0][0]} to {paras[-1][0]}" if paras else "empty page"
    out = [
        f"Document Content: {file_path}",
        RULE,
        "",
        "Status: success",
        f"Paragraphs in response: {len(paras)}",
        f"Tables: {len(tables)}",
        f"Images: {len(found)}",
        "",
        f"PAGINATION: Total {len(pages)} pages (use page_index 0 to {len(pages) - 1})",
        f"  Current page: {page} ({span})",
        "",
        RULE,
        "",
    ]
    if paras:
        out += ["Paragraphs:", DASH, *body]
    if tables:
        out += [RULE, "Tables:", DASH]
        for ti, t in tables:
            out.append(f"Table [body.tbl.{ti}] ({len(t.rows)} rows x {len(t.columns)} cols):")
            for ri, row in enumerate(t.rows):
                cells = [
                    f"[body.tbl.{ti}.r.{ri}.c.{ci}]: {c.text[:CELL_SHOWN]}"
                    for ci, c in enumerate(row.cells)
                ]
                out.append(f"  Row {ri}: " + " | ".join(cells))
            out.append("")
    for ann, (_run, rid) in found:
        with contextlib.suppress(Exception):  # an image PIL cannot read is not kept
            images.keep(file_path, ann, d.part.related_parts[rid].blob)
    return "\n".join(out)


@SERVER.tool
def read_image(
    world: World,
    images: ImageCache,
    file_path: DocxPath,
    annotation: Annotated[
        str, Field(description="Key from read_document_content, e.g. 'body_p_0_r0'.")
    ],
):
    """Return an image embedded in a document, by the annotation key that
    read_document_content printed (read the document first)."""
    img = images.image(file_path, (annotation or "").strip().lstrip("@"))
    if img is None:
        raise Failed(
            f"Image not found in cache for file '{file_path}' with annotation "
            f"'{annotation}'. Make sure you've called read_document_content first to "
            "extract images.",
            Style.RPC_INTERNAL_ERROR,
        )
    return img


@SERVER.tool
def add_content_text(
    world: World,
    file_path: DocxPath,
    identifier: Identifier,
    text: Annotated[str, Field(description="Text to insert.")],
    position: Annotated[
        str | None, Field(description="'start'/'before' (prepend) or 'end'/'after' (append).")
    ] = "end",
) -> str:
    """Add text at an identifier: inside the paragraph / run / cell, at its start or end."""
    pos = {"before": "start", "after": "end", "start": "start", "end": "end"}.get(position or "end")
    if pos is None:
        raise Failed("Position must be one of: before, after, start, end")
    p, d = _load(world, file_path)
    with world.lock:
        kind, obj = _target(d, identifier)
        if kind == "run":
            obj.text = text + obj.text if pos == "start" else obj.text + text
            preview = obj.text
        else:
            para = obj if kind == "paragraph" else obj.paragraphs[0 if pos == "start" else -1]
            runs = para.runs
            if not runs:
                para.add_run(text)
            elif pos == "start":
                runs[0].text = text + runs[0].text
            else:
                runs[-1].text = runs[-1].text + text
            preview = obj.text
        d.save(str(p))
    return _report(
        "Added Content",
        file_path,
        [f"Target: {_what(kind, identifier)}", f"Position: {pos}"],
        ["Updated Text Preview:", DASH, preview],
    )


@SERVER.tool
def edit_content_text(
    world: World, file_path: DocxPath, identifier: Identifier, new_text: str
) -> str:
    """Replace the text at an identifier (paragraph, run or table cell)."""
    p, d = _load(world, file_path)
    with world.lock:
        kind, obj = _target(d, identifier)
        old = obj.text
        if kind == "run":
            obj.text = new_text
        elif kind == "paragraph":
            _docs._set_text(obj, new_text)
        else:
            _docs._set_text(obj.paragraphs[0], new_text)
            for extra in obj.paragraphs[1:]:
                extra._element.getparent().remove(extra._element)
        d.save(str(p))
    return _report(
        "Edited Content",
        file_path,
        [f"Target: {_what(kind, identifier)}"],
        ["Change Summary:", DASH, f"Old Text: {old}", "", f"New Text: {new_text}"],
    )


@SERVER.tool
def delete_content_text(
    world: World,
    file_path: DocxPath,
    identifier: Identifier,
    scope: Annotated[
        str | None, Field(description="'content' (clear the text) or 'element' (remove it).")
    ] = "content",
    collapse_whitespace: bool | None = False,
) -> str:
    """Delete what an identifier points at: clear its text, or remove the element."""
    scope = scope or "content"
    if scope not in ("content", "element"):
        raise Failed("Scope must be 'content' or 'element'")
    p, d = _load(world, file_path)
    with world.lock:
        kind, obj = _target(d, identifier)
        if scope == "element":
            if kind == "cell":
                raise Failed(
                    "Cell elements cannot be deleted. Use scope='content' to clear cell contents."
                )
            el = obj._element if kind == "paragraph" else obj._r
            el.getparent().remove(el)
            summary = ["Element removed from document structure."]
        elif kind == "run":
            summary = [f"Deleted Text: {obj.text}"]
            obj.text = ""
        elif kind == "paragraph":
            runs = obj.runs
            summary = [f"Deleted Runs: {len(runs)}"]
            summary += [f"  Run {j}: {r.text}" for j, r in enumerate(runs)]
            for r in runs:
                r.text = ""
        else:
            paras = obj.paragraphs
            summary = [f"Deleted Paragraphs: {len(paras)}"]
            summary += [f"  Paragraph {j}: {q.text}" for j, q in enumerate(paras)]
            for q in paras:
                for r in q.runs:
                    r.text = ""
            if collapse_whitespace:
                for extra in paras[1:]:
                    extra._element.getparent().remove(extra._element)
        d.save(str(p))
    return _report(
        "Deleted Content",
        file_path,
        [f"Target: {_what(kind, identifier)}", f"Scope: {scope}"],
        ["Deletion Summary:", DASH, *summary],
    )


@SERVER.tool
def add_image(
    world: World,
    file_path: DocxPath,
    image_path: Annotated[str, Field(description="Image (.png, .jpg, .jpeg) in the sandbox.")],
    identifier: Identifier,
    position: Annotated[
        str | None, Field(description="'start' or 'end' of the paragraph.")
    ] = "end",
    width: Annotated[float | None, Field(description="Inches.")] = None,
    height: Annotated[float | None, Field(description="Inches.")] = None,
) -> str:
    """Insert an image into a paragraph (one of width/height keeps the aspect ratio)."""
    from docx.shared import Inches

    position = position or "end"
    p, d = _load(world, file_path)
    img = image_file(world, image_path)
    if position not in ("start", "end"):
        raise Failed(f"Position must be 'start' or 'end', got: {position}")
    with world.lock:
        kind, obj = _target(d, identifier)
        para = obj if kind == "paragraph" else (obj.paragraphs[0] if kind == "cell" else None)
        if para is None:
            raise Failed(f"Cannot add an image to a {kind}; use a paragraph identifier")
        run = para.add_run()
        run.add_picture(
            str(img), Inches(width) if width else None, Inches(height) if height else None
        )
        if position == "start":
            para._p.remove(run._r)
            first = para._p.find("{http://schemas.openxmlformats.org/wordprocessingml/2006/main}r")
            if first is None:
                para._p.append(run._r)
            else:
                first.addprevious(run._r)
        d.save(str(p))
    return f"Image added to {identifier} at position {position}"


@SERVER.tool
def modify_image(
    world: World,
    file_path: DocxPath,
    image_index: Annotated[int, Field(description="0-based, in document order.")],
    operation: Annotated[str, Field(description="'rotate', 'flip', 'brightness', 'contrast'.")],
    rotation: int | None = None,
    flip: str | None = None,
    brightness: float | None = None,
    contrast: float | None = None,
) -> str:
    """Rotate, flip, brighten or change the contrast of an embedded image."""
    ops = ("rotate", "flip", "brightness", "contrast")
    if operation not in ops:
        raise Failed(f"Invalid operation: {operation}. Valid operations: {', '.join(ops)}")
    p, d = _load(world, file_path)
    found = []
    for i, para in enumerate(d.paragraphs):
        for j, r in enumerate(para.runs):
            for rid in _blip_ids(r):
                found.append((f"body.p.{i}.r.{j}", rid))
    if not 0 <= image_index < len(found):
        raise Failed(
            f"Image index {image_index} is out of range (0-{len(found) - 1}). "
            f"Found {len(found)} image(s) in document"
        )
    where, rid = found[image_index]
    if operation == "rotate" and rotation is None:
        raise Failed("Rotation angle is required for rotate operation")
    if operation == "flip" and flip is None:
        raise Failed("Flip direction is required for flip operation")
    if operation == "brightness" and brightness is None:
        raise Failed("Brightness factor is required for brightness operation")
    if operation == "contrast" and contrast is None:
        raise Failed("Contrast factor is required for contrast operation")
    with world.lock:
        part = d.part.related_parts[rid]
        try:
            part._blob = transform_image(
                part.blob,
                operation,
                rotation=rotation,
                flip=flip,
                brightness=brightness,
                contrast=contrast,
            )
        except ApexError as e:
            raise Failed(str(e)) from None
        d.save(str(p))
    done = {
        "rotate": f"rotated {rotation}°",
        "flip": f"flipped {flip}",
        "brightness": f"brightness adjusted to {brightness}x",
        "contrast": f"contrast adjusted to {contrast}x",
    }[operation]
    return f"Image {image_index} at {where} {done}"


@SERVER.tool
def apply_formatting(
    world: World,
    file_path: DocxPath,
    identifier: Identifier,
    bold: bool | None = None,
    italic: bool | None = None,
    underline: bool | None = None,
    strikethrough: bool | None = None,
    font_size: Annotated[float | None, Field(description="Points.")] = None,
    font_color: Annotated[str | None, Field(description="Hex RGB, e.g. 'FF0000'.")] = None,
) -> str:
    """Format the runs of a paragraph, run or table cell (bold, italic, size, color...)."""
    from docx.shared import Pt, RGBColor

    color = None
    if font_color is not None:
        color = _rgb_hex(font_color)
        if color is None:
            raise Failed("font_color must be a 6-hex RGB string like 'FF0000' or '#FF0000'")
    p, d = _load(world, file_path)
    with world.lock:
        kind, obj = _target(d, identifier)
        if kind == "run":
            runs = [obj]
        elif kind == "paragraph":
            runs = list(obj.runs)
        else:
            runs = [r for q in obj.paragraphs for r in q.runs]
        for r in runs:
            for attr, val in (("bold", bold), ("italic", italic), ("underline", underline)):
                if val is not None:
                    setattr(r, attr, val)
            if strikethrough is not None:
                r.font.strike = strikethrough
            if font_size is not None:
                r.font.size = Pt(font_size)
            if color is not None:
                r.font.color.rgb = RGBColor.from_string(color)
        d.save(str(p))
    applied = [
        f"{k}: {v}"
        for k, v in (
            ("bold", bold),
            ("italic", italic),
            ("underline", underline),
            ("strikethrough", strikethrough),
            ("font_size", float(font_size) if font_size is not None else None),
            ("font_color", color),
        )
        if v is not None
    ]
    return _report(
        "Applied Formatting",
        file_path,
        [f"Target: {_what(kind, identifier)}", f"Runs Updated: {len(runs)}"],
        ["Formatting Applied:", DASH, *applied],
    )


@SERVER.tool
def header_footer(
    world: World,
    file_path: DocxPath,
    action: Annotated[str, Field(description="'read', 'set', 'clear' or 'link'.")],
    area: Annotated[str, Field(description="'header' or 'footer'.")],
    section_index: int | None = 0,
    content: Annotated[
        list[ContentBlock] | None, Field(description="For 'set': blocks as create_document.")
    ] = None,
    link_to_previous: bool | None = None,
) -> str:
    """Read, set, clear or link a section's header or footer."""
    if action not in ("read", "set", "clear", "link"):
        raise Failed(f"Invalid action: {action}. Must be one of: clear, link, read, set")
    if area not in ("header", "footer"):
        raise Failed(f"Invalid area: {area}. Must be one of: footer, header")
    p, d = _load(world, file_path)
    si = section_index or 0
    hf = getattr(_section(d, si), area)
    where = [f"Area: {area}", f"Section Index: {si}"]
    if action == "read":
        linked = hf.is_linked_to_previous  # before .paragraphs, which adds a definition
        paras = hf.paragraphs
        lines = []
        for i, q in enumerate(paras):
            lines += _para_line(f"{area}.s.{si}.p.{i}", q, [])
            lines.append("")
        out = [
            f"Header/Footer Content: {file_path}",
            RULE,
            "",
            "Status: success",
            *where,
            f"Linked to Previous: {linked}",
            f"Paragraphs: {len(paras)}",
            f"Tables: {len(hf.tables)}",
            "",
            RULE,
            "",
        ]
        if paras:
            out += ["Paragraphs:", DASH, *lines]
        return "\n".join(out)
    if action == "link":
        if si == 0:
            raise Failed(f"Cannot link section {si} to previous - it is the first section")
        with world.lock:
            hf.is_linked_to_previous = bool(link_to_previous)
            d.save(str(p))
        return _report(
            "Linked Header/Footer",
            file_path,
            [*where, f"Linked to Previous: {hf.is_linked_to_previous}"],
        )
    if action == "clear":
        with world.lock:
            paras, tables = list(hf.paragraphs), list(hf.tables)
            for x in paras + tables:
                x._element.getparent().remove(x._element)
            d.save(str(p))
        return _report(
            "Cleared Header/Footer",
            file_path,
            [*where, f"Paragraphs Removed: {len(paras)}", f"Tables Removed: {len(tables)}"],
        )
    if not content:
        raise Failed("Content is required for 'set' action")
    with world.lock:
        hf.is_linked_to_previous = False
        for x in list(hf.paragraphs) + list(hf.tables):
            x._element.getparent().remove(x._element)
        for b in content:
            if b.type in ("bullet_list", "numbered_list"):
                style = b.style or ("List Bullet" if b.type == "bullet_list" else "List Number")
                for item in b.items or []:
                    try:
                        hf.add_paragraph(item, style=style)
                    except KeyError:
                        hf.add_paragraph(item)
            elif b.type == "table":
                from docx.shared import Inches

                rows = b.rows or [[""]]
                t = hf.add_table(len(rows), len(rows[0]), Inches(b.width or 6.0))
                for ri, row in enumerate(rows):
                    for ci, val in enumerate(row):
                        t.cell(ri, ci).text = str(val)
            elif b.type in ("paragraph", "heading"):
                run = hf.add_paragraph().add_run(b.text or "")
                if b.bold:
                    run.bold = True
                if b.italic:
                    run.italic = True
        d.save(str(p))
    return _report("Set Header/Footer", file_path, [*where, f"Blocks Added: {len(content)}"])


@SERVER.tool
def page_margins(
    world: World,
    file_path: DocxPath,
    action: Annotated[str, Field(description="'read' or 'set'.")],
    section_index: int | None = 0,
    top: Annotated[float | None, Field(description="Inches.")] = None,
    bottom: float | None = None,
    left: float | None = None,
    right: float | None = None,
) -> str:
    """Read or set the page margins (inches) of a section."""
    from docx.shared import Inches

    if action not in ("read", "set"):
        raise Failed(f"Invalid action: {action}. Must be one of: read, set")
    sides = {"top": top, "bottom": bottom, "left": left, "right": right}
    if action == "set" and all(v is None for v in sides.values()):
        raise Failed("At least one margin (top, bottom, left, right) is required for 'set' action")
    p, d = _load(world, file_path)
    si = section_index or 0
    sec = _section(d, si)
    before = {k: _inches(getattr(sec, f"{k}_margin")) for k in sides}
    if action == "read":
        return _report(
            "Page Margins",
            file_path,
            [f"Section Index: {si}"],
            ["Margins (inches):", DASH, *(f"  {k.title()}: {v}" for k, v in before.items())],
        )
    with world.lock:
        for k, v in sides.items():
            if v is not None:
                setattr(sec, f"{k}_margin", Inches(v))
        d.save(str(p))
    after = {k: _inches(getattr(sec, f"{k}_margin")) for k in sides}
    return _report(
        "Set Page Margins",
        file_path,
        [f"Section Index: {si}"],
        [
            "Margins Changed (inches):",
            DASH,
            *(f"  {k.title()}: {before[k]} -> {after[k]}" for k in sides),
        ],
    )


@SERVER.tool
def page_orientation(
    world: World,
    file_path: DocxPath,
    action: Annotated[str, Field(description="'read' or 'set'.")],
    section_index: int | None = 0,
    orientation: Annotated[
        str | None, Field(description="For 'set': 'portrait' or 'landscape'.")
    ] = None,
) -> str:
    """Read or set the page orientation of a section."""
    from docx.enum.section import WD_ORIENT

    if action not in ("read", "set"):
        raise Failed(f"Invalid action: {action}. Must be one of: read, set")
    if action == "set" and orientation is None:
        raise Failed("Orientation is required for 'set' action")
    if action == "set" and orientation not in ("portrait", "landscape"):
        raise Failed(f"Invalid orientation: {orientation}. Must be 'portrait' or 'landscape'")
    p, d = _load(world, file_path)
    si = section_index or 0
    sec = _section(d, si)
    current = "landscape" if sec.orientation == WD_ORIENT.LANDSCAPE else "portrait"
    if action == "read":
        return _report(
            "Page Orientation",
            file_path,
            [
                f"Section Index: {si}",
                f"Orientation: {current}",
                f"Page Size: {_inches(sec.page_width)} x {_inches(sec.page_height)} inches",
            ],
        )
    with world.lock:
        want = WD_ORIENT.LANDSCAPE if orientation == "landscape" else WD_ORIENT.PORTRAIT
        if sec.orientation != want:
            sec.orientation = want
            sec.page_width, sec.page_height = sec.page_height, sec.page_width
        d.save(str(p))
    return _report(
        "Set Page Orientation",
        file_path,
        [f"Section Index: {si}", f"Orientation: {current} -> {orientation}"],
    )


@SERVER.tool
def comments(
    world: World,
    file_path: DocxPath,
    action: Annotated[str, Field(description="'read', 'add' or 'delete'.")],
    identifier: Annotated[str | None, Field(description="For 'add': where.")] = None,
    text: str | None = None,
    author: str | None = None,
    comment_id: Annotated[int | None, Field(description="For 'delete'.")] = None,
) -> str:
    """Read, add or delete document comments."""
    if action not in ("read", "add", "delete"):
        raise Failed(f"Invalid action: {action}. Must be one of: add, delete, read")
    if action == "add":
        if not identifier:
            raise Failed("Identifier is required for 'add' action")
        if not text:
            raise Failed("Text is required for 'add' action")
    if action == "delete" and comment_id is None:
        raise Failed("comment_id is required for 'delete' action")
    p, d = _load(world, file_path)
    if action == "read":
        found = list(d.comments)
        status = [f"Comment Count: {len(found)}"]
        if not found:
            return _report("Comments", file_path, status, ["No comments in document."])
        lines = [f"[{c.comment_id}] {c.author} ({c.timestamp}): {c.text}" for c in found]
        return _report("Comments", file_path, status, ["Comments:", DASH, *lines])
    with world.lock:
        if action == "add":
            kind, obj = _target(d, identifier)
            if kind == "run":
                runs = [obj]
            elif kind == "paragraph":
                runs = obj.runs
            else:
                runs = obj.paragraphs[0].runs
            if not runs:
                raise Failed(f"No text to comment on at {identifier}")
            c = d.add_comment(runs, text=text, author=author or "")
            d.save(str(p))
            return _report(
                "Added Comment",
                file_path,
                [
                    f"Comment ID: {c.comment_id}",
                    f"Target: {identifier}",
                    f"Author: {c.author}",
                    f"Text: {text}",
                ],
            )
        found = next((c for c in d.comments if c.comment_id == comment_id), None)
        if found is None:
            raise Failed(f"Comment with id {comment_id} not found")
        who, said = found.author, found.text
        body = d.element.body
        for tag in ("commentRangeStart", "commentRangeEnd", "commentReference"):
            for el in body.xpath(f".//w:{tag}[@w:id='{comment_id}']"):
                parent = el.getparent()
                if tag == "commentReference" and parent.tag.endswith("}r"):
                    parent.getparent().remove(parent)
                else:
                    parent.remove(el)
        found._comment_elm.getparent().remove(found._comment_elm)
        d.save(str(p))
    return _report(
        "Deleted Comment",
        file_path,
        [f"Comment ID: {comment_id}", f"Author: {who}", f"Text: {said}"],
    )


def probe(world: World) -> str:
    return _docs.probe(world)
