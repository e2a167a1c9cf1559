"""Files as the judge reads them: text, never raw bytes.

  .pdf              the text of each page (pypdf), "--- page N ---" between pages
  .xlsx/.xlsm       every non-empty cell per sheet as `A1: value`; a formula shows its
                    value (the cached one, or computed here when a library wrote the file
                    without values) followed by the formula; hidden sheets left out
                    (workbook_sheets: one text per sheet, as archipelago's items)
  .csv/.txt/.md/... the text (UTF-8, undecodable bytes replaced), for the suffixes
                    archipelago's grader reads as text (PEER_TEXT_SUFFIXES)
  .docx             paragraphs (tracked insertions accepted) and table rows, then the
                    tracked changes (each insertion and deletion, with its author) and
                    the comments (author, the text they are anchored to, the comment)
  .pptx             each slide's text frames (inside groups too) and tables,
                    "--- slide N ---" between slides
  anything else     no text (NO_TEXT), as archipelago shows it; with `sniff` (the
                    `sniff_text` grader option) the text when it decodes as such,
                    else "(binary file, N bytes)"

Files come from the sandbox: hostile. Readers never follow links (the caller gives
regular files), read at most MAX_READ_BYTES of a text file, stop after `limit`
characters, and turn any parser failure into a one-line "(unreadable ...)" note.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

MAX_READ_BYTES = 4_000_000  # of one text file
MAX_CELLS = 20_000  # per workbook read whole (the `workbook_whole` grader option)
TEXT_SUFFIXES = {".txt", ".md", ".csv", ".tsv", ".json", ".yaml", ".yml", ".xml", ".html"}
NO_TEXT = ""  # a file shown by its path only

# The suffixes archipelago's grader (1c3dcd4) decodes as text; anything else that none of
# its extractors reads (.mbox, .tsv, .bin, ...) reaches its judge as a path with no content.
PEER_TEXT_SUFFIXES = frozenset(
    """.txt .md .py .js .ts .tsx .jsx .html .css .scss .less .json .yaml .yml .xml .csv
    .sql .sh .bash .zsh .fish .ps1 .bat .cmd .php .rb .go .rs .java .c .cpp .h .hpp .cs
    .swift .kt .scala .clj .hs .elm .dart .vue .svelte .astro .r .m .mm .pl .perl .lua
    .nim .zig .odin .v .cr .ex .exs .erl .hrl .fs .fsx .ml .mli .ocaml .rkt .scm .ss
    .lisp .cl .asd .jl .proto .thrift .avro .graphql .gql .dockerfile .makefile .cmake
    .gradle .cfg .ini .conf .config .toml .lock .log .gitignore .gitattributes
    .editorconfig .ics .eml .ipynb""".split()  # noqa: SIM905 (one list, read as prose)
)


def file_text(path: Path, limit: int = 200_000, *, sniff: bool = True) -> str:
    """A file's readable text (at most about `limit` characters). sniff=False: only the
    suffixes archipelago reads give text, any other file NO_TEXT."""
    suffix = path.suffix.lower()
    reader: Callable[[Path, int], str] | None = {
        ".pdf": pdf_text,
        ".xlsx": workbook_text,
        ".xlsm": workbook_text,
        ".docx": docx_text,
        ".pptx": pptx_text,
    }.get(suffix)
    if reader is None:
        if not sniff and suffix not in PEER_TEXT_SUFFIXES:
            return NO_TEXT
        return plain_text(path, limit)
    try:
        return reader(path, limit)
    except Exception as e:  # a corrupt or hostile file: say so, grade the rest
        return f"(unreadable {suffix[1:]} file: {type(e).__name__}: {_short(e)})"


def plain_text(path: Path, limit: int) -> str:
    with open(path, "rb") as f:
        data = f.read(min(MAX_READ_BYTES, max(limit * 4, 1)))
    size = path.stat().st_size
    if path.suffix.lower() not in TEXT_SUFFIXES and b"\x00" in data[:8192]:
        return f"(binary file, {size} bytes)"
    return data.decode("utf-8", "replace")


def pdf_text(path: Path, limit: int) -> str:
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    parts: list[str] = []
    n = 0
    for i, page in enumerate(reader.pages, 1):
        text = (page.extract_text() or "").strip()
        parts.append(f"--- page {i} ---\n{text}")
        n += len(parts[-1])
        if n > limit:
            break
    return "\n".join(parts) if parts else "(a PDF with no pages)"


def workbook_text(path: Path, limit: int, *, hidden: bool = True) -> str:
    """Every sheet's cells in one text, at most MAX_CELLS cells in all (the
    `workbook_whole` grader option); hidden=False leaves hidden sheets out."""
    out: list[str] = []
    cells = 0
    for title, lines in _sheet_lines(path, limit, hidden):
        out.append(f"--- sheet {title} ---")
        for line in lines:
            cells += 1
            if cells > MAX_CELLS:
                out.append(f"[... more cells not shown (limit {MAX_CELLS} cells)]")
                return "\n".join(out)
            out.append(line)
    return "\n".join(out)


def workbook_sheets(path: Path, limit: int, *, hidden: bool = False) -> list[tuple[str, str]]:
    """(sheet title, its text) per sheet, as archipelago's grader presents a workbook: each
    sheet its own item, hidden and very hidden sheets left out (hidden=True shows them).
    Each sheet's text stops after about `limit` characters."""
    return [
        (title, "\n".join([f"--- sheet {title} ---", *lines]))
        for title, lines in _sheet_lines(path, limit, hidden)
    ]


def _sheet_lines(path: Path, limit: int, hidden: bool):
    """(title, cell lines) per sheet: `A1: value`, a formula's value then the formula."""
    import openpyxl

    from apexrl.worlds.formulas import Evaluator

    # Loaded from bytes: the path may be a pinned /proc/self/fd/N (no-follow evidence reads),
    # whose name openpyxl would refuse for lacking an .xlsx extension.
    data = Path(path).read_bytes()
    formulas = openpyxl.load_workbook(io.BytesIO(data), data_only=False, read_only=False)
    cached = openpyxl.load_workbook(io.BytesIO(data), data_only=True, read_only=False)
    ev = Evaluator(formulas)
    out: list[tuple[str, list[str]]] = []
    for ws in formulas.worksheets:
        if not hidden and ws.sheet_state in ("hidden", "veryHidden"):
            continue
        cws = cached[ws.title]
        lines: list[str] = []
        n = 0
        for row in ws.iter_rows():
            if n > limit:
                lines.append(f"[... more cells not shown (limit {limit:,} characters)]")
                break
            for c in row:
                if c.value is None:
                    continue
                raw = c.value
                if isinstance(raw, str) and raw.startswith("="):
                    value = cws[c.coordinate].value
                    if value is None:
                        try:
                            value = ev.value(ws.title, c.coordinate)
                        except Exception as e:
                            value = f"#ERROR ({type(e).__name__})"
                    line = f"{c.coordinate}: {_cell(value)}   (formula {raw})"
                else:
                    line = f"{c.coordinate}: {_cell(raw)}"
                lines.append(line)
                n += len(line) + 1
        out.append((ws.title, lines))
    return out


def docx_text(path: Path, limit: int) -> str:
    import docx

    d = docx.Document(str(path))
    out: list[str] = []
    n = 0
    for p in d.paragraphs:
        text = _accepted_text(p._p)
        if text.strip():
            out.append(text)
            n += len(text)
    for t, table in enumerate(d.tables, 1):
        out.append(f"--- table {t} ---")
        for row in table.rows:
            line = " | ".join(_accepted_text(c._tc).strip() for c in row.cells)
            out.append(line)
            n += len(line)
            if n > limit:
                break
    changes = _tracked_changes(d.element.body)
    if changes:
        out.append("--- tracked changes ---")
        out += changes
    notes = _comments(d)
    if notes:
        out.append("--- comments ---")
        out += notes
    return "\n".join(out)


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _accepted_text(el) -> str:
    """The text of an element with tracked changes accepted: insertions kept (w:t),
    deletions (w:delText) left out; paragraphs on their own lines."""
    parts: list[str] = []
    for node in el.iter(f"{_W}t", f"{_W}tab", f"{_W}br", f"{_W}p"):
        if node.tag == f"{_W}t":
            parts.append(node.text or "")
        elif node.tag == f"{_W}p":
            if node is not el and parts:
                parts.append("\n")
        else:
            parts.append("\t" if node.tag == f"{_W}tab" else "\n")
    return "".join(parts)


def _tracked_changes(body) -> list[str]:
    out = []
    for kind, tag, text_tag in (("inserted", "ins", "t"), ("deleted", "del", "delText")):
        for el in body.iter(f"{_W}{tag}"):
            text = "".join(t.text or "" for t in el.iter(f"{_W}{text_tag}")).strip()
            if text:
                who = el.get(f"{_W}author") or "unknown"
                out.append(f"[{kind} by {who}] {text}")
    return out


def _comments(d) -> list[str]:
    try:
        comments = list(d.comments)
    except Exception:  # python-docx without comment support, or a broken part
        return []
    anchors = _comment_anchors(d.element.body)
    out = []
    for c in comments:
        cid = c._element.get(f"{_W}id")
        anchor = anchors.get(cid or "", "")
        where = f' (on "{anchor}")' if anchor else ""
        out.append(f"[comment by {c.author or 'unknown'}]{where} {c.text}")
    return out


def _comment_anchors(body) -> dict[str, str]:
    """comment id -> the paragraph text its range starts in."""
    out: dict[str, str] = {}
    for p in body.iter(f"{_W}p"):
        for start in p.iter(f"{_W}commentRangeStart"):
            out.setdefault(start.get(f"{_W}id") or "", _accepted_text(p).strip())
    return out


def pptx_text(path: Path, limit: int) -> str:
    return "\n".join(text for _, text in pptx_slides(path, limit))


def pptx_slides(path: Path, limit: int) -> list[tuple[str, str]]:
    """(slide title, its text) per slide: text frames (inside groups too) and tables,
    headed "--- slide N ---"; slides after about `limit` characters are left out."""
    from pptx import Presentation

    prs = Presentation(str(path))
    out: list[tuple[str, str]] = []
    n = 0
    for i, slide in enumerate(prs.slides, 1):
        lines = [f"--- slide {i} ---"]
        for shape in _shapes(slide.shapes):
            if getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
                lines.append(shape.text_frame.text)
            if getattr(shape, "has_table", False):
                for row in shape.table.rows:
                    lines.append(" | ".join(c.text.strip() for c in row.cells))
        title = slide.shapes.title.text if slide.shapes.title is not None else ""
        out.append((title or f"Slide {i}", "\n".join(lines)))
        n += len(out[-1][1])
        if n > limit:
            break
    return out


def _shapes(shapes, depth: int = 0):
    """Every shape, groups opened (to a bounded depth: the file is hostile)."""
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6 and depth < 16:  # MSO_SHAPE_TYPE.GROUP
            yield from _shapes(shape.shapes, depth + 1)
        else:
            yield shape


def _cell(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _short(e: Exception, n: int = 200) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= n else s[:n] + "..."
