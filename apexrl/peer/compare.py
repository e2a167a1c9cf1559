"""Comparing what both runtimes returned and left on disk.

The peer is not deterministic in a few fields (its own README's finding: run twice on
fresh copies of one world it disagrees with itself on ctime/inode values, new
Message-IDs and "now" timestamps), so both replies pass through the same
normalisation before they are compared: those fields become placeholders. Files are
compared by content: office files (zip packages) member by member with their
volatile metadata parts left out, PDFs by their pages' sizes and words (every writer
stamps its own creation date, producer and file id), everything else byte for byte.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

# fields whose values differ from run to run on the same world
_VOLATILE = [
    (
        re.compile(
            r"(?i)\b(inode|device|ctime|st_ino|st_dev|st_ctime)(['\"]?\s*[:=]\s*['\"]?)[^,\s'\"\n}]+"
        ),
        r"\1\2<v>",
    ),
]
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_RFC2822 = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{1,2} \w{3} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}"
)
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
# new ids both runtimes make: Message-IDs as the stdlib makes them (time, pid, random),
# event ids (time of creation + 6 random characters), chat topic ids (11 random hex)
_MSGID = re.compile(r"<\d{10,}\.\d+\.\d+@([^>\s]+)>")
_EVENT_ID = re.compile(r"\b\d{8}_\d{6}_\d{6}_[a-z0-9]{6}\b")
_TOPIC_ID = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{11}(?![0-9A-Za-z])")
# "now" in the other shapes the servers write: an mbox From_ line, iCalendar's basic
# format, the chat server's long form
_ASCTIME = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\b")
_ICAL = re.compile(r"\b\d{8}T\d{6}Z?\b")
_LONG = re.compile(r"\b[A-Z][a-z]+day, [A-Z][a-z]+ \d{2}, \d{4} at \d{2}:\d{2}:\d{2} [AP]M UTC\b")
_SHAPES = [
    (_ASCTIME, lambda t: datetime.strptime(" ".join(t.split()), "%a %b %d %H:%M:%S %Y")),
    (_ICAL, lambda t: datetime.strptime(t.rstrip("Z"), "%Y%m%dT%H%M%S")),
    (_LONG, lambda t: datetime.strptime(t, "%A, %B %d, %Y at %I:%M:%S %p UTC")),
]


def _now_like(text: str, now: datetime, window_s: float) -> bool:
    """Whether a timestamp string falls within `window_s` of `now` (a "now" stamp)."""
    from email.utils import parsedate_to_datetime

    try:
        if "," in text:
            when = parsedate_to_datetime(text)
        else:
            when = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T"))
    except (ValueError, TypeError):
        return False
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return abs((when - now).total_seconds()) <= window_s


def normalise(text: str, *, now: datetime | None = None, window_s: float = 3600.0) -> str:
    """`text` with run-dependent values replaced by placeholders: timestamps within
    `window_s` of `now` (times the run itself made), ctime/inode values, Message-IDs
    UUIDs, and the new ids either runtime makes (Message-IDs, event and topic ids)."""
    now = now or datetime.now(UTC)
    text = _VOLATILE[0][0].sub(_VOLATILE[0][1], text)
    text = _ISO.sub(lambda m: "<now>" if _now_like(m.group(0), now, window_s) else m.group(0), text)
    text = _RFC2822.sub(
        lambda m: "<now>" if _now_like(m.group(0), now, window_s) else m.group(0), text
    )
    for rx, parse in _SHAPES:
        text = rx.sub(lambda m, parse=parse: _now_shape(m.group(0), parse, now, window_s), text)
    text = _UUID.sub("<uuid>", text)
    text = _MSGID.sub(r"<msgid@\1>", text)
    text = _EVENT_ID.sub("<event-id>", text)
    text = _TOPIC_ID.sub("<topic-id>", text)
    return text


def _now_shape(text: str, parse, now: datetime, window_s: float) -> str:
    try:
        when = parse(text).replace(tzinfo=UTC)
    except ValueError:
        return text
    return "<now>" if abs((when - now).total_seconds()) <= window_s else text


def file_content(path: Path) -> str:
    """What a file holds, as text to compare: cell values and formulas of a workbook,
    paragraphs and tables of a document, texts of a deck's slides; the bytes' hash of
    anything else. Two writers that save the same content compare equal."""
    ext = path.suffix.lower()
    reader = _READERS.get(ext)
    if reader is not None:
        try:
            return reader(path)
        except Exception as e:  # unreadable: compare the reader's complaint
            return f"<unreadable {type(e).__name__}>"
    if ext in _TEXT_DATA or path.name == "mbox":
        try:  # app data the servers write: compared as text, so "now" and new ids
            return path.read_text("utf-8")  # pass through `normalise`
        except (OSError, UnicodeDecodeError):
            pass
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


_TEXT_DATA = (".mbox", ".ics", ".json")


def _xlsx_content(path: Path) -> str:
    import openpyxl

    wb = openpyxl.load_workbook(path)
    lines = []
    for ws in wb.worksheets:
        lines.append(f"[{ws.title}]")
        for row in ws.iter_rows():
            for c in row:
                if c.value is not None:
                    lines.append(f"{c.coordinate}={c.value!r}")
    return "\n".join(lines)


def _docx_content(path: Path) -> str:
    import docx

    d = docx.Document(str(path))
    lines = [f"{p.style.name if p.style is not None else ''}|{p.text}" for p in d.paragraphs]
    for t in d.tables:
        lines += ["|".join(c.text for c in row.cells) for row in t.rows]
    return "\n".join(lines)


def _pptx_content(path: Path) -> str:
    from pptx import Presentation

    lines = []
    for i, slide in enumerate(Presentation(str(path)).slides):
        lines.append(f"[slide {i}]")
        for shape in slide.shapes:
            if shape.has_text_frame:
                lines.append(shape.text_frame.text)
    return "\n".join(lines)


def _pdf_content(path: Path) -> str:
    import pypdf

    lines = []
    for i, page in enumerate(pypdf.PdfReader(path).pages):
        box = page.mediabox
        lines.append(f"[page {i} {round(float(box.width))}x{round(float(box.height))}]")
        lines.append(" ".join((page.extract_text() or "").split()))
    return "\n".join(lines)


# The office formats compared by what they hold (file_content), by extension.
_READERS: dict[str, Callable[[Path], str]] = {
    ".xlsx": _xlsx_content,
    ".xlsm": _xlsx_content,
    ".docx": _docx_content,
    ".pptx": _pptx_content,
    ".pdf": _pdf_content,
}


def file_digest(path: Path) -> str:
    return hashlib.sha256(normalise(file_content(path)).encode()).hexdigest()[:16]


def tree_state(root: Path) -> dict[str, str]:
    """Every regular file under `root` (filesystem/ and .apps_data/) -> content digest."""
    out = {}
    for sub in ("filesystem", ".apps_data"):
        base = root / sub
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[p.relative_to(root).as_posix()] = file_digest(p)
    return out


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """Files created, changed or removed: path -> new digest, or 'removed'."""
    out = {p: d for p, d in after.items() if before.get(p) != d}
    out.update({p: "removed" for p in before if p not in after})
    return dict(sorted(out.items()))
