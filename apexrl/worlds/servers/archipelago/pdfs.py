"""archipelago `pdfs` server: read pages as text, search, render a page as an image,
extract an embedded image, create a PDF."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import pdf as _pdf
from apexrl.worlds.servers import Server
from apexrl.worlds.servers.archipelago import encoded, file_arg, image_content, path_problem, vpath
from apexrl.worlds.world import World

SERVER = Server("pdfs", app="pdf")

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


def _pdf_path_problem(world: World, file_path: str, escape: str) -> str | None:
    """What archipelago says is wrong with a PDF path argument (None: a PDF that exists)."""
    problem = path_problem(file_path, ".pdf")
    if problem:
        return problem
    try:
        p = world.fs_path(file_path)
    except ApexError:
        return escape
    if not p.is_file():
        return f"File not found: {file_path}"
    return None


def _text_lines(path) -> list[list[str]]:
    """Each page's text as the runs of text on it (a table's cells apart, a wrapped
    paragraph's lines apart), stripped, empty runs left out: the lines search reports."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        pages = []
        for page in doc:
            tp = page.get_textpage()
            runs = (tp.get_text_bounded(*tp.get_rect(i)) for i in range(tp.count_rects()))
            pages.append([r.strip() for r in runs if r.strip()])
        return pages
    finally:
        doc.close()


def _layout_text(page) -> str:
    """A page's text with its spatial layout kept (columns and tables stay aligned), as
    archipelago extracts it; plain extraction when layout mode fails."""
    try:
        return page.extract_text(extraction_mode="layout") or ""
    except Exception:
        return _page_text(page)


@SERVER.tool
def create_pdf(
    world: World,
    directory: Annotated[str, Field(description="Target directory, e.g. '/outputs'.")],
    file_name: Annotated[str, Field(description="File name ending with .pdf (no '/').")],
    content: Annotated[list[PdfContentBlock], Field(description="Content blocks, in order.")],
    metadata: PdfMetadataInput | None = None,
    page_size: Annotated[str | None, Field(description="'letter' or 'a4'.")] = "letter",
) -> str:
    """Create a PDF from content blocks: paragraph (text, bold, italic), heading (text,
    level 1-4), bullet_list / numbered_list (items), table (rows, header), page_break,
    spacer (height)."""
    from fpdf import FPDF

    failed = _create_problem(world, directory, file_name, content, page_size)
    if failed:
        return failed
    with world.lock:
        p = world.fs_path(f"{directory.rstrip('/')}/{file_name}")
        doc = FPDF(format=(page_size or "letter").lower())
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

        for b in content:
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
        p.parent.mkdir(parents=True, exist_ok=True)
        doc.output(str(p))
    return f"PDF {file_name} created at {vpath(world, p)}"


@SERVER.tool
def read_pdf_pages(
    world: World,
    file_path: PdfPath,
    pages: Annotated[
        list[int] | None, Field(description="1-based page numbers to read; omit for all.")
    ] = None,
) -> str:
    """Read the text of PDF pages (all pages, or the 1-based `pages` listed). Embedded
    images are listed with an annotation key (page{N}_img{M}) for read_image."""
    failed = _pdf_path_problem(world, file_path, f"Invalid path: {file_path}")
    if failed:
        return failed
    r = _pdf._reader(world.fs_path(file_path))
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


@SERVER.tool
def read_image(
    world: World,
    file_path: PdfPath,
    annotation: Annotated[str, Field(description="Key from read_pdf_pages, e.g. 'page1_img0'.")],
):
    """Return an image embedded in a PDF, by the annotation key read_pdf_pages listed."""
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
    return image_content(encoded(imgs[ino].image.convert("RGB"), "PNG"), "image/png")


@SERVER.tool
def read_page_as_image(
    world: World,
    file_path: PdfPath,
    page_number: Annotated[int, Field(description="Page to render, 1-based.")],
):
    """Render one PDF page as a JPEG image (144 DPI)."""
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise ApexError(
            "page rendering is not available here (pypdfium2 is not installed)",
            hint="read the page's text with read_pdf_pages",
        ) from None

    failed = _pdf_path_problem(world, file_path, f"Invalid path: {file_path}")
    if failed:
        return failed
    p = world.fs_path(file_path)
    try:
        doc = pdfium.PdfDocument(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {file_path} as a PDF: {e}") from e
    try:
        n = len(doc)
        if not 1 <= page_number <= n:
            return f"Page {page_number} is out of range (PDF has {n} page(s))"
        img = doc[page_number - 1].render(scale=RENDER_DPI / 72).to_pil().convert("RGB")
    finally:
        doc.close()
    return image_content(encoded(img, "JPEG", quality=85), "image/jpeg")


@SERVER.tool
def search_pdf(
    world: World,
    file_path: PdfPath,
    query: Annotated[str, Field(description="Text to find.")],
    case_sensitive: bool = False,
    whole_word: bool = False,
    max_results: int = 100,
    context_chars: int = 50,
) -> str:
    """Find every occurrence of `query` in a PDF: page, line and character span of
    each, with the text around it."""
    escape = "Path traversal detected: path cannot escape PDF root"
    failed = _pdf_path_problem(world, file_path, escape) or (
        None if query else "Search query is required"
    )
    if failed:
        return f"Search failed: {failed}"
    p = world.fs_path(file_path)
    max_results = max_results if max_results and max_results > 0 else 100
    context_chars = 50 if context_chars is None or context_chars < 0 else context_chars
    pat = re.escape(query)
    if whole_word:
        pat = rf"\b{pat}\b"
    rx = re.compile(pat, 0 if case_sensitive else re.IGNORECASE)
    found: list[str] = []
    for page_no, lines in enumerate(_text_lines(p), start=1):
        text = "\n".join(lines)
        start = 0  # where each line begins in the page's text
        for line_no, line in enumerate(lines, start=1):
            for m in rx.finditer(line):
                at = start + m.start()
                lo, hi = (
                    max(0, at - context_chars),
                    min(len(text), at + len(m.group(0)) + context_chars),
                )
                around = text[lo:hi].replace("\n", " ").strip()
                around = ("..." if lo > 0 else "") + around + ("..." if hi < len(text) else "")
                found.append(
                    f"{len(found) + 1}. [Page {page_no}, Line {line_no}, "
                    f"Chars {m.start()}-{m.end()}]: {around}"
                )
                if len(found) >= max_results:
                    break
            start += len(line) + 1
            if len(found) >= max_results:
                break
        if len(found) >= max_results:
            break
    if not found:
        return f'No matches found for "{query}"'
    return f'Found {len(found)} match(es) for "{query}":\n\n' + "\n".join(found)


_BLOCKS = ("paragraph", "heading", "bullet_list", "numbered_list", "table", "page_break", "spacer")


def _create_problem(
    world: World, directory: str, file_name: str, content: list, page_size: str
) -> str | None:
    """What archipelago says is wrong with create_pdf's arguments (None: nothing)."""
    if not directory or not directory.startswith("/"):
        return "Directory must start with /"
    if not file_name or not file_name.lower().endswith(".pdf"):
        return "File name must end with .pdf"
    if "/" in file_name:
        return "File name cannot contain /"
    if not content:
        return "Content must be a non-empty list"
    for b in content:
        if b.type not in _BLOCKS:
            return f"Unknown block type: {b.type}"
    if (page_size or "letter").lower() not in ("letter", "a4"):
        return f"Invalid page size: {page_size}. Must be 'letter' or 'a4'"
    try:
        world.fs_path(f"{directory.rstrip('/')}/{file_name}")
    except ApexError:
        return "Path traversal detected: directory cannot escape PDF root"
    return None


def _heading_style(style: str):
    from fpdf.fonts import FontFace

    return FontFace(emphasis=style or None)


def _latin1(s: str) -> str:
    """fpdf's core fonts are Latin-1: replace what they cannot draw."""
    return s.encode("latin-1", "replace").decode("latin-1")


def probe(world: World) -> str:
    return _pdf.probe(world)
