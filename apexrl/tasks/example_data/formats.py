"""Reproducible writers for the document formats a world holds.

Every writer returns bytes that depend only on its arguments: office files
(zips with timestamps inside) are rewritten with fixed entry dates and fixed
core-property dates, PDFs get a fixed creation date, mbox "From " lines and
calendar DTSTAMPs are explicit.
"""

from __future__ import annotations

import io
import json
import mailbox
import re
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
FIXED_DOC_TIME = datetime(2025, 1, 6, 9, 0, 0)  # naive: the OOXML core-property writers want it
FIXED_DOC_TIME_UTC = FIXED_DOC_TIME.replace(tzinfo=UTC)
_FILE_MODE = 0o644
_DIR_MODE = 0o755

_CORE_DATE = re.compile(
    rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:(?:created|modified)>)"
)


# --- zips ---------------------------------------------------------------------------


def _file_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
    info.create_system = 3  # unix, whatever the host
    info.external_attr = (0o100000 | _FILE_MODE) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _dir_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name.rstrip("/") + "/", date_time=ZIP_EPOCH)
    info.create_system = 3
    info.external_attr = ((0o040000 | _DIR_MODE) << 16) | 0x10
    info.compress_type = zipfile.ZIP_STORED
    return info


def zip_bytes(files: Mapping[str, bytes], *, with_dirs: bool = True) -> bytes:
    """A zip of `files` (posix relative paths -> bytes): entries sorted, fixed dates
    and permissions, directory entries for every parent folder."""
    names = sorted(files)
    dirs: set[str] = set()
    if with_dirs:
        for name in names:
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]) + "/")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(list(dirs) + names):
            if name in dirs:
                zf.writestr(_dir_info(name), b"")
            else:
                zf.writestr(_file_info(name), files[name], compresslevel=6)
    return buf.getvalue()


def normalize_ooxml(data: bytes) -> bytes:
    """Rewrite an OOXML package (docx/xlsx/pptx) so its bytes are reproducible:
    entry order kept (``[Content_Types].xml`` first), fixed entry dates and modes,
    core-property created/modified set to FIXED_DOC_TIME."""
    stamp = FIXED_DOC_TIME.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                body = _CORE_DATE.sub(lambda m: m.group(1) + stamp + m.group(3), body)
            dst.writestr(_file_info(info.filename), body, compresslevel=6)
    return out.getvalue()


# --- office documents ---------------------------------------------------------------

Block = tuple[str, Any]
"""A document block: ("title"|"h1"|"h2"|"p"|"bullet", text) or ("table", rows)."""


def _stamp(props: Any, title: str, author: str) -> None:
    """The core properties of a .docx or .pptx (python-docx and python-pptx name them
    alike), dated FIXED_DOC_TIME so the same seed gives the same bytes."""
    props.title = title
    props.author = author
    props.last_modified_by = author
    props.created = FIXED_DOC_TIME
    props.modified = FIXED_DOC_TIME
    props.revision = 1


def _saved(document: Any) -> bytes:
    """An office document (python-docx, openpyxl or python-pptx) saved to normalized bytes."""
    buf = io.BytesIO()
    document.save(buf)
    return normalize_ooxml(buf.getvalue())


def docx_bytes(blocks: Sequence[Block], *, title: str, author: str) -> bytes:
    import docx

    doc = docx.Document()
    _stamp(doc.core_properties, title, author)
    for kind, content in blocks:
        if kind == "title":
            doc.add_heading(content, level=0)
        elif kind == "h1":
            doc.add_heading(content, level=1)
        elif kind == "h2":
            doc.add_heading(content, level=2)
        elif kind == "p":
            doc.add_paragraph(content)
        elif kind == "bullet":
            doc.add_paragraph(content, style="List Bullet")
        elif kind == "table":
            rows = [[str(c) for c in row] for row in content]
            table = doc.add_table(rows=len(rows), cols=len(rows[0]))
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, text in enumerate(row):
                    table.cell(r, c).text = text
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown docx block kind {kind!r}")
    return _saved(doc)


@dataclass
class Sheet:
    """One worksheet: rows of values; a str starting with '=' is a formula."""

    name: str
    rows: list[list[Any]]
    widths: dict[str, float] = field(default_factory=dict)
    number_format: dict[str, str] = field(default_factory=dict)  # column letter -> format


def xlsx_bytes(sheets: Sequence[Sheet], *, title: str, author: str) -> bytes:
    import openpyxl
    from openpyxl.styles import Font

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    wb.properties.title = title
    wb.properties.creator = author
    wb.properties.lastModifiedBy = author
    wb.properties.created = FIXED_DOC_TIME
    wb.properties.modified = FIXED_DOC_TIME
    bold = Font(bold=True)
    for spec in sheets:
        ws = wb.create_sheet(spec.name)
        for row in spec.rows:
            ws.append(row)
        for cell in ws[1]:
            cell.font = bold
        for col, width in spec.widths.items():
            ws.column_dimensions[col].width = width
        for col, fmt in spec.number_format.items():
            for cell in ws[col][1:]:
                value = cell.value
                numeric = value is not None and not isinstance(value, str)
                if numeric or (isinstance(value, str) and value.startswith("=")):
                    cell.number_format = fmt
    return _saved(wb)


@dataclass
class Slide:
    title: str
    bullets: list[str] = field(default_factory=list)
    table: list[list[str]] | None = None
    subtitle: str | None = None  # makes a title slide


def pptx_bytes(slides: Sequence[Slide], *, title: str, author: str) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches, Pt

    prs = Presentation()
    _stamp(prs.core_properties, title, author)
    for spec in slides:
        if spec.subtitle is not None:
            slide = prs.slides.add_slide(prs.slide_layouts[0])
            slide.shapes.title.text = spec.title
            slide.placeholders[1].text = spec.subtitle
            continue
        if spec.table is not None:
            slide = prs.slides.add_slide(prs.slide_layouts[5])  # title only
            slide.shapes.title.text = spec.title
            rows, cols = len(spec.table), len(spec.table[0])
            shape = slide.shapes.add_table(
                rows, cols, Inches(0.6), Inches(1.6), Inches(8.8), Inches(0.4 * rows)
            )
            for r, row in enumerate(spec.table):
                for c, text in enumerate(row):
                    cell = shape.table.cell(r, c)
                    cell.text = str(text)
                    for para in cell.text_frame.paragraphs:
                        for run in para.runs:
                            run.font.size = Pt(14)
            if spec.bullets:
                box = slide.shapes.add_textbox(
                    Inches(0.6), Inches(1.8 + 0.4 * rows), Inches(8.8), Inches(1.2)
                )
                box.text_frame.text = spec.bullets[0]
                for line in spec.bullets[1:]:
                    box.text_frame.add_paragraph().text = line
            continue
        slide = prs.slides.add_slide(prs.slide_layouts[1])  # title and content
        slide.shapes.title.text = spec.title
        body = slide.placeholders[1].text_frame
        body.text = spec.bullets[0] if spec.bullets else ""
        for line in spec.bullets[1:]:
            body.add_paragraph().text = line
    return _saved(prs)


_PDF_SUBST = str.maketrans(
    {"\u2014": "-", "\u2013": "-", "\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'}
)


def _latin1(text: str) -> str:
    return text.translate(_PDF_SUBST).encode("latin-1", "replace").decode("latin-1")


def pdf_bytes(blocks: Sequence[Block], *, title: str, author: str) -> bytes:
    """A text PDF (core Helvetica font, so pypdf extracts the text back)."""
    from fpdf import FPDF
    from fpdf.enums import XPos, YPos

    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DOC_TIME_UTC)
    pdf.set_title(_latin1(title))
    pdf.set_author(_latin1(author))
    pdf.set_auto_page_break(auto=True, margin=15)
    pdf.add_page()
    nl = {"new_x": XPos.LMARGIN, "new_y": YPos.NEXT}
    for kind, content in blocks:
        if kind in ("title", "h1", "h2"):
            size = {"title": 18, "h1": 14, "h2": 12}[kind]
            pdf.set_font("Helvetica", "B", size)
            pdf.multi_cell(0, size * 0.5, _latin1(content), **nl)
            pdf.ln(2)
        elif kind in ("p", "bullet"):
            pdf.set_font("Helvetica", "", 11)
            text = ("- " + content) if kind == "bullet" else content
            pdf.multi_cell(0, 5.5, _latin1(text), **nl)
            pdf.ln(2)
        elif kind == "table":
            pdf.set_font("Helvetica", "", 10)
            with pdf.table() as table:
                for row in content:
                    cells = table.row()
                    for value in row:
                        cells.cell(_latin1(str(value)))
            pdf.ln(3)
        elif kind == "pagebreak":
            pdf.add_page()
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown pdf block kind {kind!r}")
    return bytes(pdf.output())


def csv_bytes(rows: Iterable[Sequence[Any]]) -> bytes:
    import csv

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in rows:
        writer.writerow(row)
    return buf.getvalue().encode("utf-8")


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


# --- mail, calendar, chat -----------------------------------------------------------


@dataclass
class Mail:
    message_id: str  # without angle brackets
    sender: tuple[str, str]  # (name, email)
    to: list[tuple[str, str]]
    subject: str
    date: datetime  # aware
    body: str
    in_reply_to: str | None = None
    references: list[str] = field(default_factory=list)
    cc: list[tuple[str, str]] = field(default_factory=list)


def _addr(pair: tuple[str, str]) -> str:
    name, email = pair
    return f"{name} <{email}>"


def mbox_bytes(messages: Sequence[Mail]) -> bytes:
    """An mbox file (written by the stdlib `mailbox` module) holding `messages`."""
    with tempfile.TemporaryDirectory(prefix="apexrl-mbox-") as tmp:
        path = Path(tmp) / "inbox.mbox"
        box = mailbox.mbox(path, create=True)
        box.lock()
        try:
            for m in messages:
                msg = EmailMessage()
                msg["Message-ID"] = f"<{m.message_id}>"
                msg["From"] = _addr(m.sender)
                msg["To"] = ", ".join(_addr(a) for a in m.to)
                if m.cc:
                    msg["Cc"] = ", ".join(_addr(a) for a in m.cc)
                msg["Subject"] = m.subject
                msg["Date"] = format_datetime(m.date)
                if m.in_reply_to:
                    msg["In-Reply-To"] = f"<{m.in_reply_to}>"
                if m.references:
                    msg["References"] = " ".join(f"<{r}>" for r in m.references)
                # Plain 7bit for ASCII bodies so the raw mbox stays greppable.
                msg.set_content(m.body, cte="7bit" if m.body.isascii() else "quoted-printable")
                entry = mailbox.mboxMessage(msg)
                entry.set_from(m.sender[1], m.date.astimezone(UTC).timetuple())
                box.add(entry)
            box.flush()
        finally:
            box.unlock()
            box.close()
        return path.read_bytes()


@dataclass
class Event:
    uid: str
    summary: str
    start: datetime  # aware
    end: datetime
    location: str
    attendees: list[tuple[str, str]]
    organizer: tuple[str, str] | None = None
    description: str = ""


def ics_bytes(events: Sequence[Event], *, calendar_name: str) -> bytes:
    from icalendar import Calendar, vCalAddress, vText
    from icalendar import Event as VEvent

    cal = Calendar()
    cal.add("prodid", "-//apexrl//example world//EN")
    cal.add("version", "2.0")
    cal.add("x-wr-calname", calendar_name)
    for e in events:
        ev = VEvent()
        ev.add("uid", e.uid)
        ev.add("dtstamp", FIXED_DOC_TIME_UTC)
        ev.add("summary", e.summary)
        ev.add("dtstart", e.start)
        ev.add("dtend", e.end)
        ev.add("location", e.location)
        if e.description:
            ev.add("description", e.description)
        if e.organizer:
            org = vCalAddress(f"mailto:{e.organizer[1]}")
            org.params["cn"] = vText(e.organizer[0])
            ev.add("organizer", org)
        for name, email in e.attendees:
            att = vCalAddress(f"mailto:{email}")
            att.params["cn"] = vText(name)
            att.params["role"] = vText("REQ-PARTICIPANT")
            ev.add("attendee", att, encode=0)
        cal.add_component(ev)
    return cal.to_ical()


@dataclass
class ChatMessage:
    message_id: str
    creator: tuple[str, str]
    created: datetime  # aware
    text: str
    topic_id: str
    reactions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ChatSpace:
    space_id: str
    name: str
    members: list[tuple[str, str]]
    messages: list[ChatMessage]


def reaction(emoji: str, *reactor_emails: str) -> dict[str, Any]:
    """A chat reaction in the export's shape."""
    return {"emoji": {"unicode": emoji}, "reactor_emails": list(reactor_emails)}


def _person(pair: tuple[str, str]) -> dict[str, str]:
    return {"name": pair[0], "email": pair[1]}


def chat_files(
    spaces: Sequence[ChatSpace], users: Mapping[str, tuple[str, str]]
) -> dict[str, bytes]:
    """The chat export tree under `.apps_data/chat/` (paths relative to it)."""
    out: dict[str, bytes] = {}
    for space in spaces:
        base = f"Groups/{space.space_id}"
        out[f"{base}/group_info.json"] = json_bytes(
            {"name": space.name, "members": [_person(m) for m in space.members]}
        )
        out[f"{base}/messages.json"] = json_bytes(
            {
                "messages": [
                    {
                        "message_id": m.message_id,
                        "creator": _person(m.creator),
                        "created_date": m.created.astimezone(UTC)
                        .isoformat()
                        .replace("+00:00", "Z"),
                        "text": m.text,
                        "topic_id": m.topic_id,
                        "reactions": m.reactions,
                    }
                    for m in space.messages
                ]
            }
        )
    for user_id, person in users.items():
        out[f"Users/{user_id}/user_info.json"] = json_bytes({"user": _person(person)})
    return out
