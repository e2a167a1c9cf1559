"""A small world with every kind of data the tool servers read, built from scratch
with the real libraries (python-docx, openpyxl, fpdf2, python-pptx, mailbox, icalendar)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import mailbox
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path

import pytest

OWNER = "ana.ruiz@acme.test"


def _mail(
    mid: str,
    frm: str,
    to: str,
    subject: str,
    body: str,
    when: datetime,
    reply_to: str | None = None,
):
    m = EmailMessage()
    m["Message-ID"] = mid
    m["From"] = frm
    m["To"] = to
    m["Subject"] = subject
    m["Date"] = email.utils.format_datetime(when)
    if reply_to:
        m["In-Reply-To"] = reply_to
        m["References"] = reply_to
    m.set_content(body)
    return m


def build_world(root: Path) -> Path:
    import docx
    import openpyxl
    from fpdf import FPDF
    from icalendar import Calendar, Event
    from pptx import Presentation

    fs = root / "filesystem"
    apps = root / ".apps_data"
    (fs / "Reports").mkdir(parents=True)
    (fs / "notes.txt").write_text("Quarterly close checklist\nowner: Ana\n")

    d = docx.Document()
    d.add_heading("Board memo", level=0)
    d.add_paragraph("Revenue grew 12% year on year.")
    d.add_paragraph("Headcount is flat.")
    d.save(fs / "Reports" / "memo.docx")

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Model"
    ws.append(["Segment", "FY24", "FY25"])
    ws.append(["Software", 100, 120])
    ws.append(["Services", 50, 55])
    ws["A4"] = "Total"
    ws["B4"] = "=SUM(B2:B3)"
    ws["C4"] = "=SUM(C2:C3)"
    ws["D4"] = "=C4/B4-1"
    wb.create_sheet("Notes")["A1"] = "draft"
    wb.save(fs / "Reports" / "model.xlsx")
    (fs / "Reports" / "people.csv").write_text("name,team\nAna,Finance\nBo,Legal\n")

    pdf = FPDF()
    for text in (
        "Master agreement between Acme and Globex.",
        "Termination requires 90 days notice.",
    ):
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.cell(0, 10, text)
    pdf.output(str(fs / "Reports" / "contract.pdf"))

    prs = Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Q3 review"
    s.placeholders[1].text_frame.text = "Revenue up"
    prs.save(fs / "Reports" / "deck.pptx")

    (apps / "mail").mkdir(parents=True)
    box = mailbox.mbox(str(apps / "mail" / "inbox.mbox"))
    t0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
    box.add(
        _mail(
            "<m1@acme.test>",
            "Bo Chen <bo.chen@acme.test>",
            f"Ana Ruiz <{OWNER}>",
            "Budget review",
            "Can you check the FY25 budget?",
            t0,
        )
    )
    box.add(
        _mail(
            "<m2@acme.test>",
            "Cy Park <cy.park@acme.test>",
            f"Ana Ruiz <{OWNER}>, bo.chen@acme.test",
            "Re: Budget review",
            "Numbers attached.",
            t0.replace(hour=10),
            reply_to="<m1@acme.test>",
        )
    )
    box.flush()
    box.close()

    grp = apps / "chat" / "Groups" / "space_fin"
    grp.mkdir(parents=True)
    (grp / "group_info.json").write_text(
        json.dumps(
            {
                "name": "Finance team",
                "members": [
                    {"name": "Ana Ruiz", "email": OWNER},
                    {"name": "Bo Chen", "email": "bo.chen@acme.test"},
                ],
            }
        )
    )
    (grp / "messages.json").write_text(
        json.dumps(
            {
                "messages": [
                    {
                        "message_id": "space_fin/001",
                        "creator": {"name": "Bo Chen", "email": "bo.chen@acme.test"},
                        "created_date": "2025-03-03T09:00:00Z",
                        "text": "Close starts Monday",
                        "topic_id": "t1",
                        "reactions": [],
                    },
                ]
            }
        )
    )
    for uid, name, addr in (("u1", "Ana Ruiz", OWNER), ("u2", "Bo Chen", "bo.chen@acme.test")):
        (apps / "chat" / "Users" / uid).mkdir(parents=True)
        (apps / "chat" / "Users" / uid / "user_info.json").write_text(
            json.dumps({"user": {"name": name, "email": addr}})
        )

    cal = Calendar()
    cal.add("prodid", "-//test//EN")
    cal.add("version", "2.0")
    ev = Event()
    ev.add("uid", "ev-1")
    ev.add("summary", "Budget sync")
    ev.add("dtstart", datetime(2025, 3, 4, 15, 0, tzinfo=UTC))
    ev.add("dtend", datetime(2025, 3, 4, 16, 0, tzinfo=UTC))
    cal.add_component(ev)
    (apps / "calendar").mkdir(parents=True)
    (apps / "calendar" / "work.ics").write_bytes(cal.to_ical())
    return root


@pytest.fixture(scope="session")
def world_template(tmp_path_factory) -> Path:
    return build_world(tmp_path_factory.mktemp("tmpl") / "acme")


@pytest.fixture
def world_dir(world_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the fixture world for one test."""
    dest = tmp_path / "acme"
    shutil.copytree(world_template, dest, symlinks=True)
    return dest


class Session:
    """Call tools through a real MCP client over streamable HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, name: str, **args):
        return asyncio.run(self._call(name, args))

    def json(self, name: str, **args):
        r = self.call(name, **args)
        assert not r.is_error, r.content[0].text
        return json.loads(r.content[0].text)

    def text(self, name: str, **args) -> str:
        r = self.call(name, **args)
        assert not r.is_error, r.content[0].text
        return r.content[0].text

    def error(self, name: str, **args) -> str:
        r = self.call(name, **args)
        assert r.is_error, r.content[0].text
        return r.content[0].text

    def tools(self) -> list[str]:
        return asyncio.run(self._tools())

    async def _call(self, name: str, args: dict):
        from mcp import Client

        async with asyncio.timeout(60), Client(self.url) as c:
            return await c.call_tool(name, args)

    async def _tools(self) -> list[str]:
        from mcp import Client

        async with asyncio.timeout(30), Client(self.url) as c:
            return [t.name for t in (await c.list_tools()).tools]


def _serve(root: Path) -> Iterator[tuple[Session, Path]]:
    """The fixture world's gateway (archipelago's tool names)."""
    from apexrl.worlds.gateway import build_gateway, serve_in_thread
    from apexrl.worlds.world import open_world

    w = open_world(root)
    with serve_in_thread(build_gateway(w), host="127.0.0.1", port=0) as r:
        yield Session(r.url), w.root


@pytest.fixture(scope="module")
def served(world_template: Path, tmp_path_factory) -> Iterator[tuple[Session, Path]]:
    """One gateway per test module over its own copy of the fixture world."""
    dest = tmp_path_factory.mktemp("served") / "acme"
    shutil.copytree(world_template, dest, symlinks=True)
    yield from _serve(dest)


@pytest.fixture
def fresh_served(world_dir: Path) -> Iterator[tuple[Session, Path]]:
    """A gateway over a fresh copy, for tests that check exactly what changed."""
    yield from _serve(world_dir)
