"""archipelago's tool surface (the default) on the example worlds' real files, through a
real MCP client session against the gateway: every tool is called here (read, write and
error cases); a test checks that none is left out."""

from __future__ import annotations

import base64
import io
import json
import mailbox
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.worlds.surface import ARCHIPELAGO, SURFACES
from tests.worlds.conftest import Session

# The names a recipe-trained checkpoint knows from the recipe's production prompt.
RECIPE_NAMES = {
    "code_execution_code_exec",
    "excel_read_tab",
    "filesystem_search_files",
    "pdfs_read_pdf_pages",
    "pdfs_read_page_as_image",
}


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, dict]:
    from apexrl.tasks.example import write_example

    out = tmp_path_factory.mktemp("example")
    write_example(out, seed=0)
    worlds = json.loads((out / "world_descriptions.json").read_text())
    world = next(w for w in worlds if "code" in w["apps"] and w["world_id"])
    return out, world


@pytest.fixture(scope="module")
def arch(example, tmp_path_factory):
    from apexrl.worlds.gateway import build_gateway, serve_in_thread
    from apexrl.worlds.world import open_world

    out, world = example
    zpath = out / "world_files_zipped" / f"{world['world_id']}.zip"
    w = open_world(zpath, workdir=tmp_path_factory.mktemp("arch") / "w")
    try:
        with serve_in_thread(build_gateway(w)) as r:
            s = Session(r.url)
            yield s, w.root, _find(s)
    finally:
        w.close()


def _find(s: Session) -> dict[str, str]:
    """One real file of each kind, found the way an agent would."""
    found = {}
    for ext in ("xlsx", "docx", "pptx", "pdf", "csv", "txt"):
        text = s.text("filesystem_search_files", pattern=f"*.{ext}")
        found[ext] = next(ln for ln in text.splitlines() if ln.startswith("/"))
    return found


def _first_tab(s: Session, xlsx: str) -> str:
    import ast

    text = s.text("excel_list_tabs_in_spreadsheet", file_path=xlsx)
    return ast.literal_eval(text)["worksheets"][0]["name"]


def _image(result) -> bytes:
    block = result.content[0]
    assert block.type == "image", block
    return base64.b64decode(block.data)


def test_surface_lists_archipelago_names(arch):
    s, _, _ = arch
    names = s.tools()
    assert set(names) >= RECIPE_NAMES
    expected = [f"{sv.name}_{t}" for sv in ARCHIPELAGO.servers for t in sv.tools]
    assert names == expected
    assert {n.split("_", 1)[0] for n in names} >= {"filesystem", "word", "excel", "powerpoint"}


def test_every_archipelago_tool_is_exercised_here():
    src = Path(__file__).read_text()
    missing = [
        f"{sv.name}_{t}"
        for sv in ARCHIPELAGO.servers
        for t in sv.tools
        if f'"{sv.name}_{t}"' not in src
    ]
    assert missing == []


def test_filesystem(arch):
    s, root, f = arch
    top = s.text("filesystem_list_files", path="/")
    assert "(folder)" in top and "README.md" in top and "bytes" in top
    assert s.text("filesystem_list_files", path="/nope").startswith("[not found")
    assert f["xlsx"].endswith(".xlsx") and f["xlsx"].startswith("/")
    none = s.text("filesystem_search_files", pattern="*.zzz", path="/")
    assert none.startswith("No files matching")
    flat = s.text("filesystem_search_files", pattern="*.md", recursive=False)
    assert "/README.md" in flat
    txt = s.text("filesystem_read_text_file", file_path=f["txt"])
    assert txt == (root / "filesystem" / f["txt"].lstrip("/")).read_text()
    # a failed call reads as archipelago's servers word it: their prefix, their reason
    err = s.error("filesystem_read_text_file", file_path=f["pdf"])
    assert err.startswith(
        "Internal error: Error calling tool 'read_text_file': Unsupported file type: 'pdf'. "
        "Supported extensions: bash, bat, bib, c, cfg, "
    )
    assert err.endswith(", txt, vagrantfile, xml, yaml, yml, zsh")
    assert s.error("filesystem_read_text_file", file_path="/../../x.txt") == (
        "Internal error: Error calling tool 'read_text_file': Access denied: /../../x.txt"
    )
    assert s.error("filesystem_read_text_file", file_path="/no.txt").endswith(
        "'read_text_file': File not found: /no.txt"
    )
    assert s.error("filesystem_read_text_file", file_path="no.txt").endswith(
        "'read_text_file': File path must start with /"
    )
    assert s.text("filesystem_list_files", path="/..") == "[access denied: /..]\n"
    meta = s.text("filesystem_get_file_metadata", file_path=f["xlsx"])
    assert "Type: file" in meta and "Size:" in meta and "spreadsheetml" in meta
    tree = s.text("filesystem_get_directory_tree", path="/", max_depth=2, show_size=True)
    assert tree.startswith("/\n") and "├── " in tree and "bytes)" in tree
    # images: render a page, put it in the world, read it back
    png = root / "filesystem" / "page.png"
    from PIL import Image

    Image.new("RGB", (4, 3), "red").save(png)
    img = _image(s.call("filesystem_read_image_file", file_path="/page.png"))
    assert Image.open(io.BytesIO(img)).size == (4, 3)
    assert "Unsupported image format" in s.error("filesystem_read_image_file", file_path=f["csv"])
    png.unlink()


def test_code_exec(arch):
    s, root, f = arch
    r = s.json("code_execution_code_exec", code=f"ls {f['xlsx'].rsplit('/', 2)[1]}; echo oops >&2")
    assert (
        r["success"]
        and Path(f["xlsx"]).name in r["output"]
        and "Stderr output:\noops" in r["output"]
    )
    script = (
        "cat > sheets.py << 'EOF'\nimport sys, zipfile\n"
        "print(len(zipfile.ZipFile(sys.argv[1]).read('xl/workbook.xml')))\nEOF\n"
        f"python3 sheets.py '{f['xlsx'][1:]}'"
    )
    r = s.json("code_execution_code_exec", code=script)
    assert r["success"] and int(r["output"].strip()) > 100, r
    # archipelago's layout of results (compact JSON; stdout, then stderr; the exit code last)
    assert s.text("code_execution_code_exec", code="echo out; echo err >&2") == (
        '{"success":true,"output":"out\\n\\nStderr output:\\nerr"}'
    )
    assert s.json("code_execution_code_exec", code="echo x; echo bad >&2; exit 3") == {
        "success": False,
        "output": "x\n\nError output:\nbad\n\n\nCommand failed with exit code 3",
    }
    raw = s.json("code_execution_code_exec", code="import pandas as pd")
    assert raw["success"] is False and "raw Python" in raw["output"]
    assert s.json("code_execution_code_exec")["success"] is False  # code is required
    s.json("code_execution_code_exec", code="echo made > made_by_code.txt")
    assert (root / "filesystem" / "made_by_code.txt").read_text() == "made\n"


def _py(text: str):
    import ast

    return ast.literal_eval(text)


def test_excel_read(arch, monkeypatch):
    s, root, f = arch
    tabs = _py(s.text("excel_list_tabs_in_spreadsheet", file_path=f["xlsx"]))["worksheets"]
    assert tabs[0]["index"] == 0 and tabs[0]["row_count"] > 1
    assert list(tabs[0]) == ["name", "index", "row_count", "column_count"]
    table = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=0)
    lines = table.splitlines()
    assert lines[:2] == ["Range: all", "Table:"] and lines[2].startswith("\tA\tB")
    assert lines[3].startswith("1\t")
    import openpyxl

    wb = openpyxl.load_workbook(root / "filesystem" / f["xlsx"][1:])
    formulas = [
        (ws_i, c.coordinate, c.value)
        for ws_i, ws in enumerate(wb.worksheets)
        for row in ws.iter_rows()
        for c in row
        if isinstance(c.value, str) and c.value.startswith("=")
    ]
    assert formulas, "the example workbook has formulas"
    ti, coord, formula = formulas[0]
    # openpyxl wrote the file: no cached values, so a formula cell reads empty (as in
    # archipelago), and computed only with the named option
    one = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=ti, cell_range=coord)
    assert one == f"{{'cell': '{coord}', 'value': None}}"
    monkeypatch.setenv("APEXRL_EXCEL_COMPUTE_FORMULAS", "1")
    computed = _py(s.text("excel_read_tab", file_path=f["xlsx"], tab_index=ti, cell_range=coord))
    assert computed["value"] is not None and "#" not in str(computed["value"])
    monkeypatch.delenv("APEXRL_EXCEL_COMPUTE_FORMULAS")
    withf = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=ti, include_formulas=True)
    assert f"({formula})" in withf
    csvish = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=0, compact=True, max_rows=2)
    assert len(csvish.splitlines()) == 2 and "\t" not in csvish
    cut = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=0, max_rows=2)
    assert "truncated to 2 rows" in cut and cut.endswith(lines[4])
    rng = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=0, cell_range="b2:c3")
    assert rng.splitlines()[:3] == ["Range: B2:C3", "Table:", "\tB\tC"]
    assert rng.splitlines()[3].startswith("2\t")
    # failures are ordinary results, as archipelago's sheets server gives them
    n = len(tabs)
    out = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=99)
    assert out == f"Tab index 99 is out of range. Available sheets: {n}"
    assert s.text("excel_read_tab", file_path=f["csv"], tab_index=0) == (
        "File path must end with .xlsx"
    )
    assert s.text("excel_read_tab", file_path="/no.xlsx", tab_index=0) == "File not found: /no.xlsx"
    csv_text = s.text("excel_read_csv", file_path=f["csv"], row_limit=2)
    assert csv_text.startswith(f"File: {f['csv']}\n") and "Rows: 2, Columns:" in csv_text
    header = (root / "filesystem" / f["csv"][1:]).read_text().splitlines()[0].split(",")
    assert "H\t" + "\t".join(header) in csv_text
    assert s.text("excel_read_csv", file_path=f["csv"], encoding="nope-enc") == (
        "Unexpected error reading CSV: LookupError('unknown encoding: nope-enc')"
    )
    assert s.text("excel_read_csv", file_path="/no.csv") == "File not found: /no.csv"
    assert s.text("excel_read_csv", file_path=f["txt"]) == "File path must end with .csv"
    compact = s.text("excel_read_csv", file_path=f["csv"], row_limit=1, compact=True)
    assert compact == "\r\n".join((root / "filesystem" / f["csv"][1:]).read_text().splitlines()[:2])
    # filter on the first header column: a value from the first data row matches
    first = s.text("excel_read_tab", file_path=f["xlsx"], tab_index=0, compact=True)
    rows = [r.split(",") for r in first.splitlines()[0:2]]
    hit = s.text(
        "excel_filter_tab",
        file_path=f["xlsx"],
        tab_index=0,
        filters=[{"column": rows[0][0], "operator": "equals", "value": rows[1][0]}],
    )
    hl = hit.splitlines()
    assert hl[:2] == ["Range: all", "Filters applied: 1"] and hl[2].startswith("Rows matched: 1/")
    assert hl[5].startswith("H\t") and hl[6].startswith("2\t")
    nonum = s.text(
        "excel_filter_tab",
        file_path=f["xlsx"],
        tab_index=0,
        filters=[{"column": "A", "operator": "is_empty"}],
        use_headers=False,
        include_diagnostics=True,
    )
    assert nonum.startswith("Range: all")
    err = s.error(
        "excel_filter_tab",
        file_path=f["xlsx"],
        tab_index=0,
        filters=[{"column": "No Such Header", "operator": "equals", "value": 1}],
    )
    assert "unknown column" in err


def test_excel_write(arch):
    s, root, f = arch
    import openpyxl

    created = s.text(
        "excel_create_spreadsheet",
        directory="/outputs",
        file_name="summary.xlsx",
        sheets=[
            {"name": "Data", "headers": ["Item", "Value"], "rows": [["a", 2], ["b", 3]]},
            {"name": "Calc", "rows": [["=SUM(Data!B2:B3)"]]},
        ],
    )
    assert _py(created) == {
        "status": "success",
        "file_name": "summary.xlsx",
        "file_path": "/outputs/summary.xlsx",
        "sheets_created": 2,
    }
    path = "/outputs/summary.xlsx"
    # a workbook this server wrote reads with its formulas' values (archipelago
    # recalculates what it writes)
    one = s.text("excel_read_tab", file_path=path, tab_index=1, cell_range="A1")
    assert one == "{'cell': 'A1', 'value': 5}"
    assert "already exists" in s.error(
        "excel_create_spreadsheet",
        directory="/outputs",
        file_name="summary.xlsx",
        sheets=[{"name": "X"}],
    )
    added = s.text("excel_add_content_text", file_path=path, tab_index=0, cell="C1", value="Note")
    assert _py(added) == {"status": "success", "cell": "C1", "tab_index": 0, "file_path": path}
    assert "not empty" in s.error(
        "excel_add_content_text", file_path=path, tab_index=0, cell="A1", value="x"
    )
    gone = _py(s.text("excel_delete_content_cell", file_path=path, tab_index=0, cell="C1"))
    assert gone["old_value"] == "Note"
    s.text(
        "excel_add_tab",
        file_path=path,
        tab_name="Extra",
        sheet_data={"headers": ["k"], "rows": [["v"]]},
    )
    assert "already exists" in s.error("excel_add_tab", file_path=path, tab_name="Extra")
    s.text(
        "excel_edit_spreadsheet",
        file_path=path,
        operations=[
            {"type": "set_cell", "sheet": "Data", "cell": "B2", "value": 10},
            {"type": "append_rows", "sheet": "Data", "rows": [["c", 4]]},
            {"type": "rename_sheet", "sheet": "Extra", "new_name": "Notes"},
            {"type": "format_cells", "sheet": "Data", "range": "A1:B1", "font_bold": True},
            {"type": "set_number_format", "sheet": "Data", "range": "B2:B4", "format": "0.00"},
        ],
    )
    assert "operations[0]" in s.error(
        "excel_edit_spreadsheet",
        file_path=path,
        operations=[{"type": "set_cell", "sheet": "Nope", "cell": "A1", "value": 1}],
    )
    s.text(
        "excel_create_chart",
        file_path=path,
        sheet="Data",
        data_range="A1:B4",
        chart_type="bar",
        title="Values",
        position="E2",
    )
    assert "bounded range" in s.error(
        "excel_create_chart", file_path=path, sheet="Data", data_range="A1"
    )
    wb = openpyxl.load_workbook(root / "filesystem" / "outputs" / "summary.xlsx")
    assert wb.sheetnames == ["Data", "Calc", "Notes"]
    ws = wb["Data"]
    assert ws["B2"].value == 10 and ws["A4"].value == "c" and ws["C1"].value is None
    assert ws["A1"].font.bold and ws["B3"].number_format == "0.00" and len(ws._charts) == 1
    assert s.text("excel_read_tab", file_path=path, tab_index=1, cell_range="A1") == (
        "{'cell': 'A1', 'value': 13}"
    )
    s.text("excel_delete_tab", file_path=path, tab_index=2)
    assert "only tab" not in s.error("excel_delete_tab", file_path=path, tab_index=5)
    s.text("excel_delete_spreadsheet", file_path=path)
    assert not (root / "filesystem" / "outputs" / "summary.xlsx").exists()


def _rpc_error(s: Session, name: str, **args) -> str:
    """The message of the JSON-RPC error a call is answered with (archipelago's servers
    raise some failures as protocol errors, not results)."""
    from mcp.shared.exceptions import MCPError

    try:
        s.call(name, **args)
    except BaseException as e:  # the client raises it inside a task group
        todo = [e]
        while todo:
            x = todo.pop()
            if isinstance(x, MCPError):
                return x.error.message
            todo += list(getattr(x, "exceptions", []))
        raise
    raise AssertionError(f"{name} answered without an error")


def test_word(arch, monkeypatch):
    """The documents server's reports, as archipelago writes them (their exact bytes are
    checked against the peer in tests/peer); failures are ordinary one-line results."""
    s, root, f = arch
    ov = s.text("word_get_document_overview", file_path=f["docx"])
    assert ov.startswith(f"Document Overview: {f['docx']}\n{'=' * 80}\n\nStatus: success\n")
    assert "Document Structure (headings):" in ov and "[body.p.0]" in ov
    doc = s.text("word_read_document_content", file_path=f["docx"])
    assert "PAGINATION: Total 1 pages (use page_index 0 to 0)" in doc and "[body.p.0]" in doc
    assert s.text("word_read_document_content", file_path=f["docx"], page_index=9) == (
        "Invalid page_index: 9. Document has 1 pages (0 to 0)."
    )
    assert s.text("word_read_document_content", file_path="/no.docx") == "File not found: /no.docx"
    assert s.text("word_get_document_overview", file_path="x.docx") == (
        "File path must start with /"
    )
    made = s.text(
        "word_create_document",
        directory="/outputs",
        file_name="memo.docx",
        content=[
            {"type": "heading", "text": "Memo", "level": 1},
            {"type": "paragraph", "text": "First point."},
            {"type": "bullet_list", "items": ["one", "two"]},
            {"type": "table", "rows": [["k", "v"], ["a", "1"]]},
        ],
        metadata={"title": "Memo", "author": "Agent"},
    )
    assert made == "Document memo.docx created at /outputs/memo.docx"
    # archipelago replaces an existing file; APEXRL_OFFICE_REFUSE_OVERWRITE=1 refuses
    again = dict(
        directory="/outputs", file_name="memo.docx", content=[{"type": "heading", "text": "Memo"}]
    )
    monkeypatch.setenv("APEXRL_OFFICE_REFUSE_OVERWRITE", "1")
    assert s.text("word_create_document", **again).startswith(
        "File already exists: /outputs/memo.docx"
    )
    refused = s.json(
        "powerpoint_create_deck",
        directory="/outputs",
        file_name="memo.pptx",
        slides=[{"title": "x"}],
    )
    assert refused["success"]
    assert (
        "File already exists"
        in s.json(
            "powerpoint_create_deck",
            directory="/outputs",
            file_name="memo.pptx",
            slides=[{"title": "y"}],
        )["error"]
    )
    monkeypatch.delenv("APEXRL_OFFICE_REFUSE_OVERWRITE")
    s.text("powerpoint_delete_deck", file_path="/outputs/memo.pptx")
    m = "/outputs/memo.docx"
    added = s.text("word_add_content_text", file_path=m, identifier="body.p.1", text=" Added.")
    assert added.endswith(
        "Target: paragraph [body.p.1]\nPosition: end\n\nUpdated Text "
        f"Preview:\n{'-' * 80}\nFirst point. Added.\n"
    )
    s.text("word_edit_content_text", file_path=m, identifier="body.p.2", new_text="uno")
    edited = s.text(
        "word_edit_content_text", file_path=m, identifier="body.tbl.0.r.1.c.1", new_text="42"
    )
    assert "Target: cell [body.tbl.0.r.1.c.1]" in edited and "Old Text: 1\n\nNew Text: 42" in edited
    s.text("word_delete_content_text", file_path=m, identifier="body.p.3", scope="element")
    assert "Identifier must start with 'body', 'header', or 'footer'" in s.text(
        "word_edit_content_text", file_path=m, identifier="p3", new_text="x"
    )
    assert s.text("word_add_content_text", file_path=m, identifier="body.p.99", text="x").endswith(
        "Error: IndexError('list index out of range')"
    )
    turned = s.text("word_page_orientation", file_path=m, action="set", orientation="landscape")
    assert "Orientation: portrait -> landscape" in turned
    assert s.text("word_page_orientation", file_path=m, action="set") == (
        "Orientation is required for 'set' action"
    )
    margins = s.text("word_page_margins", file_path=m, action="set", left=1.5)
    assert "  Left: 1.25 -> 1.5" in margins
    assert "  Left: 1.5\n" in s.text("word_page_margins", file_path=m, action="read")
    assert "At least one margin" in s.text("word_page_margins", file_path=m, action="set")
    fmt = s.text(
        "word_apply_formatting",
        file_path=m,
        identifier="body.p.1",
        bold=True,
        font_size=14,
        font_color="#FF0000",
    )
    assert fmt.endswith("bold: True\nfont_size: 14.0\nfont_color: FF0000\n")
    assert "6-hex RGB" in s.text(
        "word_apply_formatting", file_path=m, identifier="body.p.1", font_color="red"
    )
    hf = s.text(
        "word_header_footer",
        file_path=m,
        action="set",
        area="header",
        content=[{"type": "paragraph", "text": "Confidential"}],
    )
    assert "Blocks Added: 1" in hf
    read = s.text("word_header_footer", file_path=m, action="read", area="header")
    assert "Linked to Previous: False" in read and "[header.s.0.p.0]: Confidential" in read
    from PIL import Image as _Img

    _Img.new("RGB", (10, 6), "blue").save(root / "filesystem" / "outputs" / "sig.png")
    assert (
        s.text(
            "word_add_image",
            file_path=m,
            image_path="/outputs/sig.png",
            identifier="body.p.0",
            width=1.0,
        )
        == "Image added to body.p.0 at position end"
    )
    assert (
        s.text("word_add_image", file_path=m, image_path=f["csv"], identifier="body.p.0")
        == "Unsupported image format: csv. Supported formats: jpg, jpeg, png"
    )
    assert _rpc_error(s, "word_read_image", file_path=m, annotation="body_p_0_r1") == (
        f"Internal error: Error calling tool 'read_image': Image not found in cache for file "
        f"'{m}' with annotation 'body_p_0_r1'. Make sure you've called read_document_content "
        "first to extract images."
    )
    listing = s.text("word_read_document_content", file_path=m)
    key = re.search(r"IMAGE @(body_p_\d+_r\d+)", listing).group(1)
    shown = s.call("word_read_image", file_path=m, annotation=key)
    assert shown.content[0].mime_type == "image/jpeg"
    assert _Img.open(io.BytesIO(_image(shown))).size == (10, 6)
    assert (
        s.text("word_modify_image", file_path=m, image_index=0, operation="rotate", rotation=90)
        == f"Image 0 at {key.replace('_', '.').replace('.r', '.r.')} rotated 90°"
    )
    assert "out of range (0-0)" in s.text(
        "word_modify_image", file_path=m, image_index=3, operation="flip", flip="vertical"
    )
    added = s.text(
        "word_comments",
        file_path=m,
        action="add",
        identifier="body.p.1",
        text="Check this",
        author="Agent",
    )
    assert "Comment ID: 0\nTarget: body.p.1\nAuthor: Agent\nText: Check this" in added
    assert "Comment Count: 1" in s.text("word_comments", file_path=m, action="read")
    s.text("word_comments", file_path=m, action="delete", comment_id=0)
    assert "No comments in document." in s.text("word_comments", file_path=m, action="read")
    assert s.text("word_comments", file_path=m, action="delete", comment_id=99) == (
        "Comment with id 99 not found"
    )
    import docx

    d = docx.Document(str(root / "filesystem" / "outputs" / "memo.docx"))
    texts = [p.text for p in d.paragraphs]
    assert texts == ["Memo", "First point. Added.", "uno"]
    assert d.tables[0].cell(1, 1).text == "42" and d.core_properties.author == "Agent"
    assert d.sections[0].page_width > d.sections[0].page_height
    assert d.inline_shapes and abs(d.inline_shapes[0].width.inches - 1.0) < 0.01
    rid = next(
        b.get("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed")
        for b in d.element.body.iter()
        if b.tag.endswith("}blip")
    )
    rotated = _Img.open(io.BytesIO(d.part.related_parts[rid].blob))
    assert rotated.size == (6, 10)  # rotated 90 degrees
    run = d.paragraphs[1].runs[0]
    assert run.bold and run.font.size.pt == 14 and str(run.font.color.rgb) == "FF0000"
    assert d.sections[0].header.paragraphs[0].text == "Confidential"
    assert s.text("word_delete_document", file_path=m) == f"Document {m} deleted successfully"
    assert s.text("word_delete_document", file_path=m) == f"File not found: {m}"


def test_powerpoint(arch):
    s, root, f = arch

    def fails(name: str, **args) -> str:
        got = s.json(name, **args)
        assert got["success"] is False and list(got)[-1] == "error", got
        return got["error"]

    """The presentations server's compact JSON answers, as archipelago writes them (their
    exact bytes are checked against the peer in tests/peer)."""
    md = s.json("powerpoint_read_slides", file_path=f["pptx"], start=0, end=2000)
    assert md["success"] and md["content"].startswith("<!-- Slide number: 1 -->\n# ")
    assert list(md) == ["success", "content", "start", "end", "total_length", "error"]
    deck = s.json("powerpoint_read_completedeck", file_path=f["pptx"])
    assert deck["total_slides"] >= 2 and deck["slides"][0]["slide_index"] == 0
    one = s.json("powerpoint_read_individualslide", file_path=f["pptx"], slide_index=1)
    assert one["slide_index"] == 1 and one["components"]
    assert "out of range" in fails(
        "powerpoint_read_individualslide", file_path=f["pptx"], slide_index=99
    )
    assert fails("powerpoint_read_slides", file_path=f["pptx"], start=0, end=20001) == (
        "Invalid range: maximum range is 10,000 characters"
    )
    s.text(
        "powerpoint_create_deck",
        directory="/outputs",
        file_name="deck.pptx",
        slides=[
            {"layout": "title", "title": "Review", "subtitle": "Q3"},
            {"title": "Points", "bullets": {"items": ["alpha", "beta"]}, "notes": "say it"},
            {
                "layout": "title_and_content",
                "title": "Table",
                "table": {"rows": [["a", "b"], ["1", "2"]]},
            },
        ],
    )
    p = "/outputs/deck.pptx"
    s.text("powerpoint_add_slide", file_path=p, index=1, title="Inserted", bullets=["x"])
    assert "out of range" in fails("powerpoint_add_slide", file_path=p, index=9, title="n")
    s.text("powerpoint_insert_table", file_path=p, slide_index=2, rows=[["h1", "h2"], ["1", "2"]])
    assert "same number" in _rpc_error(
        s, "powerpoint_insert_table", file_path=p, slide_index=2, rows=[["a"], ["b", "c"]]
    )
    from PIL import Image
    from pptx import Presentation
    from pptx.util import Inches

    deck = root / "filesystem" / "outputs" / "deck.pptx"
    prs = Presentation(str(deck))
    titles = [sl.shapes.title.text for sl in prs.slides]
    assert titles == ["Review", "Inserted", "Points", "Table"]
    assert any(sh.has_table for sh in prs.slides[2].shapes)
    png = root / "filesystem" / "outputs" / "logo.png"
    Image.new("RGB", (6, 5), "green").save(png)
    prs.slides[0].shapes.add_picture(str(png), Inches(1), Inches(1))
    prs.save(str(deck))
    pic = next(
        x
        for x in s.json("powerpoint_read_individualslide", file_path=p, slide_index=0)["images"]
        if "annotation" in x
    )
    got = s.call("powerpoint_read_image", file_path=p, annotation=pic["annotation"])
    assert Image.open(io.BytesIO(_image(got))).size == (6, 5)
    assert "Image not found in cache" in _rpc_error(
        s, "powerpoint_read_image", file_path=p, annotation="slide0_img4"
    )
    s.text(
        "powerpoint_add_image",
        file_path=p,
        image_path="/outputs/logo.png",
        slide_index=1,
        width=2.0,
    )
    s.text(
        "powerpoint_add_shape",
        file_path=p,
        slide_index=1,
        shape_type="oval",
        fill_color="FF0000",
        text="Go",
        text_color="FFFFFF",
        font_size=18,
    )
    assert "valid hex string" in _rpc_error(
        s, "powerpoint_add_shape", file_path=p, slide_index=1, shape_type="star", fill_color="red"
    )
    tab = _first_tab(s, f["xlsx"])
    s.text(
        "powerpoint_insert_chart",
        presentation_path=p,
        slide_index=3,
        spreadsheet_path=f["xlsx"],
        sheet_name=tab,
        data_range="A1:C4",
        chart_type="line",
        title="Trend",
    )
    assert "not a number" in fails(
        "powerpoint_insert_chart",
        presentation_path=p,
        slide_index=3,
        spreadsheet_path=f["xlsx"],
        sheet_name=tab,
        data_range="A1:B4",
        include_header=False,
    )
    s.text(
        "powerpoint_edit_slides",
        file_path=p,
        operations=[
            {"type": "update_slide_title", "index": 2, "title": "Key points"},
            {"type": "append_bullets", "index": 2, "items": ["gamma"]},
            {"type": "replace_text", "search": "alpha", "replace": "ALPHA"},
            {"type": "set_notes", "index": 0, "notes": "open strong"},
            {
                "type": "update_table_cell",
                "index": 3,
                "table_idx": 0,
                "row": 1,
                "column": 0,
                "text": "9",
            },
            {"type": "duplicate_slide", "index": 0, "position": 1},
            {"type": "delete_slide", "index": 1},
        ],
        metadata={"author": "Agent"},
    )
    # a replace_text that matches nothing is applied without a failure, as the peer's is
    assert s.json(
        "powerpoint_edit_slides",
        file_path=p,
        operations=[{"type": "replace_text", "search": "zzz", "replace": "q"}],
    ) == {"success": True, "file_path": p, "operations_applied": 1, "error": None}
    assert (
        fails(
            "powerpoint_edit_slides",
            file_path=p,
            operations=[{"type": "set_notes", "index": 9, "notes": "x"}],
        )
        == "Slide index 9 is out of range"
    )
    prs = Presentation(str(deck))
    assert [sl.shapes.title.text for sl in prs.slides] == [
        "Review",
        "Inserted",
        "Key points",
        "Table",
    ]
    assert prs.slides[2].placeholders[1].text_frame.text.splitlines() == ["ALPHA", "beta", "gamma"]
    assert prs.slides[0].notes_slide.notes_text_frame.text == "open strong"
    assert prs.core_properties.author == "Agent"
    assert any(getattr(sh, "has_chart", False) and sh.has_chart for sh in prs.slides[3].shapes)
    kinds = [str(sh.shape_type) for sh in prs.slides[1].shapes]
    assert sum("PICTURE" in k for k in kinds) == 1 and any("AUTO" in k for k in kinds)
    table = next(sh for sh in prs.slides[3].shapes if getattr(sh, "has_table", False))
    assert table.table.cell(1, 0).text == "9"
    s.text(
        "powerpoint_modify_image",
        file_path=p,
        slide_index=1,
        image_index=0,
        operation="crop",
        crop_left=0,
        crop_top=0,
        crop_right=3,
        crop_bottom=2,
    )
    assert "crop_right" in fails(
        "powerpoint_modify_image",
        file_path=p,
        slide_index=1,
        image_index=0,
        operation="crop",
        crop_left=5,
        crop_top=0,
        crop_right=1,
        crop_bottom=2,
    )
    prs = Presentation(str(deck))
    pic = next(sh for sh in prs.slides[1].shapes if hasattr(sh, "image"))
    assert Image.open(io.BytesIO(pic.image.blob)).size == (3, 2)
    assert "ALPHA" in s.json("powerpoint_read_slides", file_path=p, end=5000)["content"]
    s.text("powerpoint_delete_deck", file_path=p)
    assert not (root / "filesystem" / "outputs" / "deck.pptx").exists()


def test_pdfs(arch):
    s, root, f = arch
    text = s.text("pdfs_read_pdf_pages", file_path=f["pdf"])
    # archipelago's layout: a header, then each page's text (layout kept) after [page N]
    assert text.startswith("[pdf: pages=") and "\n\n[page 1]\n" in text and len(text) > 200
    none = s.text("pdfs_read_pdf_pages", file_path=f["pdf"], pages=[99])
    assert none.startswith("[pdf: pages=") and ", read=0]" in none
    assert s.text("pdfs_read_pdf_pages", file_path="/no.pdf") == "File not found: /no.pdf"
    word = re.findall(r"[A-Za-z]{6,}", text.split("[page 1]", 1)[1])[0]
    hits = s.text("pdfs_search_pdf", file_path=f["pdf"], query=word.lower())
    assert re.match(rf'Found \d+ match\(es\) for "{word.lower()}":\n\n1\. \[Page 1, ', hits)
    assert word in hits.splitlines()[2]
    odd = word.swapcase()
    none = s.text("pdfs_search_pdf", file_path=f["pdf"], query=odd, case_sensitive=True)
    assert none == f'No matches found for "{odd}"'
    assert s.text("pdfs_search_pdf", file_path=f["pdf"], query=odd).startswith("Found ")
    assert s.text("pdfs_search_pdf", file_path="/no.pdf", query="x") == (
        "Search failed: File not found: /no.pdf"
    )
    from PIL import Image

    jpg = _image(s.call("pdfs_read_page_as_image", file_path=f["pdf"], page_number=1))
    im = Image.open(io.BytesIO(jpg))
    assert im.format == "JPEG" and im.size[0] > 1000  # 144 DPI: a letter page is 1224 px wide
    out = s.text("pdfs_read_page_as_image", file_path=f["pdf"], page_number=9)
    assert re.fullmatch(r"Page 9 is out of range \(PDF has \d+ page\(s\)\)", out)
    s.text(
        "pdfs_create_pdf",
        directory="/outputs",
        file_name="note.pdf",
        content=[
            {"type": "heading", "text": "Findings", "level": 1},
            {"type": "paragraph", "text": "Revenue grew 12%.", "bold": True},
            {"type": "bullet_list", "items": ["one", "two"]},
            {"type": "table", "rows": [["k", "v"], ["a", "1"]]},
            {"type": "page_break"},
            {"type": "paragraph", "text": "Second page."},
        ],
        metadata={"title": "Note"},
    )
    back = s.text("pdfs_read_pdf_pages", file_path="/outputs/note.pdf", pages=[1, 2])
    assert "Revenue grew 12%." in back and "Second page." in back
    assert back.startswith("[pdf: pages=2, read=2]")
    assert s.text(
        "pdfs_create_pdf", directory="/outputs", file_name="bad.pdf", content=[{"type": "video"}]
    ) == ("Unknown block type: video")
    # an embedded image: a PDF with a picture, read back by its annotation key
    from fpdf import FPDF

    img = root / "filesystem" / "outputs" / "dot.png"
    Image.new("RGB", (8, 8), "blue").save(img)
    doc = FPDF()
    doc.add_page()
    doc.image(str(img), x=10, y=10, w=20)
    doc.output(str(root / "filesystem" / "outputs" / "pic.pdf"))
    listed = s.text("pdfs_read_pdf_pages", file_path="/outputs/pic.pdf")
    assert "page1_img0" in listed
    got = Image.open(
        io.BytesIO(
            _image(s.call("pdfs_read_image", file_path="/outputs/pic.pdf", annotation="page1_img0"))
        )
    )
    assert got.size == (8, 8)
    assert "no page1_img5" in s.error(
        "pdfs_read_image", file_path="/outputs/pic.pdf", annotation="page1_img5"
    )


def test_mail(arch):
    s, root, _ = arch
    listed = s.text("mail_list_mails", limit=3)
    assert listed.startswith("Found 3 email(s):\n\n1. Mail ID: <")
    ids = re.findall(r"^\d+\. Mail ID: (<[^>]+>)$", listed, flags=re.M)
    assert len(ids) == 3 and re.search(r"^To: .+ \(\d+ recipient\(s\)\)$", listed, flags=re.M)
    full_text = s.text("mail_read_mail", mail_id=ids[0])
    lines = full_text.splitlines()
    assert lines[0] == f"Mail ID: {ids[0]}" and lines[1].startswith("Timestamp: ")
    assert "Body Format: plain" in lines and "Body:" in lines
    assert s.text("mail_read_mail", mail_id="<nope@x>") == "Mail not found with ID: <nope@x>"
    sender = lines[2].removeprefix("From: ")
    found = s.text("mail_search_mail", from_email=sender.split("@")[0])
    assert ids[0] in found
    assert s.text("mail_search_mail", after_date="2100-01-01T00:00:00+00:00") == "No emails found"
    assert s.text("mail_search_mail", before_date="yesterday").startswith(
        "Error: Invalid before_date format."
    )
    mbox = sorted((root / ".apps_data" / "mail").rglob("*.mbox"))[0]
    sent = s.text(
        "mail_send_mail",
        from_email="agent@example.com",
        to_email=["client@example.com", "cfo@example.com"],
        subject="Status",
        body="All on track.",
        cc="boss@example.com",
        attachments=["/README.md"],
    )
    m = re.fullmatch(r"Mail sent successfully! Mail ID: (<[^>]+>), Recipients: 3", sent)
    assert m, sent
    sent_id = m.group(1)
    bad = s.call("mail_send_mail", from_email="a@b", to_email="x@y.co", subject="s", body="b")
    assert bad.is_error and bad.content[0].text == (
        "Internal error: Validation error: input.from_email: "
        "Value error, Invalid from_email address"
    )
    r1 = s.text("mail_reply_mail", original_mail_id=ids[0], body="Thanks.")
    ra = s.text("mail_reply_all_mail", original_mail_id=ids[0], body="Thanks all.")
    fw = s.text("mail_forward_mail", original_mail_id=ids[0], to_email="x@example.com")
    r1_id, ra_id, fw_id = (re.search(r"Mail ID: (<[^>]+>)", t).group(1) for t in (r1, ra, fw))
    assert s.text("mail_reply_mail", original_mail_id="<none@x>", body="b") == (
        "Error: Original mail not found with ID: <none@x>"
    )
    msgs = {m["Message-ID"]: m for m in mailbox.mbox(str(mbox))}
    sm = msgs[sent_id]
    assert sm["From"] == "agent@example.com" and "cfo@example.com" in sm["To"]
    assert sm["X-Attachments"] == "/README.md" and sm["X-Thread-ID"] == sent_id
    first_to = lines[3].removeprefix("To: ").split(", ")
    assert msgs[r1_id]["In-Reply-To"] == ids[0] and msgs[r1_id]["From"] == first_to[0]
    assert msgs[r1_id]["Cc"] is None and msgs[r1_id]["To"] == sender
    if len(first_to) > 1:  # reply-all copies the other recipients
        assert msgs[ra_id]["Cc"]
    assert msgs[fw_id]["Subject"].startswith("Fwd:")
    assert "---------- Forwarded message ---------" in msgs[fw_id].get_payload(decode=True).decode()
    # the new mail reads back with its thread, the way archipelago shows it
    shown = s.text("mail_read_mail", mail_id=r1_id)
    assert f"Thread ID: {ids[0]}" in shown.splitlines()
    assert r1_id in s.text("mail_search_mail", thread_id=ids[0])


def test_chat(arch):
    s, root, _ = arch
    listed = s.text("chat_list_channels")
    assert listed.startswith('{"groups":[{"id":') and listed.endswith(',"error":null}')
    ch = json.loads(listed)["groups"][0]
    ch["channel_id"] = ch["id"]
    posted = s.json("chat_post_message", channel_id=ch["channel_id"], message="Draft is ready.")
    topic = posted["topic_id"]
    assert posted["message_id"] == f"{ch['channel_id']}/{topic}/{topic}"
    assert posted["is_reply"] is False and posted["created_date"].endswith(" UTC")
    hist = s.json("chat_get_channel_history", channel_id=ch["channel_id"])
    assert hist["messages"][0]["message_id"] == posted["message_id"]  # roots, newest first
    assert hist["messages"][0]["creator_email"] == "user@example.com"
    rep = s.json(
        "chat_reply_to_thread",
        channel_id=ch["channel_id"],
        post_id=posted["message_id"],
        message="Reviewing now.",
    )
    assert rep["topic_id"] == topic and rep["is_reply"] is True
    thread = s.json(
        "chat_get_thread_replies", channel_id=ch["channel_id"], post_id=posted["message_id"]
    )
    assert thread["root_post"]["message_id"] == posted["message_id"]
    assert [p["message_id"] for p in thread["posts"]] == [rep["message_id"]]
    react = s.json(
        "chat_add_reaction",
        channel_id=ch["channel_id"],
        post_id=posted["message_id"],
        emoji_name="👍",
    )
    assert react["user_id"] == "user@example.com" and react["emoji_name"] == "👍"
    again = s.call(
        "chat_add_reaction",
        channel_id=ch["channel_id"],
        post_id=posted["message_id"],
        emoji_name="👍",
    )
    assert again.is_error and again.content[0].text == (
        "Invalid params: Error calling tool 'add_reaction': "
        "You have already reacted with 👍 to this message"
    )
    gone = s.json("chat_delete_post", channel_id=ch["channel_id"], post_id=rep["message_id"])
    assert gone == {
        "post_id": rep["message_id"],
        "deleted_replies": 1,
        "deleted_reactions": 0,
        "error": None,
    }
    missing = s.call("chat_get_channel_history", channel_id="nope")
    assert missing.is_error and missing.content[0].text == (
        "Invalid params: Error calling tool 'get_channel_history': "
        "Error getting group history: Group nope not found"
    )
    assert "Message x not found" in s.error(
        "chat_delete_post", channel_id=ch["channel_id"], post_id="x"
    )
    users = s.json("chat_get_users", limit=2)
    assert users["total_count"] >= 2 and len(users["users"]) == 2
    u = users["users"][0]
    assert u["username"] == u["email"].split("@")[0] and u["is_bot"] is False
    prof = s.json("chat_get_user_profile", user_id=u["id"])
    assert prof["email"] == u["email"] and list(prof)[-1] == "error"
    assert "no user" in s.error("chat_get_user_profile", user_id="ghost")
    data = json.loads(
        (root / ".apps_data/chat/Groups" / ch["channel_id"] / "messages.json").read_text()
    )
    by_id = {m["message_id"]: m for m in data["messages"]}
    assert by_id[posted["message_id"]]["reactions"][0] == {
        "emoji": {"unicode": "👍"},
        "reactor_emails": ["user@example.com"],
    }
    assert by_id[rep["message_id"]]["message_state"] == "DELETED"
    assert by_id[rep["message_id"]]["deletion_metadata"] == {"deletion_type": "CREATOR"}


def test_calendar(arch):
    s, root, _ = arch
    evs = s.text("calendar_list_events", limit=2)
    assert evs.startswith("Found 2 event(s):\n\n1. Event ID: ")
    first_id = re.search(r"^1\. Event ID: (\S+)$", evs, flags=re.M).group(1)
    summary = re.search(r"^Summary: (.*)$", evs, flags=re.M).group(1)
    one = s.text("calendar_read_event", event_id=first_id).splitlines()
    assert one[:2] == [f"Event ID: {first_id}", f"Summary: {summary}"]
    assert one[-2].startswith("Created: ") and one[-1].startswith("Updated: ")
    made = s.text(
        "calendar_create_event",
        summary="Agent check-in",
        start={"dateTime": "2025-10-01T09:00:00-04:00"},
        end={"dateTime": "2025-10-01T09:30:00-04:00"},
        attendees=[{"email": "a@example.com", "displayName": "A"}],
    )
    new_id = re.fullmatch(
        r"Event created successfully \(Event ID: (\d{8}_\d{6}_\d{6}_\w{6})\)", made
    )
    assert new_id, made
    new_id = new_id.group(1)
    assert (root / ".apps_data/calendar/calendar.ics").is_file()  # where new events go
    upd = s.text("calendar_update_event", event_id=new_id, location="Room 4")
    assert upd == f"Event updated successfully (Event ID: {new_id})"
    shown = s.text("calendar_read_event", event_id=new_id).splitlines()
    assert "Location: Room 4" in shown and "Summary: Agent check-in" in shown
    # as archipelago: the offset becomes a TZID the reader does not map back
    assert "Start: 2025-10-01T09:00:00" in shown and "  - A" in shown
    empty = s.call("calendar_update_event", event_id=new_id, summary=" ")
    assert empty.is_error and empty.content[0].text.endswith("Summary cannot be empty")
    allday = s.text(
        "calendar_create_event",
        summary="Offsite",
        start={"date": "2025-11-03"},
        end={"date": "2025-11-04"},
    )
    allday_id = allday.split("Event ID: ")[1].rstrip(")")
    assert s.text("calendar_delete_event", event_id=allday_id) == (
        f"Event deleted successfully (Event ID: {allday_id})"
    )
    assert s.text("calendar_delete_event", event_id=allday_id) == (
        f"Failed: Event not found with ID: {allday_id}"
    )
    gone = s.call("calendar_read_event", event_id=allday_id)
    assert gone.is_error and gone.content[0].text == (
        f"Invalid params: Error calling tool 'read_event': Event not found with ID: {allday_id}"
    )
    ics = "".join(p.read_text() for p in (root / ".apps_data/calendar").glob("*.ics"))
    assert "Agent check-in" in ics and "Room 4" in ics and "Offsite" not in ics


def test_world_tools_command(example):
    out, world = example
    zpath = out / "world_files_zipped" / f"{world['world_id']}.zip"
    r = CliRunner().invoke(app, ["world", "tools", str(zpath), "--json"])
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in r.stdout.splitlines()]
    names = [x["name"] for x in recs]
    assert set(names) >= RECIPE_NAMES
    code = next(x for x in recs if x["name"] == "code_execution_code_exec")
    assert code["server"] == "code_execution" and "code" in code["input_schema"]["properties"]
    tab = next(x for x in recs if x["name"] == "excel_read_tab")
    assert tab["input_schema"]["required"] == ["file_path", "tab_index"]
    filt = next(x for x in recs if x["name"] == "excel_filter_tab")
    assert "$defs" not in json.dumps(filt["input_schema"])  # flat, as archipelago lists them
    assert "\n    " not in tab["description"]
    # one surface: archipelago's (the earlier apexrl names are gone, the option with them)
    assert set(SURFACES) == {"archipelago"}
    gone = CliRunner().invoke(app, ["world", "tools", str(zpath), "--surface", "apexrl"])
    assert gone.exit_code == 2


def test_world_tools_names_a_server_that_cannot_come_up(example, tmp_path):
    from apexrl.worlds.world import open_world

    out, world = example
    wd = tmp_path / "w"
    open_world(out / "world_files_zipped" / f"{world['world_id']}.zip", workdir=wd)
    next((wd / ".apps_data" / "calendar").glob("*.ics")).write_text("BEGIN:VCALENDAR\nnot ics")
    r = CliRunner().invoke(app, ["world", "tools", str(wd), "--json"])
    assert r.exit_code == 1 and "calendar" in r.stderr and "did not come up" in r.stderr
    names = [json.loads(line)["name"] for line in r.stdout.splitlines()]
    assert "excel_read_tab" in names and not any(n.startswith("calendar_") for n in names)
    ok = CliRunner().invoke(app, ["world", "tools", str(wd), "--apps", "excel,pdfs", "--json"])
    assert ok.exit_code == 0, ok.output
    assert {json.loads(x)["server"] for x in ok.stdout.splitlines()} == {"excel", "pdfs"}
