"""The world gateway through a real MCP client session over streamable HTTP."""

from __future__ import annotations

import mailbox
import time

import httpx
import pytest

from apexrl.errors import ApexError
from apexrl.worlds.gateway import build_gateway, serve_in_thread, tool_name
from apexrl.worlds.snapshot import diff, snapshot
from apexrl.worlds.world import SERVERS, open_world
from tests.worlds.conftest import OWNER


def test_tools_listed_with_server_prefix(served):
    s, _ = served
    names = s.tools()
    assert "mail_send" in names and "sheets_read_range" in names and "code_run" in names
    assert all(n.split("_", 1)[0] in SERVERS for n in names)
    assert tool_name("mail", "send", 1) == "send"


def test_health(served):
    s, _ = served
    r = httpx.get(s.url.replace("/mcp/", "/health"), timeout=5)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert set(body["servers"]) == set(SERVERS)
    assert all(v["ok"] for v in body["servers"].values())


def test_files_read_only_and_confined(served):
    s, _ = served
    tree = s.text("files_tree")
    assert "Reports/" in tree and "memo.docx" in tree
    assert "Quarterly close" in s.text("files_read", path="notes.txt")
    assert "Revenue grew" in s.text("files_read", path="/Reports/memo.docx")  # converted
    hits = s.json("files_search", pattern="*.xlsx")
    assert [h["path"] for h in hits] == ["Reports/model.xlsx"]
    hits = s.json("files_search", content="90 days")
    assert [h["path"] for h in hits] == ["Reports/contract.pdf"]
    assert s.json("files_info", path="Reports")["entries"] == 5
    for bad in ("../../etc/passwd", "/../secret", "Reports/../../x"):
        assert "outside the world" in s.error("files_read", path=bad)
    assert not any(
        n.startswith("files_") and n.split("_", 1)[1] in ("write", "delete") for n in s.tools()
    )


def test_sheets_formulas_and_edits(served):
    s, root = served
    tabs = s.json("sheets_list_tabs", path="Reports/model.xlsx")
    assert [t["tab"] for t in tabs] == ["Model", "Notes"]
    cells = {
        c["cell"]: c
        for c in s.json("sheets_read_range", path="Reports/model.xlsx", range="A1:D4")["cells"]
    }
    assert cells["B4"]["formula"] == "=SUM(B2:B3)"
    assert cells["B4"]["value"] == 150  # no cached value in the file: recomputed
    assert cells["D4"]["value"] == pytest.approx(175 / 150 - 1)
    assert cells["D4"]["formula"] == "=C4/B4-1"
    assert cells["B2"]["value"] == 100
    s.text(
        "sheets_edit_cells",
        path="Reports/model.xlsx",
        edits=[{"cell": "B2", "value": 110}, {"cell": "E4", "value": "=B4*2"}],
    )
    cells = {
        c["cell"]: c
        for c in s.json("sheets_read_range", path="Reports/model.xlsx", range="B2:E4")["cells"]
    }
    assert cells["B2"]["value"] == 110 and cells["E4"]["formula"] == "=B4*2"
    assert cells["E4"]["value"] == 320
    s.text("sheets_add_tab", path="Reports/model.xlsx", tab="Scenario", rows=[["x", 1]])
    assert "Scenario" in [t["tab"] for t in s.json("sheets_list_tabs", path="Reports/model.xlsx")]
    s.text("sheets_create", path="Out/new.xlsx", rows=[["a", "b"], [1, 2]])
    assert (root / "filesystem" / "Out" / "new.xlsx").is_file()
    csv = s.json("sheets_read_range", path="Reports/people.csv")
    assert {"cell": "A2", "value": "Ana"} in csv["cells"]


def test_docs_edit(served):
    s, root = served
    ov = s.json("docs_overview", path="Reports/memo.docx")
    assert ov["paragraphs"] == 3 and ov["headings"][0]["text"] == "Board memo"
    page = s.text("docs_read", path="Reports/memo.docx", page=1)
    assert "[1] Revenue grew 12%" in page
    s.text("docs_edit_text", path="Reports/memo.docx", paragraph=1, find="12%", replace="15%")
    s.text("docs_add_text", path="Reports/memo.docx", text="Approved by the board.")
    s.text("docs_delete_text", path="Reports/memo.docx", paragraph=2)  # "Headcount is flat."
    import docx

    texts = [p.text for p in docx.Document(str(root / "filesystem/Reports/memo.docx")).paragraphs]
    assert texts == ["Board memo", "Revenue grew 15% year on year.", "Approved by the board."]
    s.text("docs_create", path="Drafts/letter.docx", title="Letter", paragraphs=["Dear Bo,"])
    assert "Dear Bo," in s.text("docs_read", path="Drafts/letter.docx")
    assert "already exists" in s.error("docs_create", path="Drafts/letter.docx")


def test_slides_and_pdf(served):
    s, root = served
    deck = s.json("slides_read_deck", path="Reports/deck.pptx")
    assert deck["slides"][0]["title"] == "Q3 review" and "Revenue up" in deck["slides"][0]["text"]
    s.text(
        "slides_add_slide", path="Reports/deck.pptx", title="Next steps", bullets=["Hire", "Ship"]
    )
    sl = s.json("slides_read_slide", path="Reports/deck.pptx", slide=2)
    assert sl["title"] == "Next steps" and "Hire\nShip" in sl["text"]
    s.text(
        "slides_create_deck", path="Out/pitch.pptx", slides=[{"title": "Hello", "bullets": ["a"]}]
    )
    assert (root / "filesystem/Out/pitch.pptx").is_file()
    pages = s.json("pdf_read_pages", path="Reports/contract.pdf")
    assert pages["n_pages"] == 2 and "Master agreement" in pages["pages"][0]["text"]
    hits = s.json("pdf_search", path="Reports/contract.pdf", query="termination")
    assert [h["page"] for h in hits["matches"]] == [2]


def test_mail_send_reply_forward(served):
    s, root = served
    listed = s.json("mail_list")
    assert listed["total"] >= 2
    m2 = s.json("mail_read", message_id="<m2@acme.test>")
    assert m2["thread_id"] == "<m1@acme.test>" and m2["thread"][0]["message_id"] == "<m1@acme.test>"
    sent = s.json(
        "mail_send", to=["dana@globex.test"], subject="Contract question", body="Is clause 4 final?"
    )
    assert sent["from"] == OWNER
    rep = s.json(
        "mail_reply", message_id="<m2@acme.test>", body="Thanks, looks good.", reply_all=True
    )
    assert "bo.chen@acme.test" in rep["cc"]
    fwd = s.json("mail_forward", message_id="<m1@acme.test>", to=["eve@acme.test"], body="FYI")
    box = mailbox.mbox(str(root / ".apps_data/mail/inbox.mbox"))
    by_id = {m["Message-ID"]: m for m in box}
    box.close()
    new = by_id[sent["message_id"]]
    assert new["To"] == "dana@globex.test" and "clause 4" in new.get_payload()
    r = by_id[rep["message_id"]]
    assert r["In-Reply-To"] == "<m2@acme.test>" and r["References"].split() == [
        "<m1@acme.test>",
        "<m2@acme.test>",
    ]
    assert r["Subject"] == "Re: Budget review"
    assert by_id[fwd["message_id"]]["Subject"] == "Fwd: Budget review"
    found = s.json("mail_search", query="clause 4", field="body")
    assert [m["message_id"] for m in found["messages"]] == [sent["message_id"]]
    thread = s.json("mail_read", message_id=rep["message_id"])
    assert thread["thread_id"] == "<m1@acme.test>"


def test_chat_post_reply_react(served):
    s, root = served
    chans = s.json("chat_list_channels")
    assert chans[0]["space_id"] == "space_fin" and chans[0]["name"] == "Finance team"
    posted = s.json("chat_post", space_id="space_fin", text="Numbers are in")
    assert posted["from"] == "Ana Ruiz"
    rep = s.json("chat_reply", space_id="space_fin", topic_id="t1", text="On it")
    s.json("chat_react", space_id="space_fin", message_id="space_fin/001", emoji="👍")
    hist = s.json("chat_history", space_id="space_fin")
    assert [m["text"] for m in hist["messages"]][-2:] == ["Numbers are in", "On it"]
    th = s.json("chat_thread", space_id="space_fin", topic_id="t1")
    assert [m["text"] for m in th["messages"]] == ["Close starts Monday", "On it"]
    assert th["messages"][0]["reactions"] == [{"emoji": "👍", "users": [OWNER]}]
    assert rep["topic_id"] == "t1"
    assert "no chat space" in s.error("chat_post", space_id="../../mail", text="x")
    import json

    stored = json.loads((root / ".apps_data/chat/Groups/space_fin/messages.json").read_text())
    assert stored["messages"][-1]["creator"] == {"name": "Ana Ruiz", "email": OWNER}


def test_calendar_crud(served):
    s, root = served
    ev = s.json(
        "calendar_create",
        summary="Board prep",
        start="2025-03-05T10:00:00Z",
        end="2025-03-05T11:00:00Z",
        attendees=["bo.chen@acme.test"],
        location="Room 4",
    )
    assert "Board prep" in (root / ".apps_data/calendar/work.ics").read_text()
    got = s.json("calendar_read", uid=ev["uid"])
    assert got["attendees"] == ["bo.chen@acme.test"] and got["start"].startswith("2025-03-05T10:00")
    listed = s.json("calendar_list", start="2025-03-05", end="2025-03-06")
    assert [e["summary"] for e in listed["events"]] == ["Board prep"]
    s.json(
        "calendar_update",
        uid=ev["uid"],
        summary="Board prep (moved)",
        start="2025-03-05T12:00:00Z",
        end="2025-03-05T13:00:00Z",
    )
    assert s.json("calendar_read", uid=ev["uid"])["summary"] == "Board prep (moved)"
    s.text("calendar_delete", uid=ev["uid"])
    assert "no event" in s.error("calendar_read", uid=ev["uid"])
    assert [e["uid"] for e in s.json("calendar_list")["events"]] == ["ev-1"]


def test_code_run_timeout_and_cap(served):
    s, root = served
    r = s.json("code_run", command="pwd; python3 -c 'print(6*7)'")
    assert r["exit_code"] == 0 and r["stdout"].splitlines() == [
        str((root / "filesystem").resolve()),
        "42",
    ]
    t0 = time.monotonic()
    r = s.json("code_run", command="echo started; sleep 30; echo never", timeout_s=1)
    assert r["timed_out"] is True and r["exit_code"] is None
    assert r["stdout"].strip() == "started"
    assert time.monotonic() - t0 < 10
    r = s.json("code_run", command="python3 -c \"print('x' * 100000)\"")
    assert len(r["stdout"]) < 21_000 and "characters omitted" in r["stdout"]
    r = s.json("code_run", command="exit 3")
    assert r["exit_code"] == 3


def test_snapshot_diff_reports_exactly_the_changes(fresh_served, tmp_path):
    s, root = fresh_served
    before = snapshot(root, tmp_path / "before.tar")
    assert before.n_files == 12
    s.text("docs_edit_text", path="Reports/memo.docx", paragraph=1, text="Revenue grew 20%.")
    s.json("mail_send", to=["x@y.test"], subject="s", body="b")
    s.json("chat_post", space_id="space_fin", text="hello")
    s.json("calendar_create", summary="New", start="2025-04-01T09:00:00Z")
    s.text("sheets_create", path="Out/result.xlsx", rows=[["a"]])
    s.json("code_run", command="rm notes.txt")
    after = snapshot(root, tmp_path / "after.tar.gz")
    d = diff(tmp_path / "before.tar", tmp_path / "after.tar.gz")
    assert [c.path for c in d.created] == ["filesystem/Out/result.xlsx"]
    assert [c.path for c in d.deleted] == ["filesystem/notes.txt"]
    assert [c.path for c in d.modified] == [
        ".apps_data/calendar/work.ics",
        ".apps_data/chat/Groups/space_fin/messages.json",
        ".apps_data/mail/inbox.mbox",
        "filesystem/Reports/memo.docx",
    ]
    assert before.sha256 != after.sha256
    # a live folder compares the same as its snapshot
    assert diff(tmp_path / "after.tar.gz", root).changes == []


def test_readiness_fails_loudly_on_bad_server_data(world_dir):
    (world_dir / ".apps_data/chat/Groups/space_fin/messages.json").write_text("{not json")
    w = open_world(world_dir)
    with pytest.raises(ApexError) as e:
        build_gateway(w)
    assert "chat" in str(e.value) and "messages.json" in str(e.value)
    gw = build_gateway(w, strict=False)
    with serve_in_thread(gw) as r:
        h = httpx.get(r.health_url, timeout=5)
        assert h.status_code == 503
        assert h.json()["servers"]["chat"]["ok"] is False
        assert httpx.get(r.health_url.replace("/health", "/ready"), timeout=5).status_code == 503


def test_single_server_tools_are_unprefixed(world_dir):
    from tests.worlds.conftest import Session

    w = open_world(world_dir, apps=["mail"])
    with serve_in_thread(build_gateway(w, surface="apexrl")) as r:
        s = Session(r.url)
        assert sorted(s.tools()) == ["forward", "list", "read", "reply", "search", "send"]
        assert s.json("list")["total"] == 2


def test_listening_socket_is_tcp_so_responses_are_not_delayed():
    # asyncio sets TCP_NODELAY on accepted sockets only when proto is TCP; without it
    # every keep-alive response waited ~40 ms (Nagle + delayed ACK).
    import socket

    from apexrl.worlds.gateway import bind_socket

    s = bind_socket("127.0.0.1", 0)
    try:
        assert s.proto == socket.IPPROTO_TCP
    finally:
        s.close()


def test_reused_tool_registrations_serve_each_gateways_own_world(tmp_path):
    """A second gateway in one process reuses the first one's tool registrations (the
    argument models and schemas), swapping in its own world's functions: each serves
    its own files, with the same schemas."""
    import asyncio
    import json

    from apexrl.worlds.gateway import _TOOL_TEMPLATES

    gws = []
    for name in ("a", "b"):
        root = tmp_path / name
        (root / "filesystem").mkdir(parents=True)
        (root / ".apps_data").mkdir()
        (root / "filesystem" / f"only-in-{name}.txt").write_text(name)
        gws.append(build_gateway(open_world(root, world_id=f"w{name}", apps=["files"])))
    assert _TOOL_TEMPLATES
    a, b = gws
    tname = next(t for t in b.tool_names if t.endswith("list_files") or t.endswith("list"))
    ta, tb = a.mcp._tool_manager.get_tool(tname), b.mcp._tool_manager.get_tool(tname)
    assert ta is not tb and ta.fn is not tb.fn and ta.parameters == tb.parameters

    async def listing(gw) -> str:
        res = await gw.mcp.call_tool(tname, {})
        return json.dumps(res, default=str)

    out_a, out_b = asyncio.run(listing(a)), asyncio.run(listing(b))
    assert "only-in-a.txt" in out_a and "only-in-b.txt" not in out_a
    assert "only-in-b.txt" in out_b and "only-in-a.txt" not in out_b
