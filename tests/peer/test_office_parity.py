"""word and powerpoint beside archipelago's documents and presentations servers, on
more cases than the verify set, over files the example worlds lack: runs with
formatting, an embedded image (read back as the peer re-encodes it), tables, a header,
footer and comment, a document long enough to page, an empty document, a zero-byte and a
non-zip file, unicode file names, a deck with every layout, notes, a table and a picture;
reads, writes (files compared by content), every tool's error texts. Every case must
come back identical (after the normalisation `world verify` applies)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from apexrl.peer.cases import Case
from apexrl.peer.verify import _run_server, prepare_copies

pytestmark = [pytest.mark.peer, pytest.mark.integration, pytest.mark.timeout(900)]

# tools whose cases leave files to compare
WRITES = {
    "add_content_text",
    "add_image",
    "add_shape",
    "add_slide",
    "apply_formatting",
    "comments",
    "create_deck",
    "create_document",
    "delete_content_text",
    "delete_deck",
    "delete_document",
    "edit_content_text",
    "edit_slides",
    "header_footer",
    "insert_chart",
    "insert_table",
    "modify_image",
    "page_margins",
    "page_orientation",
}

WORD = [
    ("get_document_overview", {"file_path": "/office/rich.docx"}),
    ("read_document_content", {"file_path": "/office/rich.docx"}),
    ("read_document_content", {"file_path": "/office/rich.docx", "page_index": 1}),
    ("get_document_overview", {"file_path": "/office/long.docx"}),
    ("read_document_content", {"file_path": "/office/long.docx", "page_index": 1}),
    ("get_document_overview", {"file_path": "/office/empty.docx"}),
    ("read_document_content", {"file_path": "/office/empty.docx"}),
    ("read_document_content", {"file_path": "/office/zero.docx"}),
    ("get_document_overview", {"file_path": "/office/notdoc.docx"}),
    ("read_document_content", {"file_path": "/office/Résumé ünï.docx"}),
    ("get_document_overview", {"file_path": "/missing.docx"}),
    ("get_document_overview", {"file_path": "docs/rich.docx"}),
    ("get_document_overview", {"file_path": "/office/red.png"}),
    ("get_document_overview", {"file_path": "/office"}),
    ("read_image", {"file_path": "/office/rich.docx", "annotation": "body_p_8_r1"}),
    ("read_image", {"file_path": "/office/rich.docx", "annotation": "nope"}),
    ("read_document_content", {"file_path": "/office/rich.docx"}),
    ("read_image", {"file_path": "/office/rich.docx", "annotation": "body_p_7_r1"}),
    ("read_image", {"file_path": "/office/rich.docx", "annotation": "@body_p_7_r1"}),
    (
        "create_document",
        {"directory": "/", "file_name": "a.docx", "content": [{"type": "paragraph", "text": "x"}]},
    ),
    (
        "create_document",
        {"directory": "/", "file_name": "a.docx", "content": [{"type": "paragraph", "text": "x"}]},
    ),
    (
        "create_document",
        {
            "directory": "/nodir",
            "file_name": "b.docx",
            "content": [{"type": "paragraph", "text": "x"}],
        },
    ),
    (
        "create_document",
        {"directory": "/", "file_name": "c.txt", "content": [{"type": "paragraph", "text": "x"}]},
    ),
    (
        "create_document",
        {
            "directory": "/",
            "file_name": "d/e.docx",
            "content": [{"type": "paragraph", "text": "x"}],
        },
    ),
    ("create_document", {"directory": "/", "file_name": "f.docx", "content": []}),
    (
        "create_document",
        {
            "directory": "docs",
            "file_name": "g.docx",
            "content": [{"type": "paragraph", "text": "x"}],
        },
    ),
    (
        "create_document",
        {"directory": "/", "file_name": "h.docx", "content": [{"type": "paragraph", "text": ""}]},
    ),
    (
        "create_document",
        {
            "directory": "/",
            "file_name": "i.docx",
            "content": [{"type": "table", "rows": [["a", "b"], ["c"]]}],
        },
    ),
    (
        "create_document",
        {
            "directory": "/office",
            "file_name": "k ü.docx",
            "content": [
                {"type": "heading", "text": "H", "level": 9},
                {"type": "table", "rows": [["a", "b"], ["c", "d"]], "header": True},
                {"type": "numbered_list", "items": ["n1"]},
                {"type": "page_break"},
                {"type": "section_break", "start_type": "continuous"},
                {"type": "paragraph", "text": "B", "bold": True, "italic": True, "style": "Quote"},
            ],
            "metadata": {"title": "T", "author": "Me"},
        },
    ),
    ("read_document_content", {"file_path": "/office/k ü.docx"}),
    ("get_document_overview", {"file_path": "/office/k ü.docx"}),
    (
        "add_content_text",
        {"file_path": "/a.docx", "identifier": "body.p.0", "text": "S", "position": "start"},
    ),
    (
        "add_content_text",
        {"file_path": "/a.docx", "identifier": "body.p.0", "text": "B", "position": "before"},
    ),
    (
        "add_content_text",
        {"file_path": "/a.docx", "identifier": "body.p.0.r.0", "text": "R", "position": "end"},
    ),
    (
        "add_content_text",
        {"file_path": "/a.docx", "identifier": "body.p.0", "text": "X", "position": "middle"},
    ),
    ("add_content_text", {"file_path": "/a.docx", "identifier": "body.p.9", "text": "X"}),
    ("add_content_text", {"file_path": "/a.docx", "identifier": "bad.id", "text": "X"}),
    ("add_content_text", {"file_path": "/a.docx", "identifier": "body.p.0.r.5", "text": "X"}),
    (
        "add_content_text",
        {"file_path": "/office/k ü.docx", "identifier": "body.tbl.0.r.1.c.1", "text": "+"},
    ),
    ("add_content_text", {"file_path": "/missing.docx", "identifier": "body.p.0", "text": "X"}),
    (
        "edit_content_text",
        {"file_path": "/a.docx", "identifier": "body.p.0.r.0", "new_text": "run0"},
    ),
    (
        "edit_content_text",
        {"file_path": "/office/k ü.docx", "identifier": "body.tbl.0.r.0.c.0", "new_text": "cell"},
    ),
    ("edit_content_text", {"file_path": "/a.docx", "identifier": "body.p.7", "new_text": "x"}),
    (
        "edit_content_text",
        {"file_path": "/office/k ü.docx", "identifier": "body.tbl.3.r.0.c.0", "new_text": "cell"},
    ),
    ("delete_content_text", {"file_path": "/a.docx", "identifier": "body.p.0.r.0"}),
    ("delete_content_text", {"file_path": "/office/k ü.docx", "identifier": "body.tbl.0.r.0.c.1"}),
    (
        "delete_content_text",
        {"file_path": "/office/k ü.docx", "identifier": "body.tbl.0.r.0.c.1", "scope": "element"},
    ),
    (
        "delete_content_text",
        {"file_path": "/office/k ü.docx", "identifier": "body.p.1", "scope": "element"},
    ),
    (
        "delete_content_text",
        {"file_path": "/office/k ü.docx", "identifier": "body.p.0", "scope": "nope"},
    ),
    ("read_document_content", {"file_path": "/office/k ü.docx"}),
    ("delete_document", {"file_path": "/missing.docx"}),
    ("delete_document", {"file_path": "/a.docx"}),
    ("delete_document", {"file_path": "/office/red.png"}),
    (
        "create_document",
        {
            "directory": "/",
            "file_name": "a.docx",
            "content": [
                {"type": "paragraph", "text": "alpha beta"},
                {"type": "paragraph", "text": "second"},
                {"type": "table", "rows": [["a", "b"], ["c", "d"]]},
            ],
        },
    ),
    (
        "apply_formatting",
        {
            "file_path": "/a.docx",
            "identifier": "body.p.0",
            "bold": True,
            "font_size": 14,
            "font_color": "FF0000",
        },
    ),
    (
        "apply_formatting",
        {
            "file_path": "/a.docx",
            "identifier": "body.p.1",
            "italic": True,
            "underline": True,
            "strikethrough": True,
        },
    ),
    (
        "apply_formatting",
        {"file_path": "/a.docx", "identifier": "body.tbl.0.r.0.c.0", "bold": True},
    ),
    ("apply_formatting", {"file_path": "/a.docx", "identifier": "body.p.0", "font_color": "zz"}),
    ("apply_formatting", {"file_path": "/a.docx", "identifier": "body.p.0"}),
    ("read_document_content", {"file_path": "/a.docx"}),
    ("header_footer", {"file_path": "/office/rich.docx", "action": "read", "area": "header"}),
    ("header_footer", {"file_path": "/office/rich.docx", "action": "read", "area": "footer"}),
    ("header_footer", {"file_path": "/a.docx", "action": "read", "area": "header"}),
    (
        "header_footer",
        {
            "file_path": "/a.docx",
            "action": "set",
            "area": "header",
            "content": [{"type": "paragraph", "text": "HDR"}],
        },
    ),
    ("header_footer", {"file_path": "/a.docx", "action": "read", "area": "header"}),
    ("header_footer", {"file_path": "/a.docx", "action": "clear", "area": "header"}),
    (
        "header_footer",
        {"file_path": "/a.docx", "action": "link", "area": "footer", "link_to_previous": True},
    ),
    ("header_footer", {"file_path": "/a.docx", "action": "bad", "area": "header"}),
    ("header_footer", {"file_path": "/a.docx", "action": "read", "area": "side"}),
    (
        "header_footer",
        {"file_path": "/a.docx", "action": "read", "area": "header", "section_index": 4},
    ),
    ("page_margins", {"file_path": "/a.docx", "action": "read"}),
    ("page_margins", {"file_path": "/a.docx", "action": "set", "top": 0.5, "left": 1.25}),
    ("page_margins", {"file_path": "/a.docx", "action": "set"}),
    ("page_margins", {"file_path": "/a.docx", "action": "read", "section_index": 3}),
    ("page_orientation", {"file_path": "/a.docx", "action": "read"}),
    ("page_orientation", {"file_path": "/a.docx", "action": "set", "orientation": "landscape"}),
    ("page_orientation", {"file_path": "/a.docx", "action": "set", "orientation": "diagonal"}),
    ("page_orientation", {"file_path": "/a.docx", "action": "set"}),
    ("comments", {"file_path": "/office/rich.docx", "action": "read"}),
    ("comments", {"file_path": "/a.docx", "action": "read"}),
    (
        "comments",
        {
            "file_path": "/a.docx",
            "action": "add",
            "identifier": "body.p.0",
            "text": "Note",
            "author": "Me",
        },
    ),
    ("comments", {"file_path": "/a.docx", "action": "add", "identifier": "body.p.0"}),
    ("comments", {"file_path": "/a.docx", "action": "read"}),
    ("comments", {"file_path": "/a.docx", "action": "delete", "comment_id": 0}),
    ("comments", {"file_path": "/a.docx", "action": "delete", "comment_id": 7}),
    ("comments", {"file_path": "/a.docx", "action": "bad"}),
    (
        "add_image",
        {
            "file_path": "/a.docx",
            "image_path": "/office/red.png",
            "identifier": "body.p.1",
            "position": "start",
            "width": 2,
        },
    ),
    (
        "add_image",
        {"file_path": "/a.docx", "image_path": "/office/nope.png", "identifier": "body.p.1"},
    ),
    (
        "add_image",
        {"file_path": "/a.docx", "image_path": "/office/rich.docx", "identifier": "body.p.1"},
    ),
    (
        "add_image",
        {
            "file_path": "/a.docx",
            "image_path": "/office/red.png",
            "identifier": "body.p.1",
            "position": "middle",
        },
    ),
    (
        "modify_image",
        {"file_path": "/a.docx", "image_index": 0, "operation": "rotate", "rotation": 90},
    ),
    (
        "modify_image",
        {"file_path": "/a.docx", "image_index": 5, "operation": "rotate", "rotation": 90},
    ),
    ("modify_image", {"file_path": "/a.docx", "image_index": 0, "operation": "blur"}),
    (
        "modify_image",
        {"file_path": "/a.docx", "image_index": 0, "operation": "flip", "flip": "horizontal"},
    ),
    (
        "modify_image",
        {"file_path": "/a.docx", "image_index": 0, "operation": "brightness", "brightness": 1.5},
    ),
    ("modify_image", {"file_path": "/a.docx", "image_index": 0, "operation": "rotate"}),
    ("read_document_content", {"file_path": "/a.docx"}),
]

POWERPOINT = [
    ("read_completedeck", {"file_path": "/office/rich.pptx"}),
    ("read_slides", {"file_path": "/office/rich.pptx"}),
    ("read_slides", {"file_path": "/office/rich.pptx", "start": 100, "end": 5000}),
    ("read_slides", {"file_path": "/office/big.pptx", "start": 0, "end": 20000}),
    ("read_slides", {"file_path": "/office/rich.pptx", "start": 50, "end": 10}),
    ("read_slides", {"file_path": "/office/rich.pptx", "start": 5000}),
    ("read_individualslide", {"file_path": "/office/rich.pptx", "slide_index": 1}),
    ("read_individualslide", {"file_path": "/office/rich.pptx", "slide_index": 2}),
    ("read_individualslide", {"file_path": "/office/rich.pptx", "slide_index": 3}),
    ("read_individualslide", {"file_path": "/office/rich.pptx", "slide_index": 4}),
    ("read_individualslide", {"file_path": "/office/rich.pptx", "slide_index": 5}),
    ("read_individualslide", {"file_path": "/office/rich.pptx", "slide_index": -1}),
    ("read_image", {"file_path": "/office/rich.pptx", "annotation": "slide2_img0"}),
    ("read_image", {"file_path": "/office/rich.pptx", "annotation": "slide9_img0"}),
    ("read_completedeck", {"file_path": "/office/empty.pptx"}),
    ("read_slides", {"file_path": "/office/empty.pptx"}),
    ("read_completedeck", {"file_path": "/office/zero.pptx"}),
    ("read_slides", {"file_path": "/office/zero.pptx"}),
    ("read_individualslide", {"file_path": "/office/zero.pptx", "slide_index": 0}),
    ("read_completedeck", {"file_path": "d/rich.pptx"}),
    ("read_completedeck", {"file_path": "/office/red.png"}),
    ("read_slides", {"file_path": "/missing.pptx"}),
    ("read_individualslide", {"file_path": "/missing.pptx", "slide_index": 0}),
    (
        "create_deck",
        {
            "directory": "/",
            "file_name": "n.pptx",
            "slides": [
                {"layout": "title", "title": "T", "subtitle": "S"},
                {
                    "layout": "title_and_content",
                    "title": "B",
                    "bullets": {"items": ["a", "b"]},
                    "notes": "nn",
                },
                {
                    "layout": "two_content",
                    "title": "C",
                    "columns": {"left": {"items": ["l"]}, "right": {"items": ["r"]}},
                },
                {
                    "layout": "title_only",
                    "title": "Tb",
                    "table": {"rows": [["h", "i"], ["1", "2"]]},
                },
                {"layout": "section_header", "title": "Sec", "subtitle": "sub"},
                {"layout": "blank"},
            ],
        },
    ),
    ("read_completedeck", {"file_path": "/n.pptx"}),
    ("read_slides", {"file_path": "/n.pptx"}),
    ("read_individualslide", {"file_path": "/n.pptx", "slide_index": 3}),
    (
        "create_deck",
        {"directory": "/", "file_name": "n.pptx", "slides": [{"layout": "title", "title": "T"}]},
    ),
    (
        "create_deck",
        {"directory": "/nod", "file_name": "m.pptx", "slides": [{"layout": "title", "title": "T"}]},
    ),
    (
        "create_deck",
        {"directory": "/", "file_name": "x.txt", "slides": [{"layout": "title", "title": "T"}]},
    ),
    ("create_deck", {"directory": "/", "file_name": "e.pptx", "slides": []}),
    ("create_deck", {"directory": "rel", "file_name": "e.pptx", "slides": [{"layout": "title"}]}),
    ("add_slide", {"file_path": "/n.pptx", "index": 9, "layout": "title_only", "title": "Added"}),
    (
        "add_slide",
        {
            "file_path": "/n.pptx",
            "index": 0,
            "layout": "title_and_content",
            "title": "First",
            "bullets": ["x", "y"],
        },
    ),
    ("add_slide", {"file_path": "/missing.pptx", "index": 0}),
    (
        "insert_table",
        {
            "file_path": "/n.pptx",
            "slide_index": 1,
            "rows": [["k", "v"], ["a", "1"]],
            "header": True,
        },
    ),
    ("insert_table", {"file_path": "/n.pptx", "slide_index": 1, "rows": [["k", "v"], ["a"]]}),
    ("insert_table", {"file_path": "/n.pptx", "slide_index": 40, "rows": [["k"]]}),
    ("insert_table", {"file_path": "/n.pptx", "slide_index": 1, "rows": []}),
    (
        "add_shape",
        {
            "file_path": "/n.pptx",
            "slide_index": 1,
            "shape_type": "star",
            "text": "hi",
            "fill_color": "FF0000",
        },
    ),
    (
        "add_shape",
        {
            "file_path": "/n.pptx",
            "slide_index": 1,
            "shape_type": "rectangle",
            "fill_color": "nothex",
        },
    ),
    ("add_image", {"file_path": "/n.pptx", "image_path": "/office/red.png", "slide_index": 1}),
    ("add_image", {"file_path": "/n.pptx", "image_path": "/office/nope.png", "slide_index": 1}),
    (
        "modify_image",
        {
            "file_path": "/n.pptx",
            "slide_index": 1,
            "image_index": 0,
            "operation": "rotate",
            "rotation": 90,
        },
    ),
    (
        "modify_image",
        {
            "file_path": "/n.pptx",
            "slide_index": 1,
            "image_index": 3,
            "operation": "rotate",
            "rotation": 90,
        },
    ),
    (
        "modify_image",
        {
            "file_path": "/n.pptx",
            "slide_index": 1,
            "image_index": 0,
            "operation": "crop",
            "crop_left": 0,
            "crop_top": 0,
            "crop_right": 10,
            "crop_bottom": 10,
        },
    ),
    (
        "insert_chart",
        {
            "presentation_path": "/n.pptx",
            "slide_index": 2,
            "spreadsheet_path": "/office/data.xlsx",
            "sheet_name": "S",
            "data_range": "A1:C3",
            "chart_type": "bar",
            "title": "Ch",
        },
    ),
    (
        "insert_chart",
        {
            "presentation_path": "/n.pptx",
            "slide_index": 2,
            "spreadsheet_path": "/office/data.xlsx",
            "sheet_name": "Nope",
            "data_range": "A1:C3",
        },
    ),
    ("read_individualslide", {"file_path": "/n.pptx", "slide_index": 2}),
    (
        "edit_slides",
        {
            "file_path": "/n.pptx",
            "operations": [{"type": "update_slide_title", "index": 0, "title": "New"}],
        },
    ),
    (
        "edit_slides",
        {
            "file_path": "/n.pptx",
            "operations": [{"type": "update_slide_title", "index": 50, "title": "New"}],
        },
    ),
    ("read_completedeck", {"file_path": "/n.pptx"}),
    ("delete_deck", {"file_path": "/missing.pptx"}),
    ("delete_deck", {"file_path": "/n.pptx"}),
    (
        "create_deck",
        {
            "directory": "/",
            "file_name": "e.pptx",
            "slides": [
                {"layout": "title", "title": "T", "subtitle": "S"},
                {"layout": "title_and_content", "title": "B", "bullets": {"items": ["alpha", "b"]}},
                {
                    "layout": "title_and_content",
                    "title": "Tb",
                    "table": {"rows": [["h", "i"], ["1", "2"]]},
                },
            ],
        },
    ),
    (
        "edit_slides",
        {
            "file_path": "/e.pptx",
            "operations": [{"type": "replace_text", "search": "alpha", "replace": "ALPHA"}],
        },
    ),
    (
        "edit_slides",
        {
            "file_path": "/e.pptx",
            "operations": [{"type": "replace_text", "search": "zzz", "replace": "Q"}],
        },
    ),
    (
        "edit_slides",
        {
            "file_path": "/e.pptx",
            "operations": [{"type": "set_bullets", "index": 1, "items": ["x", "y"]}],
        },
    ),
    (
        "edit_slides",
        {
            "file_path": "/e.pptx",
            "operations": [{"type": "append_bullets", "index": 1, "items": ["z"]}],
        },
    ),
    (
        "edit_slides",
        {
            "file_path": "/e.pptx",
            "operations": [{"type": "update_slide_subtitle", "index": 0, "subtitle": "S2"}],
        },
    ),
    (
        "edit_slides",
        {"file_path": "/e.pptx", "operations": [{"type": "set_notes", "index": 0, "notes": "N"}]},
    ),
    (
        "edit_slides",
        {
            "file_path": "/e.pptx",
            "operations": [
                {
                    "type": "update_table_cell",
                    "index": 2,
                    "table_idx": 0,
                    "row": 1,
                    "column": 0,
                    "text": "9",
                }
            ],
        },
    ),
    (
        "edit_slides",
        {"file_path": "/e.pptx", "operations": [{"type": "clear_placeholder", "index": 1}]},
    ),
    (
        "edit_slides",
        {"file_path": "/e.pptx", "operations": [{"type": "duplicate_slide", "index": 0}]},
    ),
    ("edit_slides", {"file_path": "/e.pptx", "operations": [{"type": "delete_slide", "index": 3}]}),
    ("read_slides", {"file_path": "/e.pptx"}),
    ("read_completedeck", {"file_path": "/e.pptx"}),
    (
        "edit_slides",
        {
            "file_path": "/n.pptx",
            "operations": [
                {"type": "replace_text", "search": "a", "replace": "A"},
                {"type": "delete_slide", "index": 6},
                {"type": "set_notes", "index": 0, "notes": "NN"},
            ],
        },
    ),
]


def _office_files(fs: Path) -> None:
    """The documents, decks and images the cases read, written into a world's
    filesystem/office/."""
    import docx
    import openpyxl
    from docx.shared import Inches
    from PIL import Image
    from pptx import Presentation
    from pptx.util import Inches as PInches

    root = fs / "office"
    root.mkdir(parents=True)
    Image.new("RGB", (40, 20), (200, 30, 30)).save(root / "red.png")
    d = docx.Document()
    d.core_properties.title = "Rich doc"
    d.add_heading("Rich Title", 0)
    d.add_heading("Section A", 1)
    p = d.add_paragraph("Plain start ")
    p.add_run("bold part").bold = True
    p.add_run(" italic part").italic = True
    p.add_run(" under").underline = True
    d.add_paragraph("Second para with ünïcode — dash")
    d.add_paragraph("")
    t = d.add_table(rows=2, cols=3)
    for i in range(2):
        for j in range(3):
            t.cell(i, j).text = f"r{i}c{j}"
    d.add_heading("Section B", 2)
    d.add_paragraph("Numbered one", style="List Number")
    p = d.add_paragraph("Image here: ")
    p.add_run().add_picture(str(root / "red.png"), width=Inches(1))
    d.add_paragraph("After image", style="Quote")
    d.sections[0].header.paragraphs[0].text = "Header text"
    d.sections[0].footer.paragraphs[0].text = "Footer text"
    d.add_comment(d.paragraphs[3].runs, text="A comment", author="Rev")
    d.save(root / "rich.docx")
    d.save(root / "Résumé ünï.docx")
    d = docx.Document()
    for i in range(130):
        d.add_paragraph(f"Line {i} " + "word " * 30)
    d.save(root / "long.docx")
    docx.Document().save(root / "empty.docx")
    (root / "zero.docx").write_bytes(b"")
    (root / "notdoc.docx").write_text("hello")

    prs = Presentation()
    s = prs.slides.add_slide(prs.slide_layouts[0])
    s.shapes.title.text = "Deck T"
    s.placeholders[1].text = "Sub ü"
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Bullets"
    tf = s.placeholders[1].text_frame
    tf.text = "one"
    para = tf.add_paragraph()
    para.text, para.level = "two", 1
    s.notes_slide.notes_text_frame.text = "Speaker note"
    s = prs.slides.add_slide(prs.slide_layouts[5])
    s.shapes.title.text = "Table+pic"
    tb = s.shapes.add_table(2, 2, PInches(1), PInches(2), PInches(4), PInches(1)).table
    for (r, c), v in {(0, 0): "h1", (0, 1): "h2", (1, 0): "v1", (1, 1): "v|2"}.items():
        tb.cell(r, c).text = v
    s.shapes.add_picture(str(root / "red.png"), PInches(6), PInches(2))
    s.shapes.add_textbox(PInches(1), PInches(5), PInches(3), PInches(1)).text_frame.text = "textbox"
    prs.slides.add_slide(prs.slide_layouts[6])
    s = prs.slides.add_slide(prs.slide_layouts[2])
    s.shapes.title.text = "Section"
    s = prs.slides.add_slide(prs.slide_layouts[3])
    s.shapes.title.text = "Two"
    s.placeholders[1].text = "L"
    s.placeholders[2].text = "R"
    prs.save(root / "rich.pptx")
    Presentation().save(root / "empty.pptx")
    (root / "zero.pptx").write_bytes(b"")
    prs = Presentation()
    for i in range(3):
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = f"Slide {i}"
        s.placeholders[1].text = "Body text " * 20
    prs.save(root / "big.pptx")
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "S"
    for row in [["k", "a", "b"], ["x", 1, 2], ["y", 3, 4]]:
        ws.append(row)
    wb.save(root / "data.xlsx")


@pytest.mark.parametrize("server", ["word", "powerpoint"])
def test_office_cases_identical(server, checkout, tmp_path):
    from apexrl.peer.runtime import runtimes

    rt = runtimes(checkout, servers=[server])[server]
    # a world of these files only: every write digests the whole world on both sides
    src = tmp_path / "src"
    (src / ".apps_data").mkdir(parents=True)
    _office_files(src / "filesystem")
    a_root, p_root = prepare_copies(src, tmp_path / "work")
    table = WORD if server == "word" else POWERPOINT
    cases = [Case(server=server, tool=t, args=a, writes=t in WRITES) for t, a in table]
    records = []
    asyncio.run(_run_server(server, cases, rt, a_root, p_root, records.append, datetime.now(UTC)))
    assert len(records) == len(cases)
    # writes were made and compared by content; failures, raised errors and images came back
    assert any(r.peer.files for r in records) and any(r.peer.error for r in records)
    assert any(b.startswith("<image image/jpeg ") for r in records for b in r.peer.content)
    diff = [
        json.dumps(
            {
                "tool": r.tool,
                "args": r.args,
                "apexrl": r.apexrl.model_dump(),
                "peer": r.peer.model_dump(),
            },
            ensure_ascii=False,
        )[:2000]
        for r in records
        if not r.same
    ]
    assert diff == []
