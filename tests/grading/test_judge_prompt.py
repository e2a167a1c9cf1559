"""The judge's view: readable evidence (PDF text, computed spreadsheet values, document
and slide text), archipelago's grading semantics in the prompt, scope per criterion."""

from __future__ import annotations

import asyncio
import json

from apexrl.grading.evidence import (
    MAX_FILE_CHARS,
    MAX_TOTAL_CHARS,
    collect_files,
    diff_world,
    render_files,
)
from apexrl.grading.grader import grade
from apexrl.grading.judge import (
    JudgeSettings,
    criterion_scope,
    parse_verdict,
    prompt_hash,
    system_prompt,
    user_prompt,
)
from apexrl.grading.readers import file_text
from apexrl.worlds.store import WorldState, stats_of, walk_files


def _pdf(path, lines):
    from fpdf import FPDF

    pdf = FPDF()
    for text in lines:
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.cell(0, 10, text)
    pdf.output(str(path))


def _xlsx(path):
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Model"
    ws["A1"], ws["B1"] = "Revenue", 1200
    ws["A2"], ws["B2"] = "Costs", 450.5
    ws["A3"], ws["B3"] = "EBITDA", "=B1-B2"  # written by a library: no cached value
    wb.save(str(path))


def _docx(path):
    import docx

    d = docx.Document()
    d.add_paragraph("Memo: the liability cap is USD 2.1 million.")
    t = d.add_table(rows=1, cols=2)
    t.rows[0].cells[0].text, t.rows[0].cells[1].text = "Clause", "14.2"
    d.save(str(path))


def _pptx(path):
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[5])
    s.shapes.title.text = "Market size: $26.8bn"
    box = s.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1))
    box.text_frame.text = "CAGR 7.2%"
    prs.save(str(path))


def test_evidence_is_readable_text(tmp_path):
    _pdf(tmp_path / "r.pdf", ["Net debt is 3.4x EBITDA", "Second page"])
    _xlsx(tmp_path / "m.xlsx")
    _docx(tmp_path / "memo.docx")
    _pptx(tmp_path / "deck.pptx")
    pdf = file_text(tmp_path / "r.pdf")
    assert "Net debt is 3.4x EBITDA" in pdf and "--- page 2 ---" in pdf and "%PDF" not in pdf
    sheet = file_text(tmp_path / "m.xlsx")
    assert "B3: 749.5   (formula =B1-B2)" in sheet and "--- sheet Model ---" in sheet
    assert "liability cap is USD 2.1 million" in file_text(tmp_path / "memo.docx")
    assert "Clause | 14.2" in file_text(tmp_path / "memo.docx")
    deck = file_text(tmp_path / "deck.pptx")
    assert "--- slide 1 ---" in deck and "$26.8bn" in deck and "CAGR 7.2%" in deck
    (tmp_path / "bad.xlsx").write_bytes(b"PK\x03\x04 not a zip")
    assert file_text(tmp_path / "bad.xlsx").startswith("(unreadable xlsx file")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01" * 100)
    assert file_text(tmp_path / "blob.bin") == "(binary file, 200 bytes)"


def test_files_shown_per_scope_and_capped(tmp_path):
    before = tmp_path / "before"
    (before / "filesystem").mkdir(parents=True)
    after = tmp_path / "after"
    (after / "filesystem").mkdir(parents=True)
    stats = stats_of(walk_files(after))
    _xlsx(after / "filesystem" / "model.xlsx")
    (after / "filesystem" / "notes.txt").write_text("x" * (MAX_FILE_CHARS + 500))
    state = WorldState(after_root=after, before=walk_files(before), before_stats=stats)
    files = collect_files(state, diff_world(state))
    everything = render_files(files)  # whole by default, as archipelago shows files
    assert '<FILE path="model.xlsx" sheet="Model" change="created">' in everything
    assert "x" * (MAX_FILE_CHARS + 500) in everything and "truncated" not in everything
    capped = render_files(files, file_cap=MAX_FILE_CHARS)  # the evidence_caps option
    assert "[... truncated: 500 more characters ...]" in capped
    only_sheets = render_files(files, (".xlsx",))
    assert "model.xlsx" in only_sheets and "notes.txt" not in only_sheets
    assert render_files(files, (".pdf",)) == ""
    assert len(render_files(files, total=100)) < 400
    assert "unknown" in render_files(None)


def test_prompt_follows_archipelago_semantics():
    assert "shown whole" in system_prompt()
    sp = system_prompt(MAX_FILE_CHARS, MAX_TOTAL_CHARS)
    for needle in (
        "STRICT MATCHING",  # exact values, conjunctive requirements, specificity
        "right answer\n  with a wrong explanation fails",
        "TOLERANCE",
        '$2.07B meets\n  "$2.1bn"',
        ".xls/.xlsx",
        "not evidence of a file change",
        f"each file up to {MAX_FILE_CHARS:,}",
        f"all files together up to {MAX_TOTAL_CHARS:,}",
        '"is_criteria_true": true or false',
    ):
        assert needle in sp, needle
    up = user_prompt("Task T", "States EBITDA of 749.5", "EBITDA is 749.5", "<FILE/>", "answer")
    assert "EBITDA is 749.5" in up and "<FILE/>" not in up and "final answer only" in up
    up = user_prompt("Task T", "crit", "the answer", "<FILE/>", "files")
    assert "the answer" not in up and "<FILE/>" in up and "file changes only" in up
    up = user_prompt("Task T", "crit", "the answer", "<FILE/>", "both")
    assert "the answer" in up and "<FILE/>" in up
    assert prompt_hash(sp, up) != prompt_hash(sp, up + " ")
    assert criterion_scope({"criteria": "x"}) == ("both", ())
    assert criterion_scope({"evaluation_scope": "answer"}) == ("answer", ())
    assert criterion_scope({"expected_file_type": "Final Answer Only (No Files)"})[0] == "answer"
    scope, suffixes = criterion_scope(
        {"expected_file_type": "Spreadsheets (.xlsx, .xls, .xlsm, .ods)"}
    )
    assert scope == "files" and ".xlsx" in suffixes
    assert parse_verdict('<think>{"x"}</think>{"rationale": "r", "is_criteria_true": false}') == (
        False,
        "r",
    )


def test_files_scope_without_such_file_fails_without_the_judge(tmp_path):
    crit = [
        {
            "verifier_id": "v1",
            "criteria": "The spreadsheet shows EBITDA",
            "expected_file_type": "Spreadsheets (.xlsx, .xls, .xlsm, .ods)",
        }
    ]
    # an unreachable judge: any call would fail the grading
    judge = JudgeSettings(model="openai/j", api_base="http://127.0.0.1:9/v1", timeout_s=2)
    res = asyncio.run(
        grade(crit, answer="done", fs_root=tmp_path, judge=judge, files=[], reward="score")
    )
    (v,) = res.verdicts
    assert not v.met and v.source == "judge" and v.attempts == 0 and "expected type" in v.rationale
    assert res.reward == 0.0 and res.reward_mode == "score"
    assert json.loads(res.model_dump_json())["judge_model"] == "openai/j"
