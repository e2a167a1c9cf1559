"""The grader parity matrix: fixed trials (kept grading inputs) graded by apexrl's grader
and by archipelago's own runner, both judged by the scripted engine's marker judge
(tests.scripted_engine.marker_judge): a criterion is met exactly when its marker
reached the judge's prompt. So each verdict says which evidence each grader showed.

Rows: a final answer only; files created and edited (an xlsx past 20k characters, a
docx with tracked changes and comments, a pptx, a pdf); expected_file_type filtering
and labels outside the known set; a missing required file; a max_steps ending whose
last message is a tool result; several criteria at once. Then the shapes nobody tuned
for (issue 43): a workbook with a hidden sheet; a deleted file; a mail appended to an
.mbox beside a created .ics; a first tab of 21,005 cells; a 600 KB text file (selection,
then its middle cut to the judge's budget); a file under a dot-named folder; an app
database judged through the tool loop. Every file is written here with the format's
own library (openpyxl, python-docx, python-pptx, fpdf2, mailbox, icalendar, sqlite3).

`python -m tests.grading.parity_matrix` prints the per-row table (for the notes).
"""

from __future__ import annotations

import copy
import io
from dataclasses import dataclass, field

from apexrl.grading.inputs import GradingInputs
from apexrl.grading.models import FileChangeSummary

SHEETS = "Spreadsheets (.xlsx, .xls, .xlsm, .ods)"
TASK = "Prepare the deliverable the partner asked for and report the key figure."


@dataclass
class Row:
    name: str
    criteria: list[dict]
    inputs: GradingInputs
    before: dict[str, bytes] = field(default_factory=dict)
    after: dict[str, bytes] = field(default_factory=dict)
    markers: dict[str, str] = field(default_factory=dict)  # criterion tag -> marker


def crit(tag: str, text: str, kind: str | None = None) -> dict:
    c = {"verifier_id": tag, "criteria": f"{text} [[{tag}]]"}
    if kind:
        c["expected_file_type"] = kind
    return c


def inputs(answer: str, messages=None, created=(), modified=()) -> GradingInputs:
    return GradingInputs(
        task_id="parity",
        task_prompt=TASK,
        answer=answer,
        messages=messages,
        changes=FileChangeSummary(created=sorted(created), modified=sorted(modified)),
    )


# --- files -------------------------------------------------------------------------------


def xlsx_large(marker: str) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Data"
    for i in range(1, 1201):  # ~30k characters of cells before the table that matters
        ws.cell(i, 1, f"Line item {i:04d}")
        ws.cell(i, 2, i * 17.5)
    sens = wb.create_sheet("Sensitivity")
    sens["A1"], sens["B1"] = "WACC +1pp", marker
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def xlsx_small(text: str) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active["A1"] = text
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def docx_plain(text: str) -> bytes:
    import docx

    d = docx.Document()
    d.add_paragraph(text)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def docx_redlined(base: str, inserted: str, deleted: str, comment: str) -> bytes:
    """A memo with one tracked insertion, one tracked deletion and one comment."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    d = docx.Document()
    p = d.add_paragraph(base)
    w = nsdecls("w")
    meta = 'w:author="Reviewer" w:date="2026-01-05T10:00:00Z"'
    p._p.append(
        parse_xml(f'<w:ins {w} w:id="101" {meta}><w:r><w:t> {inserted}</w:t></w:r></w:ins>')
    )
    p._p.append(
        parse_xml(
            f'<w:del {w} w:id="102" {meta}><w:r><w:delText> {deleted}</w:delText></w:r></w:del>'
        )
    )
    q = d.add_paragraph("Section 14.2 applies to all claims.")
    d.add_comment(q.runs, text=comment, author="Partner", initials="P")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def pptx_deck(grouped: str, table: str) -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Market sizing"
    group = slide.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1))
    box.text_frame.text = f"Callout: {grouped}"
    slide2 = prs.slides.add_slide(prs.slide_layouts[5])
    slide2.shapes.title.text = "Sizes by region"
    tbl = slide2.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(1)).table
    tbl.cell(0, 0).text, tbl.cell(0, 1).text = "Region", "Size"
    tbl.cell(1, 0).text, tbl.cell(1, 1).text = "West", table
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def pdf_pages(*pages: str) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    for text in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.cell(0, 10, text)
    return bytes(pdf.output())


def xlsx_hidden(visible: str, hidden: str, very_hidden: str) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active.title = "Summary"
    wb.active["A1"] = visible
    calc = wb.create_sheet("Calc")
    calc["A1"], calc.sheet_state = hidden, "hidden"
    vault = wb.create_sheet("Vault")
    vault["A1"], vault.sheet_state = very_hidden, "veryHidden"
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def xlsx_wide_first_tab(marker: str) -> bytes:
    """A first tab of 21,005 cells (4,201 rows x 5), the figure on the second tab."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Ledger"
    for r in range(1, 4202):
        for c in range(1, 6):
            ws.cell(r, c, r * 10 + c)
    wb.create_sheet("Outcome")["A1"] = marker
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def mbox_with(*bodies: str) -> bytes:
    import mailbox
    import tempfile
    from email.message import EmailMessage
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        box = mailbox.mbox(str(Path(tmp, "sent.mbox")))
        for i, body in enumerate(bodies):
            m = EmailMessage()
            m["From"], m["To"] = "analyst@example.com", "partner@example.com"
            m["Subject"], m["Message-ID"] = f"Update {i}", f"<m{i}@example.com>"
            m.set_content(body)
            box.add(m)
        box.flush()
        box.close()
        return Path(tmp, "sent.mbox").read_bytes()


def ics_event(summary: str) -> bytes:
    from datetime import datetime

    import icalendar

    cal = icalendar.Calendar()
    cal.add("prodid", "-//apexrl tests//EN")
    cal.add("version", "2.0")
    ev = icalendar.Event()
    ev.add("uid", "review-1@example.com")
    ev.add("summary", summary)
    ev.add("dtstart", datetime(2026, 3, 2, 10, 0))
    ev.add("dtend", datetime(2026, 3, 2, 11, 0))
    ev.add("dtstamp", datetime(2026, 3, 1, 9, 0))
    cal.add_component(ev)
    return cal.to_ical()


def big_text(head: str, middle: str, tail: str, size: int = 600_000) -> bytes:
    """A ~600 KB log: `head` on its first line, `middle` half way, `tail` on its last."""
    line = "2026-03-02 10:00:00 INFO reconciliation step completed without exceptions\n"
    n = size // len(line)
    lines = [line] * n
    lines[0], lines[n // 2], lines[-1] = f"{head}\n", f"{middle}\n", f"{tail}\n"
    return "".join(lines).encode()


def sqlite_db(rows: list[tuple[int, str, str]]) -> bytes:
    import sqlite3
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "crm.db")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE deals (id INTEGER PRIMARY KEY, name TEXT, stage TEXT)")
        con.executemany("INSERT INTO deals VALUES (?, ?, ?)", rows)
        con.commit()
        con.close()
        return path.read_bytes()


# --- the matrix --------------------------------------------------------------------------


def matrix() -> list[Row]:
    rows: list[Row] = []

    rows.append(
        Row(
            "final answer only",
            [crit("c-ans", "The answer states the revised EBITDA figure")],
            inputs("Revised EBITDA is MK-ANS-7Q (USD m)."),
            markers={"c-ans": "MK-ANS-7Q"},
        )
    )

    book = "filesystem/outputs/model.xlsx"
    rows.append(
        Row(
            "xlsx created, table past 20k characters",
            [crit("c-xlsx", "The workbook includes a WACC sensitivity table", SHEETS)],
            inputs("I built the model.", created=[book]),
            after={book: xlsx_large("MK-XLSX-3F")},
            markers={"c-xlsx": "MK-XLSX-3F"},
        )
    )

    memo = "filesystem/memo.docx"
    rows.append(
        Row(
            "docx edited: tracked changes and a comment",
            [
                crit("c-ins", "The memo adds the carve-out language"),
                crit("c-del", "The memo strikes the old cap language"),
                crit("c-com", "The memo flags Section 14.2 for the partner"),
            ],
            inputs("I redlined the memo.", modified=[memo]),
            before={memo: docx_plain("The liability cap is USD 1 million.")},
            after={
                memo: docx_redlined(
                    "The liability cap is USD 1 million.", "MK-INS-5K", "MK-DEL-8R", "MK-COM-2W"
                )
            },
            markers={"c-ins": "MK-INS-5K", "c-del": "MK-DEL-8R", "c-com": "MK-COM-2W"},
        )
    )

    deck = "filesystem/outputs/deck.pptx"
    rows.append(
        Row(
            "pptx created: a grouped callout and a table",
            [
                crit("c-pgrp", "The deck calls out the key risk"),
                crit("c-ptbl", "The deck tabulates the West region's size"),
            ],
            inputs("Deck done.", created=[deck]),
            after={deck: pptx_deck("MK-GRP-4D", "MK-TBL-6H")},
            markers={"c-pgrp": "MK-GRP-4D", "c-ptbl": "MK-TBL-6H"},
        )
    )

    pdf = "filesystem/outputs/summary.pdf"
    rows.append(
        Row(
            "pdf created: the figure on page 2",
            [crit("c-pdf", "The PDF summary gives the sensitivity result")],
            inputs("Summary attached.", created=[pdf]),
            after={pdf: pdf_pages("Summary", "Result: MK-PDF-9T")},
            markers={"c-pdf": "MK-PDF-9T"},
        )
    )

    notes, figs = "filesystem/outputs/notes.docx", "filesystem/outputs/figures.xlsx"
    rows.append(
        Row(
            "expected_file_type filtering and labels",
            [
                crit("c-ft-sheet", "The spreadsheet states the base case", SHEETS),
                crit(
                    "c-ft-answer", "The answer names the base case", "Final Answer Only (No Files)"
                ),
                crit(
                    "c-ft-old", "The document names the base case", "Word Documents (.docx, .doc)"
                ),
                crit("c-ft-any", "The output shows the upside", "Any File Type"),
            ],
            inputs("Base case attached.", created=[notes, figs]),
            after={
                notes: docx_plain("Base case MK-FT-DOC1; downside MK-FT-DOC2"),
                figs: xlsx_small("Old-label check MK-FT-XLS1; upside MK-FT-XLS2"),
            },
            markers={
                "c-ft-sheet": "MK-FT-DOC1",  # only in the docx: filtered out for a sheet
                "c-ft-answer": "MK-FT-DOC1",  # files are not part of an answer-only criterion
                "c-ft-old": "MK-FT-XLS1",  # the older spelling filters as the current one
                "c-ft-any": "MK-FT-XLS2",
            },
        )
    )

    txt = "filesystem/outputs/notes.txt"
    rows.append(
        Row(
            "missing required file",
            [crit("c-miss", "The deck shows MK-MISS-1B", "Presentations (.pptx, .ppt, .odp)")],
            inputs("Here is the deck: MK-MISS-1B", created=[txt]),
            after={txt: b"MK-MISS-1B\n"},
            markers={"c-miss": "MK-MISS-1B"},
        )
    )

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "filesystem_read_text_file", "arguments": '{"path": "/x.txt"}'},
    }
    rows.append(
        Row(
            "max_steps ending: the last message is a tool result",
            [crit("c-tool", "The agent reports the notice period")],
            inputs(
                "Let me read the agreement.",
                messages=[
                    {"role": "system", "content": "You are an analyst."},
                    {"role": "user", "content": TASK},
                    {
                        "role": "assistant",
                        "content": "Let me read the agreement.",
                        "tool_calls": [call],
                    },
                    {
                        "role": "tool",
                        "tool_call_id": "call_1",
                        "content": "Notice: MK-TOOL-2P days",
                    },
                ],
            ),
            markers={"c-tool": "MK-TOOL-2P"},
        )
    )

    csv = "filesystem/outputs/market.csv"
    rows.append(
        Row(
            "multi-criterion",
            [
                crit("c-m1", "The answer states the total"),
                crit("c-m2", "The CSV lists the West region first"),
                crit("c-m3", "The answer cites the source"),
            ],
            inputs("Total: MK-M1-3C", created=[csv]),
            after={csv: b"region,size\nMK-M2-7V,31\n"},
            markers={"c-m1": "MK-M1-3C", "c-m2": "MK-M2-7V", "c-m3": "MK-M3-NEVER"},
        )
    )
    rows += untuned_rows()
    return rows


def untuned_rows() -> list[Row]:
    """The shapes of issue 43: where the graders differed on held-out cases."""
    rows: list[Row] = []
    book = "filesystem/outputs/plan.xlsx"
    rows.append(
        Row(
            "xlsx created with a hidden and a very hidden sheet",
            [
                crit("c-hs-vis", "The plan summarises the budget", SHEETS),
                crit("c-hs-hid", "The plan works out the allocation", SHEETS),
                crit("c-hs-vhid", "The plan keeps the reserve figure", SHEETS),
            ],
            inputs("Plan attached.", created=[book]),
            after={book: xlsx_hidden("MK-HS-VIS1", "MK-HS-HID2", "MK-HS-VHD3")},
            markers={"c-hs-vis": "MK-HS-VIS1", "c-hs-hid": "MK-HS-HID2", "c-hs-vhid": "MK-HS-VHD3"},
        )
    )
    gone, deck = "filesystem/drafts/old_terms.txt", "filesystem/drafts/old_deck.pptx"
    rows.append(
        Row(
            "files deleted: a text file and a deck",
            [
                crit("c-rm-txt", "The agent removed the superseded terms"),
                crit("c-rm-deck", "The agent removed the old deck's callout"),
            ],
            inputs("Cleaned up the drafts.", messages=None),
            before={gone: b"Superseded terms MK-DEL-TXT4\n", deck: pptx_deck("MK-DEL-PPT5", "9")},
            markers={"c-rm-txt": "MK-DEL-TXT4", "c-rm-deck": "MK-DEL-PPT5"},
        )
    )
    rows[-1].inputs.changes = FileChangeSummary(deleted=sorted([gone, deck]))
    box, ics = ".apps_data/mail/sent.mbox", "filesystem/outputs/review.ics"
    rows.append(
        Row(
            "a mail appended to an .mbox, an .ics created",
            [
                crit("c-mbox", "The agent mailed the partner the figure"),
                crit("c-ics", "The agent scheduled the review"),
            ],
            inputs("Mailed and scheduled.", created=[ics], modified=[box]),
            before={box: mbox_with("Kick-off notes.")},
            after={
                box: mbox_with("Kick-off notes.", "The figure is MK-MBOX-6N."),
                ics: ics_event("Review MK-ICS-7J"),
            },
            markers={"c-mbox": "MK-MBOX-6N", "c-ics": "MK-ICS-7J"},
        )
    )
    wide = "filesystem/outputs/ledger.xlsx"
    rows.append(
        Row(
            "xlsx created: a first tab of 21,005 cells",
            [crit("c-wide", "The workbook states the outcome", SHEETS)],
            inputs("Ledger built.", created=[wide]),
            after={wide: xlsx_wide_first_tab("MK-WIDE-8Q")},
            markers={"c-wide": "MK-WIDE-8Q"},
        )
    )
    log = "filesystem/outputs/recon.txt"
    rows.append(
        Row(
            "a 600 KB text file: selection, then the middle cut",
            [
                crit("c-big-head", "The log opens with the run id"),
                crit("c-big-mid", "The log records the half-way checkpoint"),
                crit("c-big-tail", "The log closes with the final balance"),
            ],
            inputs("Reconciliation log written.", created=[log]),
            after={log: big_text("MK-BIG-HD9", "MK-BIG-MD1", "MK-BIG-TL2")},
            markers={
                "c-big-head": "MK-BIG-HD9",
                "c-big-mid": "MK-BIG-MD1",
                "c-big-tail": "MK-BIG-TL2",
            },
        )
    )
    dot, pyc = "filesystem/.cache/scratch.txt", "filesystem/tools/__pycache__/calc.cpython-313.pyc"
    rows.append(
        Row(
            "files under a dot folder and __pycache__",
            [
                crit("c-dot", "The agent noted the scratch figure"),
                crit("c-pyc", "The agent compiled the tool"),
            ],
            inputs("Done.", created=[dot, pyc]),
            after={dot: b"Scratch MK-DOT-3X\n", pyc: b"MK-PYC-4Z\n"},
            markers={"c-dot": "MK-DOT-3X", "c-pyc": "MK-PYC-4Z"},
        )
    )
    db = ".apps_data/crm/crm.db"
    base = [(1, "Acme renewal", "won"), (2, "Globex pilot", "open")]
    rows.append(
        Row(
            "an app database judged through the tool loop",
            [
                crit("c-db-add", "The CRM records the new deal", "Database Files (.db)"),
                crit("c-db-none", "The CRM records the lost deal", "Database Files (.db)"),
            ],
            inputs("CRM updated.", modified=[db]),
            before={db: sqlite_db(base)},
            after={
                db: sqlite_db(
                    [*base[:1], (2, "Globex pilot", "won"), (3, "Initech MK-DB-5R", "open")]
                )
            },
            markers={"c-db-add": "MK-DB-5R", "c-db-none": "MK-DB-NEVER"},
        )
    )
    return rows


def lenient_row() -> Row:
    """A label in another case: refused by apexrl's grader (an unknown label is never
    widened to all output) while archipelago's widens it, so it is not in the matrix;
    the `lenient_file_types` option reads it as the spreadsheet label."""
    notes, figs = "filesystem/outputs/notes.docx", "filesystem/outputs/figures.xlsx"
    return Row(
        "an expected_file_type label in another case",
        [crit("c-ft-case", "The workbook shows the downside", SHEETS.lower())],
        inputs("Base case attached.", created=[notes, figs]),
        after={
            notes: docx_plain("Base case MK-FT-DOC1; downside MK-FT-DOC2"),
            figs: xlsx_small("Old-label check MK-FT-XLS1; upside MK-FT-XLS2"),
        },
        markers={"c-ft-case": "MK-FT-DOC2"},  # only in the docx
    )


def all_markers(rows: list[Row]) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in rows:
        out.update(r.markers)
    return out


def run_matrix(checkout: str, judge_url: str, options=frozenset()) -> list[dict]:
    """Per criterion: row, tag, the verdict under each grader, same."""
    from apexrl.eval.regrade import grade_kept
    from apexrl.grading.archipelago import resolve_checkout
    from apexrl.grading.judge import JudgeSettings

    ck = resolve_checkout(checkout)
    judge = JudgeSettings(model="openai/scripted", api_base=judge_url)
    out = []
    for r in matrix():
        res = {}
        for g in ("apexrl", "archipelago"):
            res[g] = grade_kept(
                g,
                copy.deepcopy(r.inputs),
                r.before,
                r.after,
                r.criteria,
                {},
                judge=judge,
                checkout=ck,
                options=options,
            )
        for c in r.criteria:
            v = {
                g: next(x.met for x in res[g].verdicts if x.verifier_id == c["verifier_id"])
                for g in res
            }
            out.append(
                {
                    "row": r.name,
                    "criterion": c["verifier_id"],
                    "apexrl": v["apexrl"],
                    "archipelago": v["archipelago"],
                    "same": v["apexrl"] == v["archipelago"],
                }
            )
    return out


def table(results: list[dict]) -> str:
    lines = ["| row | criterion | apexrl | archipelago | same |", "|---|---|---|---|---|"]
    for x in results:
        yn = {True: "met", False: "not met"}
        lines.append(
            f"| {x['row']} | {x['criterion']} | {yn[x['apexrl']]} | {yn[x['archipelago']]} | "
            f"{'yes' if x['same'] else 'NO'} |"
        )
    n = sum(x["same"] for x in results)
    lines.append(f"\nparity: {n}/{len(results)} criteria")
    return "\n".join(lines)


if __name__ == "__main__":
    import os
    import sys
    from pathlib import Path

    from tests.scripted_engine import ScriptedEngine, marker_judge

    repo = Path(__file__).resolve().parents[2]
    os.environ.setdefault("APEXRL_PEER_DIR", str(repo / ".peer"))
    checkout = os.environ.get("APEXRL_ARCHIPELAGO") or str(repo.parent / "shared/peers/archipelago")
    eng = ScriptedEngine([], chat=marker_judge(all_markers([*matrix(), lenient_row()]))).start()
    try:
        print(table(run_matrix(checkout, eng.url + "/v1")))
    finally:
        eng.stop()
    sys.exit(0)
