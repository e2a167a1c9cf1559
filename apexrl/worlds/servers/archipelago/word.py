"""archipelago `word` server: .docx documents (python-docx). Elements are addressed by
stable identifiers that read_document_content prints: 'body.p.N' (the N-th body
paragraph), 'body.p.N.r.M' (a run of it), 'body.tbl.T.r.R.c.C' (a table cell)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.servers import docs as _docs
from apexrl.worlds.servers.archipelago import file_arg, new_file, vpath
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

    def page_orientation(
        file_path: DocxPath,
        orientation: Annotated[str, Field(description="'portrait' or 'landscape'.")],
        section_index: Annotated[int | None, Field(description="Section (default: all).")] = None,
    ) -> str:
        """Set the page orientation of a document's sections."""
        from docx.enum.section import WD_ORIENT

        if orientation not in ("portrait", "landscape"):
            raise ApexError("orientation must be 'portrait' or 'landscape'")
        p = _docx(world, file_path)
        with world.lock:
            d = _docs._open(p)
            secs = list(d.sections)
            if section_index is not None:
                if not 0 <= section_index < len(secs):
                    raise ApexError(f"section_index out of range: {len(secs)} section(s)")
                secs = [secs[section_index]]
            want = WD_ORIENT.LANDSCAPE if orientation == "landscape" else WD_ORIENT.PORTRAIT
            for s in secs:
                if s.orientation != want:
                    s.orientation = want
                    s.page_width, s.page_height = s.page_height, s.page_width
            d.save(str(p))
        return f"Set {len(secs)} section(s) of {vpath(world, p)} to {orientation}"

    return [
        create_document,
        delete_document,
        get_document_overview,
        read_document_content,
        add_content_text,
        edit_content_text,
        delete_content_text,
        page_orientation,
    ]


def probe(world: World) -> str:
    return _docs.probe(world)
