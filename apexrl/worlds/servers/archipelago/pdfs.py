"""archipelago `pdfs` server: read pages as text, search, render a page as an image,
extract an embedded image, create a PDF."""

from __future__ import annotations

import base64
import io
import re
from typing import Annotated, Any

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import pdf as _pdf
from apexrl.worlds.servers.archipelago import file_arg, new_file, vpath
from apexrl.worlds.world import World

RENDER_DPI = 144
PdfPath = Annotated[
    str, Field(description="Path of the PDF inside the sandbox, e.g. '/Reports/q3.pdf'.")
]


class PdfContentBlock(BaseModel):
    type: str = Field(
        description="'paragraph', 'heading', 'bullet_list', 'numbered_list', 'table', "
        "'page_break' or 'spacer'"
    )
    text: str | None = Field(None, description="Text (paragraph, heading)")
    bold: bool | None = Field(None, description="Bold (paragraph)")
    italic: bool | None = Field(None, description="Italic (paragraph)")
    level: int | None = Field(None, description="Heading level 1-4")
    items: list[str] | None = Field(None, description="List items (bullet_list, numbered_list)")
    rows: list[list[str]] | None = Field(None, description="Table cells, row by row")
    header: bool | None = Field(None, description="Bold the first table row")
    height: float | None = Field(None, description="Spacer height in points")


class PdfMetadataInput(BaseModel):
    title: str | None = None
    subject: str | None = None
    author: str | None = None


def _page_text(page) -> str:
    return page.extract_text() or ""


def _layout_text(page) -> str:
    """A page's text with its spatial layout kept (columns and tables stay aligned), as
    archipelago extracts it; plain extraction when layout mode fails."""
    try:
        return page.extract_text(extraction_mode="layout") or ""
    except Exception:
        return _page_text(page)


def tools(world: World) -> list:
    def read_pdf_pages(
        file_path: PdfPath,
        pages: Annotated[
            list[int] | None, Field(description="1-based page numbers to read; omit for all.")
        ] = None,
    ) -> str:
        """Read the text of PDF pages (all pages, or the 1-based `pages` listed). Embedded
        images are listed with an annotation key (page{N}_img{M}) for read_image."""
        if isinstance(file_path, str) and file_path.startswith("/"):
            target = world.fs_path(file_path)
            if not target.exists():
                return f"File not found: {file_path}"
        r = _pdf._reader(file_arg(world, file_path, (".pdf",)))
        n = len(r.pages)
        # pages outside the document are left out, as archipelago leaves them
        want = [p for p in pages if isinstance(p, int) and 1 <= p <= n] if pages else None
        want = want if want is not None else list(range(1, n + 1))
        body, images, errors = [], [], []
        for p in want:
            page = r.pages[p - 1]
            text = _layout_text(page)
            if not text.strip():
                errors.append(f"Page {p}: no text extracted (page may be scanned/image-only)")
            body += [f"\n[page {p}]", text]
            try:
                count = len(page.images)
            except Exception:
                count = 0
            found = [f"[image: page={p}, index={i}, ref=@page{p}_img{i}]" for i in range(count)]
            images += found
            body += found
        head = [f"[pdf: pages={n}, read={len(want)}]"]
        if images:
            head.append(f"[images: count={len(images)}]")
        tail = ["\n[errors]", *(f"- {e}" for e in errors)] if errors else []
        return "\n".join(head + body + tail)

    def search_pdf(
        file_path: PdfPath,
        query: Annotated[str, Field(description="Text to find.")],
        case_sensitive: bool = False,
        whole_word: bool = False,
        max_results: int = 100,
        context_chars: int = 50,
    ) -> dict[str, Any]:
        """Find every occurrence of `query` in a PDF: page number, position and the text
        around it."""
        if not query:
            raise ApexError("query must not be empty")
        if max_results < 1:
            raise ApexError("max_results must be a positive integer")
        r = _pdf._reader(file_arg(world, file_path, (".pdf",)))
        pat = re.escape(query)
        if whole_word:
            pat = rf"\b{pat}\b"
        rx = re.compile(pat, 0 if case_sensitive else re.IGNORECASE)
        matches: list[dict[str, Any]] = []
        for i, page in enumerate(r.pages, start=1):
            text = _page_text(page)
            for m in rx.finditer(text):
                lo, hi = max(0, m.start() - context_chars), m.end() + context_chars
                matches.append(
                    {
                        "page": i,
                        "position": m.start(),
                        "match": m.group(0),
                        "context": text[lo:hi].replace("\n", " "),
                    }
                )
                if len(matches) >= max_results:
                    return {
                        "query": query,
                        "total_matches": len(matches),
                        "matches": matches,
                        "truncated": True,
                    }
        return {"query": query, "total_matches": len(matches), "matches": matches}

    def read_page_as_image(
        file_path: PdfPath,
        page_number: Annotated[int, Field(description="Page to render, 1-based.")],
    ):
        """Render one PDF page as a JPEG image (144 DPI)."""
        from mcp.types import ImageContent

        try:
            import pypdfium2 as pdfium
        except ImportError:
            raise ApexError(
                "page rendering is not available here (pypdfium2 is not installed)",
                hint="read the page's text with read_pdf_pages",
            ) from None

        p = file_arg(world, file_path, (".pdf",))
        try:
            doc = pdfium.PdfDocument(str(p))
        except Exception as e:
            raise ApexError(f"cannot open {file_path} as a PDF: {e}") from e
        try:
            n = len(doc)
            if not 1 <= page_number <= n:
                raise ApexError(f"page_number {page_number} out of range: the PDF has {n} pages")
            img = doc[page_number - 1].render(scale=RENDER_DPI / 72).to_pil().convert("RGB")
        finally:
            doc.close()
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=85)
        return ImageContent(
            type="image", data=base64.b64encode(buf.getvalue()).decode(), mimeType="image/jpeg"
        )

    def read_image(
        file_path: PdfPath,
        annotation: Annotated[
            str, Field(description="Key from read_pdf_pages, e.g. 'page1_img0'.")
        ],
    ):
        """Return an image embedded in a PDF, by the annotation key read_pdf_pages listed."""
        from mcp.types import ImageContent

        m = re.fullmatch(r"@?page(\d+)_img(\d+)", annotation.strip())
        if not m:
            raise ApexError(f"annotation {annotation!r} is not of the form 'page{{N}}_img{{M}}'")
        r = _pdf._reader(file_arg(world, file_path, (".pdf",)))
        pno, ino = int(m.group(1)), int(m.group(2))
        if not 1 <= pno <= len(r.pages):
            raise ApexError(f"page {pno} does not exist (the PDF has {len(r.pages)} pages)")
        imgs = r.pages[pno - 1].images
        if ino >= len(imgs):
            raise ApexError(f"page {pno} has {len(imgs)} embedded image(s); no {annotation}")
        im = imgs[ino]
        buf = io.BytesIO()
        im.image.convert("RGB").save(buf, format="PNG")
        return ImageContent(
            type="image", data=base64.b64encode(buf.getvalue()).decode(), mimeType="image/png"
        )

    def create_pdf(
        directory: Annotated[str, Field(description="Target directory, e.g. '/outputs'.")],
        file_name: Annotated[str, Field(description="File name ending with .pdf (no '/').")],
        content: Annotated[list[PdfContentBlock], Field(description="Content blocks, in order.")],
        metadata: PdfMetadataInput | None = None,
        page_size: Annotated[str, Field(description="'letter' or 'a4'.")] = "letter",
    ) -> str:
        """Create a PDF from content blocks: paragraph (text, bold, italic), heading (text,
        level 1-4), bullet_list / numbered_list (items), table (rows, header), page_break,
        spacer (height)."""
        from fpdf import FPDF

        if not content:
            raise ApexError("content must contain at least one block")
        if page_size.lower() not in ("letter", "a4"):
            raise ApexError("page_size must be 'letter' or 'a4'")
        with world.lock:
            p = new_file(world, directory, file_name, ".pdf")
            doc = FPDF(format=page_size.lower())
            doc.set_auto_page_break(True, margin=15)
            doc.add_page()
            if metadata:
                if metadata.title:
                    doc.set_title(metadata.title)
                if metadata.subject:
                    doc.set_subject(metadata.subject)
                if metadata.author:
                    doc.set_author(metadata.author)

            def line(text: str, style: str = "", size: float = 11) -> None:
                doc.set_font("Helvetica", style, size)
                doc.multi_cell(0, size * 0.5 + 2, _latin1(text), new_x="LMARGIN", new_y="NEXT")

            for i, b in enumerate(content):
                t = b.type
                if t == "paragraph":
                    line(b.text or "", ("B" if b.bold else "") + ("I" if b.italic else ""))
                elif t == "heading":
                    line(b.text or "", "B", {1: 20, 2: 16, 3: 14}.get(b.level or 1, 12))
                elif t in ("bullet_list", "numbered_list"):
                    for k, item in enumerate(b.items or [], start=1):
                        line(("- " if t == "bullet_list" else f"{k}. ") + item)
                elif t == "table":
                    rows = b.rows or []
                    if rows:
                        doc.set_font("Helvetica", "", 10)
                        heading = "B" if b.header is not False else ""
                        with doc.table(headings_style=_heading_style(heading)) as table:
                            for row in rows:
                                tr = table.row()
                                for cell in row:
                                    tr.cell(_latin1(str(cell)))
                elif t == "page_break":
                    doc.add_page()
                elif t == "spacer":
                    doc.ln(b.height or 12)
                else:
                    raise ApexError(f"content[{i}]: unknown block type {t!r}")
            p.parent.mkdir(parents=True, exist_ok=True)
            doc.output(str(p))
        return f"PDF created: {vpath(world, p)} ({doc.pages_count} pages)"

    return [create_pdf, read_image, read_page_as_image, read_pdf_pages, search_pdf]


def _heading_style(style: str):
    from fpdf.fonts import FontFace

    return FontFace(emphasis=style or None)


def _latin1(s: str) -> str:
    """fpdf's core fonts are Latin-1: replace what they cannot draw."""
    return s.encode("latin-1", "replace").decode("latin-1")


def probe(world: World) -> str:
    return _pdf.probe(world)
