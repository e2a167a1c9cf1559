"""archipelago `word` server: .docx documents (python-docx). Elements are addressed by
stable identifiers that read_document_content prints: 'body.p.N' (the N-th body
paragraph), 'body.p.N.r.M' (a run of it), 'body.tbl.T.r.R.c.C' (a table cell)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import docs as _docs
from apexrl.worlds.servers.archipelago import file_arg, new_file, transform_image, vpath
from apexrl.worlds.world import World

PAGE_PARAGRAPHS = 60
DocxPath = Annotated[
    str, Field(description="Path of the .docx file, e.g. '/documents/report.docx'.")
]
Identifier = Annotated[
    str, Field(description="Identifier from read_document_content, e.g. 'body.p.3'.")
]
_ID = re.compile(r"^body\.(?:p\.(\d+)(?:\.r\.(\d+))?|tbl\.(\d+)\.r\.(\d+)\.c\.(\d+))$")


class ContentBlock(BaseModel):
    type: Literal["paragraph", "heading", "bullet_list", "numbered_list", "table", "page_break"]
    text: str | None = Field(None, description="paragraph / heading text")
    level: int | None = Field(None, description="heading level 1-4")
    items: list[str] | None = Field(None, description="list items")
    rows: list[list[str]] | None = Field(None, description="table cells, row by row")
    header: bool | None = Field(None, description="bold the first table row (default true)")
    style: str | None = Field(None, description="named Word style")
    bold: bool | None = None
    italic: bool | None = None


class DocumentMetadata(BaseModel):
    title: str | None = None
    subject: str | None = None
    author: str | None = None
    comments: str | None = None


def _docx(world: World, path: str):
    return file_arg(world, path, (".docx",))


def _target(d, identifier: str):
    """(kind, object) for an identifier: ('p', paragraph), ('r', run) or ('cell', cell)."""
    m = _ID.match((identifier or "").strip())
    if not m:
        raise ApexError(
            f"identifier {identifier!r} is not valid; use 'body.p.N', 'body.p.N.r.M' or "
            "'body.tbl.T.r.R.c.C' as read_document_content lists them"
        )
    p, r, t, tr, tc = m.groups()
    if p is not None:
        paras = d.paragraphs
        if int(p) >= len(paras):
            raise ApexError(f"{identifier}: the document has {len(paras)} paragraphs")
        para = paras[int(p)]
        if r is None:
            return "p", para
        if int(r) >= len(para.runs):
            raise ApexError(f"{identifier}: paragraph {p} has {len(para.runs)} runs")
        return "r", para.runs[int(r)]
    tables = d.tables
    if int(t) >= len(tables):
        raise ApexError(f"{identifier}: the document has {len(tables)} tables")
    rows = tables[int(t)].rows
    if int(tr) >= len(rows) or int(tc) >= len(rows[int(tr)].cells):
        raise ApexError(f"{identifier}: no such cell in table {t}")
    return "cell", rows[int(tr)].cells[int(tc)]


def _blip_ids(run) -> list[str]:
    ns = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"
    return [b.get(ns) for b in run._r.iter() if b.tag.endswith("}blip") and b.get(ns)]


def tools(world: World) -> list:
    def get_document_overview(file_path: DocxPath) -> dict[str, Any]:
        """Structure of a .docx: headings (with identifiers), paragraph, table and page counts."""
        d = _docs._open(_docx(world, file_path))
        paras = d.paragraphs
        heads = [
            {"identifier": f"body.p.{i}", "style": p.style.name, "text": p.text}
            for i, p in enumerate(paras)
            if p.style is not None
            and (p.style.name.startswith("Heading") or p.style.name == "Title")
        ]
        props = d.core_properties
        return {
            "file_path": vpath(world, world.fs_path(file_path)),
            "paragraphs": len(paras),
            "tables": len(d.tables),
            "pages": max(1, -(-len(paras) // PAGE_PARAGRAPHS)),
            "headings": heads[:300],
            "title": props.title or None,
            "author": props.author or None,
            "words": sum(len(p.text.split()) for p in paras),
        }

    def read_document_content(
        file_path: DocxPath,
        page_index: Annotated[
            int | None, Field(description="0-based page of paragraphs to read (default 0).")
        ] = None,
    ) -> str:
        """Read a .docx page by page: each paragraph with its identifier and style, runs
        when formatting differs, and tables cell by cell (on the last page)."""
        d = _docs._open(_docx(world, file_path))
        paras = d.paragraphs
        pages = max(1, -(-len(paras) // PAGE_PARAGRAPHS))
        page = page_index or 0
        if not 0 <= page < pages:
            raise ApexError(f"page_index {page} out of range: the document has {pages} pages")
        start = page * PAGE_PARAGRAPHS
        lines = [
            f"Document {vpath(world, world.fs_path(file_path))} page {page} of {pages - 1} "
            f"(0-based; {len(paras)} paragraphs, {len(d.tables)} tables)"
        ]  # noqa: E501
        for i, p in enumerate(paras[start : start + PAGE_PARAGRAPHS], start=start):
            style = p.style.name if p.style is not None else "Normal"
            lines.append(f"[body.p.{i}] ({style}) {p.text}")
            for j, r in enumerate(p.runs):
                if _blip_ids(r):
                    lines.append(f"    [image body_p_{i}_r{j}] (read_image annotation)")
            runs = p.runs
            if len(runs) > 1 and len({(r.bold, r.italic, r.underline) for r in runs}) > 1:
                for j, r in enumerate(runs):
                    fmt = "".join(
                        f for f, on in (("B", r.bold), ("I", r.italic), ("U", r.underline)) if on
                    )
                    lines.append(f"    [body.p.{i}.r.{j}]{f' ({fmt})' if fmt else ''} {r.text}")
        if page == pages - 1:
            for ti, t in enumerate(d.tables):
                lines.append(f"[body.tbl.{ti}] table {len(t.rows)}x{len(t.columns)}")
                for ri, row in enumerate(t.rows):
                    cells = [
                        f"[body.tbl.{ti}.r.{ri}.c.{ci}] {c.text}" for ci, c in enumerate(row.cells)
                    ]
                    lines.append("    " + " | ".join(cells))
        elif d.tables:
            lines.append(f"[{len(d.tables)} table(s) on the last page: page_index={pages - 1}]")
        return "\n".join(lines)

    def create_document(
        directory: Annotated[str, Field(description="Directory, e.g. '/' or '/reports'.")],
        file_name: Annotated[str, Field(description="File name ending with .docx.")],
        content: Annotated[list[ContentBlock], Field(description="Blocks, in order.")],
        metadata: DocumentMetadata | None = None,
    ) -> str:
        """Create a .docx from content blocks: paragraph, heading (level 1-4), bullet_list,
        numbered_list (items), table (rows, header), page_break."""
        import docx

        if not content:
            raise ApexError("content must contain at least one block")
        with world.lock:
            p = new_file(world, directory, file_name, ".docx")
            d = docx.Document()
            for i, b in enumerate(content):
                if b.type == "paragraph":
                    para = d.add_paragraph(style=b.style) if b.style else d.add_paragraph()
                    run = para.add_run(b.text or "")
                    run.bold, run.italic = b.bold or None, b.italic or None
                elif b.type == "heading":
                    d.add_heading(b.text or "", level=max(1, min(4, b.level or 1)))
                elif b.type in ("bullet_list", "numbered_list"):
                    style = b.style or ("List Bullet" if b.type == "bullet_list" else "List Number")
                    for item in b.items or []:
                        d.add_paragraph(item, style=style)
                elif b.type == "table":
                    rows = b.rows or []
                    if not rows or len({len(r) for r in rows}) != 1:
                        raise ApexError(f"content[{i}]: table rows must be non-empty and equal")
                    t = d.add_table(rows=len(rows), cols=len(rows[0]))
                    t.style = b.style or "Table Grid"
                    for ri, row in enumerate(rows):
                        for ci, val in enumerate(row):
                            t.cell(ri, ci).text = str(val)
                            if ri == 0 and b.header is not False:
                                for r in t.cell(ri, ci).paragraphs[0].runs:
                                    r.bold = True
                elif b.type == "page_break":
                    d.add_page_break()
            if metadata:
                for k in ("title", "subject", "author", "comments"):
                    if getattr(metadata, k):
                        setattr(d.core_properties, k, getattr(metadata, k))
            p.parent.mkdir(parents=True, exist_ok=True)
            d.save(str(p))
        return f"Document created: {vpath(world, p)}"

    def delete_document(file_path: DocxPath) -> str:
        """Delete a .docx file."""
        p = _docx(world, file_path)
        with world.lock:
            p.unlink()
        return f"Deleted {vpath(world, p)}"

    def add_content_text(
        file_path: DocxPath,
        identifier: Identifier,
        text: Annotated[str, Field(description="Text to insert.")],
        position: Annotated[
            str, Field(description="'start'/'before' (prepend) or 'end'/'after' (append).")
        ] = "end",
    ) -> str:
        """Add text at an identifier: inside the paragraph / run / cell, at its start or end."""
        if position not in ("start", "before", "end", "after"):
            raise ApexError("position must be 'start', 'before', 'end' or 'after'")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            kind, obj = _target(d, identifier)
            front = position in ("start", "before")
            if kind == "r":
                obj.text = text + obj.text if front else obj.text + text
            else:
                para = obj if kind == "p" else (obj.paragraphs[0 if front else -1])
                if front and para.runs:
                    para.runs[0].text = text + para.runs[0].text
                else:
                    para.add_run(text)
            d.save(str(p))
        return f"Added text at {identifier} ({position}) in {vpath(world, p)}"

    def edit_content_text(file_path: DocxPath, identifier: Identifier, new_text: str) -> str:
        """Replace the text at an identifier (paragraph, run or table cell)."""
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            kind, obj = _target(d, identifier)
            old = obj.text
            if kind == "r":
                obj.text = new_text
            elif kind == "p":
                _docs._set_text(obj, new_text)
            else:
                _docs._set_text(obj.paragraphs[0], new_text)
                for extra in obj.paragraphs[1:]:
                    extra._element.getparent().remove(extra._element)
            d.save(str(p))
        return f"Replaced text at {identifier}: {old[:200]!r} -> {new_text[:200]!r}"

    def delete_content_text(
        file_path: DocxPath,
        identifier: Identifier,
        scope: Annotated[
            str, Field(description="'content' (clear the text) or 'element' (remove it).")
        ] = "content",
        collapse_whitespace: bool = False,
    ) -> str:
        """Delete what an identifier points at: clear its text, or remove the paragraph."""
        if scope not in ("content", "element"):
            raise ApexError("scope must be 'content' or 'element'")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            kind, obj = _target(d, identifier)
            old = obj.text
            if scope == "element":
                if kind == "cell":
                    raise ApexError("scope 'element' is not supported for table cells")
                el = obj._element
                el.getparent().remove(el)
            elif kind == "cell":
                _docs._set_text(obj.paragraphs[0], "")
                if collapse_whitespace:
                    for extra in obj.paragraphs[1:]:
                        extra._element.getparent().remove(extra._element)
            elif kind == "r":
                obj.text = ""
            else:
                _docs._set_text(obj, "")
            d.save(str(p))
        return f"Deleted {scope} at {identifier} (was {old[:200]!r})"

    def add_image(
        file_path: DocxPath,
        image_path: Annotated[str, Field(description="Image (.png, .jpg, .jpeg) in the sandbox.")],
        identifier: Identifier,
        position: Annotated[str, Field(description="'start' or 'end' of the paragraph.")] = "end",
        width: Annotated[float | None, Field(description="Inches.")] = None,
        height: Annotated[float | None, Field(description="Inches.")] = None,
    ) -> str:
        """Insert an image into a paragraph (one of width/height keeps the aspect ratio)."""
        from docx.shared import Inches

        if position not in ("start", "end"):
            raise ApexError("position must be 'start' or 'end'")
        img = file_arg(world, image_path, (".png", ".jpg", ".jpeg"))
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            kind, obj = _target(d, identifier)
            para = obj if kind == "p" else (obj.paragraphs[0] if kind == "cell" else None)
            if para is None:
                raise ApexError("images go into a paragraph or a table cell, not a run")
            run = para.add_run()
            run.add_picture(
                str(img), Inches(width) if width else None, Inches(height) if height else None
            )
            if position == "start":
                para._p.remove(run._r)
                first = para._p.find(
                    "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}r"
                )
                if first is None:
                    para._p.append(run._r)
                else:
                    first.addprevious(run._r)
            d.save(str(p))
        return f"Added {vpath(world, img)} at {identifier} ({position})"

    def read_image(
        file_path: DocxPath,
        annotation: Annotated[
            str, Field(description="Key from read_document_content, e.g. 'body_p_0_r0'.")
        ],
    ):
        """Return an image embedded in a document, by its annotation key."""
        import base64
        import mimetypes

        from mcp.types import ImageContent

        m = re.fullmatch(r"@?body_p_(\d+)_r(\d+)", annotation.strip())
        if not m:
            raise ApexError(f"annotation {annotation!r} is not of the form 'body_p_N_rM'")
        d = _docs._open(_docx(world, file_path))
        kind, run = _target(d, f"body.p.{m.group(1)}.r.{m.group(2)}")
        ids = _blip_ids(run)
        if not ids:
            raise ApexError(f"{annotation} holds no image")
        part = d.part.related_parts[ids[0]]
        mime = getattr(part, "content_type", None) or mimetypes.guess_type(str(part.partname))[0]
        return ImageContent(
            type="image", data=base64.b64encode(part.blob).decode(), mimeType=mime or "image/png"
        )

    def modify_image(
        file_path: DocxPath,
        image_index: Annotated[int, Field(description="0-based, in document order.")],
        operation: Annotated[str, Field(description="'rotate', 'flip', 'brightness', 'contrast'.")],
        rotation: int | None = None,
        flip: str | None = None,
        brightness: float | None = None,
        contrast: float | None = None,
    ) -> str:
        """Rotate, flip, brighten or change the contrast of an embedded image."""
        if operation not in ("rotate", "flip", "brightness", "contrast"):
            raise ApexError("operation must be 'rotate', 'flip', 'brightness' or 'contrast'")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            ids = [i for para in d.paragraphs for r in para.runs for i in _blip_ids(r)]
            if not 0 <= image_index < len(ids):
                raise ApexError(f"image_index {image_index} out of range: {len(ids)} image(s)")
            part = d.part.related_parts[ids[image_index]]
            part._blob = transform_image(
                part.blob,
                operation,
                rotation=rotation,
                flip=flip,
                brightness=brightness,
                contrast=contrast,
            )
            d.save(str(p))
        return f"Applied {operation} to image {image_index} of {vpath(world, p)}"

    def _section(d, section_index: int):
        secs = list(d.sections)
        if not 0 <= section_index < len(secs):
            raise ApexError(f"section_index {section_index} out of range: {len(secs)} section(s)")
        return secs[section_index]

    def page_orientation(
        file_path: DocxPath,
        action: Annotated[str, Field(description="'read' or 'set'.")],
        section_index: int = 0,
        orientation: Annotated[
            str | None, Field(description="For 'set': 'portrait' or 'landscape'.")
        ] = None,
    ) -> dict[str, Any]:
        """Read or set the page orientation of a section."""
        from docx.enum.section import WD_ORIENT

        if action not in ("read", "set"):
            raise ApexError("action must be 'read' or 'set'")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            sec = _section(d, section_index)
            if action == "set":
                if orientation not in ("portrait", "landscape"):
                    raise ApexError("orientation must be 'portrait' or 'landscape' for 'set'")
                want = WD_ORIENT.LANDSCAPE if orientation == "landscape" else WD_ORIENT.PORTRAIT
                if sec.orientation != want:
                    sec.orientation = want
                    sec.page_width, sec.page_height = sec.page_height, sec.page_width
                d.save(str(p))
        current = "landscape" if sec.orientation == WD_ORIENT.LANDSCAPE else "portrait"
        return {"section_index": section_index, "orientation": current}

    def page_margins(
        file_path: DocxPath,
        action: Annotated[str, Field(description="'read' or 'set'.")],
        section_index: int = 0,
        top: Annotated[float | None, Field(description="Inches.")] = None,
        bottom: float | None = None,
        left: float | None = None,
        right: float | None = None,
    ) -> dict[str, Any]:
        """Read or set the page margins (inches) of a section."""
        from docx.shared import Inches

        if action not in ("read", "set"):
            raise ApexError("action must be 'read' or 'set'")
        p = _docx(world, file_path)
        sides = {"top": top, "bottom": bottom, "left": left, "right": right}
        with world.lock:
            d = _docs._open(p)
            sec = _section(d, section_index)
            if action == "set":
                if all(v is None for v in sides.values()):
                    raise ApexError("'set' needs at least one of top, bottom, left, right")
                for k, v in sides.items():
                    if v is not None:
                        if v < 0:
                            raise ApexError(f"{k} margin must not be negative")
                        setattr(sec, f"{k}_margin", Inches(v))
                d.save(str(p))
        return {
            "section_index": section_index,
            **{k: round(getattr(sec, f"{k}_margin").inches, 3) for k in sides},
        }

    def apply_formatting(
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
            hexs = font_color.lstrip("#")
            if not re.fullmatch(r"[0-9A-Fa-f]{6}", hexs):
                raise ApexError(f"font_color {font_color!r} is not a 6-digit hex color")
            color = RGBColor.from_string(hexs.upper())
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            kind, obj = _target(d, identifier)
            paras = [obj] if kind == "p" else (obj.paragraphs if kind == "cell" else [])
            runs = [obj] if kind == "r" else [r for para in paras for r in para.runs]
            for r in runs:
                for attr, val in (("bold", bold), ("italic", italic), ("underline", underline)):
                    if val is not None:
                        setattr(r, attr, val)
                if strikethrough is not None:
                    r.font.strike = strikethrough
                if font_size is not None:
                    r.font.size = Pt(font_size)
                if color is not None:
                    r.font.color.rgb = color
            d.save(str(p))
        return f"Formatted {len(runs)} run(s) at {identifier}"

    def header_footer(
        file_path: DocxPath,
        action: Annotated[str, Field(description="'read', 'set', 'clear' or 'link'.")],
        area: Annotated[str, Field(description="'header' or 'footer'.")],
        section_index: int = 0,
        content: Annotated[
            list[ContentBlock] | None, Field(description="For 'set': blocks as create_document.")
        ] = None,
        link_to_previous: bool | None = None,
    ) -> dict[str, Any]:
        """Read, set, clear or link a section's header or footer."""
        if action not in ("read", "set", "clear", "link") or area not in ("header", "footer"):
            raise ApexError("action must be read/set/clear/link and area header/footer")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            hf = getattr(_section(d, section_index), area)
            if action == "set":
                if not content:
                    raise ApexError("'set' needs content blocks")
                hf.is_linked_to_previous = False
                for para in list(hf.paragraphs):
                    para._element.getparent().remove(para._element)
                for b in content:
                    if b.type in ("bullet_list", "numbered_list"):
                        for item in b.items or []:
                            hf.add_paragraph(item)
                    elif b.type == "table":
                        raise ApexError("tables in headers/footers are not supported here")
                    else:
                        run = hf.add_paragraph().add_run(b.text or "")
                        run.bold = True if b.type == "heading" or b.bold else None
            elif action == "clear":
                for para in hf.paragraphs:
                    _docs._set_text(para, "")
            elif action == "link":
                if link_to_previous is None:
                    raise ApexError("'link' needs link_to_previous")
                hf.is_linked_to_previous = link_to_previous
            if action != "read":
                d.save(str(p))
            return {
                "area": area,
                "section_index": section_index,
                "linked_to_previous": hf.is_linked_to_previous,
                "paragraphs": [para.text for para in hf.paragraphs],
            }

    def comments(
        file_path: DocxPath,
        action: Annotated[str, Field(description="'read', 'add' or 'delete'.")],
        identifier: Annotated[str | None, Field(description="For 'add': where.")] = None,
        text: str | None = None,
        author: str | None = None,
        comment_id: Annotated[int | None, Field(description="For 'delete'.")] = None,
    ) -> dict[str, Any]:
        """Read, add or delete document comments."""
        if action not in ("read", "add", "delete"):
            raise ApexError("action must be 'read', 'add' or 'delete'")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            if action == "add":
                if not identifier or not text:
                    raise ApexError("'add' needs identifier and text")
                kind, obj = _target(d, identifier)
                runs = (
                    [obj] if kind == "r" else (obj.runs if kind == "p" else obj.paragraphs[0].runs)
                )
                if not runs:
                    raise ApexError(f"{identifier} has no text to comment on")
                c = d.add_comment(runs, text=text, author=author or "")
                d.save(str(p))
                return {"added": True, "comment_id": c.comment_id}
            if action == "delete":
                if comment_id is None:
                    raise ApexError("'delete' needs comment_id")
                found = next((c for c in d.comments if c.comment_id == comment_id), None)
                if found is None:
                    raise ApexError(f"no comment {comment_id}")
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
                return {"deleted": True, "comment_id": comment_id}
            return {
                "comments": [
                    {"comment_id": c.comment_id, "author": c.author, "text": c.text}
                    for c in d.comments
                ]
            }

    return [
        create_document,
        delete_document,
        get_document_overview,
        read_document_content,
        add_content_text,
        edit_content_text,
        delete_content_text,
        add_image,
        read_image,
        modify_image,
        apply_formatting,
        header_footer,
        page_margins,
        page_orientation,
        comments,
    ]


def probe(world: World) -> str:
    return _docs.probe(world)
