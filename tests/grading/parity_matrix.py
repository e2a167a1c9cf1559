"""The grader parity matrix: fixed trials (kept grading inputs) graded by apexrl's grader
and by archipelago's own runner, both judged by the scripted engine's marker judge
(tests.scripted_engine.marker_judge): a criterion is met exactly when its marker
reached the judge's prompt. So each verdict says which evidence each grader showed.

Rows: a final answer only; files created and edited (an xlsx past 20k characters, a
docx with tracked changes and comments, a pptx, a pdf); expected_file_type filtering
and labels outside the known set; a missing required file; a max_steps ending whose
last message is a tool result; several criteria at once.

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
                crit("c-ft-case", "The workbook shows the downside", SHEETS.lower()),
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
                "c-ft-old": "MK-FT-XLS1",  # a label outside the known set: no filtering
                "c-ft-case": "MK-FT-DOC2",  # the label with another case: also unknown
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
    return rows


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
    eng = ScriptedEngine([], chat=marker_judge(all_markers(matrix()))).start()
    try:
        print(table(run_matrix(checkout, eng.url + "/v1")))
    finally:
        eng.stop()
    sys.exit(0)
