"""The world gateway through a real MCP client session over streamable HTTP."""

from __future__ import annotations

import time

import httpx
import pytest

from apexrl.errors import ApexError
from apexrl.worlds.gateway import build_gateway, serve_in_thread, tool_name
from apexrl.worlds.snapshot import diff, snapshot
from apexrl.worlds.surface import ARCHIPELAGO
from apexrl.worlds.world import open_world
from tests.worlds.conftest import OWNER

SERVER_NAMES = {spec.name for spec in ARCHIPELAGO.servers}


def test_tools_listed_with_server_prefix(served):
    s, _ = served
    names = s.tools()
    assert {"mail_send_mail", "excel_read_tab", "code_execution_code_exec"} <= set(names)
    assert all(any(n.startswith(f"{srv}_") for srv in SERVER_NAMES) for n in names)
    assert tool_name("mail", "send_mail", 1) == "mail_send_mail"  # always prefixed


def test_health(served):
    s, _ = served
    r = httpx.get(s.url.replace("/mcp/", "/health"), timeout=5)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok"
    assert set(body["servers"]) == SERVER_NAMES
    assert all(v["ok"] for v in body["servers"].values())


def test_files_confined(served):
    s, _ = served
    assert "Quarterly close" in s.text("filesystem_read_text_file", file_path="/notes.txt")
    # refused in archipelago's words: a path outside the world is denied, a relative one
    # is refused before it resolves anywhere
    for bad in ("/../secret.txt", "/Reports/../../x.txt", "/../../etc/passwd.txt"):
        err = s.error("filesystem_read_text_file", file_path=bad)
        assert err.endswith(f"'read_text_file': Access denied: {bad}")
    for bad in ("../../etc/passwd.txt", "Reports/../../x.txt"):
        err = s.error("filesystem_read_text_file", file_path=bad)
        assert err.endswith("'read_text_file': File path must start with /")
    assert not any(n.startswith("filesystem_") and "write" in n for n in s.tools())


def test_code_runner_time_limit_and_output_cap(world_dir, monkeypatch):
    """The runner under code_exec: a command past its time limit is killed (its output so
    far kept), a long output keeps its head and tail."""
    import asyncio

    from apexrl.worlds.apps.code import run_command

    w = open_world(world_dir)
    r = asyncio.run(run_command(w, "pwd; python3 -c 'print(6*7)'", 10, 20_000))
    assert r["exit_code"] == 0 and r["stdout"].splitlines() == [
        str((world_dir / "filesystem").resolve()),
        "42",
    ]
    # where the world's files are also shown at archipelago's folder (a Mercor-profile
    # image or environment), commands start there and pwd says so
    import apexrl.worlds.apps.code as code

    shown = world_dir.parent / "shown-as-filesystem"
    shown.symlink_to(world_dir / "filesystem")
    monkeypatch.setattr(code, "MERCOR_FOLDER", str(shown))
    r = asyncio.run(run_command(w, "pwd; ls", 10, 20_000))
    assert r["stdout"].splitlines()[0] == str(shown) and "notes.txt" in r["stdout"]
    monkeypatch.setattr(code, "MERCOR_FOLDER", str(world_dir))  # another folder: not used
    r = asyncio.run(run_command(w, "pwd", 10, 20_000))
    assert r["stdout"].strip() == str((world_dir / "filesystem").resolve())
    t0 = time.monotonic()
    r = asyncio.run(run_command(w, "echo started; sleep 30; echo never", 1, 20_000))
    assert r["timed_out"] is True and r["exit_code"] is None
    assert r["stdout"].strip() == "started"
    assert time.monotonic() - t0 < 10
    r = asyncio.run(run_command(w, "python3 -c \"print('x' * 100000)\"", 10, 20_000))
    assert len(r["stdout"]) < 21_000 and "characters omitted" in r["stdout"]
    assert asyncio.run(run_command(w, "exit 3", 10, 20_000))["exit_code"] == 3


def test_snapshot_diff_reports_exactly_the_changes(fresh_served, tmp_path):
    s, root = fresh_served
    before = snapshot(root, tmp_path / "before.tar")
    assert before.n_files == 12
    s.text("mail_send_mail", from_email=OWNER, to_email=["x@y.test"], subject="s", body="b")
    s.text("chat_post_message", channel_id="space_fin", message="hello")
    s.text("calendar_update_event", event_id="ev-1", summary="Moved")
    s.text(
        "excel_create_spreadsheet",
        directory="/Out",
        file_name="result.xlsx",
        sheets=[{"name": "S", "headers": ["a"], "rows": []}],
    )
    s.text("code_execution_code_exec", code="rm notes.txt")
    after = snapshot(root, tmp_path / "after.tar.gz")
    d = diff(tmp_path / "before.tar", tmp_path / "after.tar.gz")
    assert [c.path for c in d.created] == ["filesystem/Out/result.xlsx"]
    assert [c.path for c in d.deleted] == ["filesystem/notes.txt"]
    assert [c.path for c in d.modified] == [
        ".apps_data/calendar/work.ics",
        ".apps_data/chat/Groups/space_fin/messages.json",
        ".apps_data/mail/inbox.mbox",
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


def test_a_single_server_keeps_its_prefix(world_dir):
    from tests.worlds.conftest import Session

    w = open_world(world_dir, apps=["mail"])
    with serve_in_thread(build_gateway(w)) as r:
        s = Session(r.url)
        assert sorted(s.tools()) == sorted(f"mail_{t}" for t in ARCHIPELAGO.server("mail").tools)
        assert s.text("mail_list_mails").startswith("Found 2 email(s):")


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
