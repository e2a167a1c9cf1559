"""Files as the judge reads them: text, never raw bytes.

  .pdf              the text of each page (pypdf), "--- page N ---" between pages
  .xlsx/.xlsm       every non-empty cell per sheet as `A1: value`; a formula shows its
                    value (the cached one, or computed here when a library wrote the file
                    without values) followed by the formula
  .csv/.txt/.md/... the text (UTF-8, undecodable bytes replaced)
  .docx             paragraphs (tracked insertions accepted) and table rows, then the
                    tracked changes (each insertion and deletion, with its author) and
                    the comments (author, the text they are anchored to, the comment)
  .pptx             each slide's text frames (inside groups too) and tables,
                    "--- slide N ---" between slides
  anything else     "(binary file, N bytes)" unless it decodes as text

Files come from the sandbox: hostile. Readers never follow links (the caller gives
regular files), read at most MAX_READ_BYTES of a text file, stop after `limit`
characters, and turn any parser failure into a one-line "(unreadable ...)" note.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

MAX_READ_BYTES = 4_000_000  # of one text file
MAX_CELLS = 20_000  # per workbook
TEXT_SUFFIXES = {".txt", ".md", ".csv", ".tsv", ".json", ".yaml", ".yml", ".xml", ".html"}


def file_text(path: Path, limit: int = 200_000) -> str:
    """A file's readable text (at most about `limit` characters)."""
    suffix = path.suffix.lower()
    reader: Callable[[Path, int], str] | None = {
        ".pdf": pdf_text,
        ".xlsx": workbook_text,
        ".xlsm": workbook_text,
        ".docx": docx_text,
        ".pptx": pptx_text,
    }.get(suffix)
    if reader is None:
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


def workbook_text(path: Path, limit: int) -> str:
    import openpyxl

    from apexrl.worlds.formulas import Evaluator

    # Loaded from bytes: the path may be a pinned /proc/self/fd/N (no-follow evidence reads),
    # whose name openpyxl would refuse for lacking an .xlsx extension.
    data = Path(path).read_bytes()
    formulas = openpyxl.load_workbook(io.BytesIO(data), data_only=False, read_only=False)
    cached = openpyxl.load_workbook(io.BytesIO(data), data_only=True, read_only=False)
    ev = Evaluator(formulas)
    out: list[str] = []
    n = cells = 0
    for ws in formulas.worksheets:
        out.append(f"--- sheet {ws.title} ---")
        cws = cached[ws.title]
        for row in ws.iter_rows():
            for c in row:
                if c.value is None:
                    continue
                cells += 1
                if cells > MAX_CELLS or n > limit:
                    out.append(f"[... more cells not shown (limit {MAX_CELLS} cells)]")
                    return "\n".join(out)
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
                out.append(line)
                n += len(line) + 1
    return "\n".join(out)


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
    from pptx import Presentation

    prs = Presentation(str(path))
    out: list[str] = []
    n = 0
    for i, slide in enumerate(prs.slides, 1):
        out.append(f"--- slide {i} ---")
        for shape in _shapes(slide.shapes):
            if getattr(shape, "has_text_frame", False) and shape.text_frame.text.strip():
                out.append(shape.text_frame.text)
                n += len(out[-1])
            if getattr(shape, "has_table", False):
                for row in shape.table.rows:
                    out.append(" | ".join(c.text.strip() for c in row.cells))
                    n += len(out[-1])
        if n > limit:
            break
    return "\n".join(out)


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
