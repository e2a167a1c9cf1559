"""`apexrl world serve|snapshot|diff` on the example worlds (`apexrl tasks example`),
through a real MCP client session against the served gateway."""

from __future__ import annotations

import json
import mailbox
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.worlds.surface import ARCHIPELAGO
from tests.worlds.conftest import Session

runner = CliRunner()


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Path, dict]:
    from apexrl.tasks.example import write_example

    out = tmp_path_factory.mktemp("example")
    write_example(out, seed=0)
    worlds = json.loads((out / "world_descriptions.json").read_text())
    world = next(w for w in worlds if "code" in w["apps"])
    return out, world


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not box or not box[0]:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        raise AssertionError(f"world serve printed no ready line within {timeout}s; stderr: {err}")
    return box[0]


@pytest.fixture(scope="module")
def serving(example, tmp_path_factory):
    out, world = example
    workdir = tmp_path_factory.mktemp("served") / world["world_id"]
    zpath = out / "world_files_zipped" / f"{world['world_id']}.zip"
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "apexrl",
            "world",
            "serve",
            str(zpath),
            "--port",
            "0",
            "--workdir",
            str(workdir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        rec = json.loads(_read_line(proc, 60))
        yield rec, Path(rec["world_dir"]), world
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            raise AssertionError("world serve did not stop on SIGINT") from None
        assert rc in (0, 130), proc.stderr.read()


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_serve_ready_line_and_health(serving):
    rec, root, world = serving
    assert rec["world_id"] == world["world_id"]
    assert rec["url"].startswith("http://127.0.0.1:") and rec["url"].endswith("/mcp/")
    servers = [spec.name for spec in ARCHIPELAGO.for_apps(world["apps"])]
    assert rec["servers"] == servers
    names = Session(rec["url"]).tools()
    assert rec["n_tools"] == len(names)
    assert {srv for srv in servers if any(n.startswith(f"{srv}_") for n in names)} == set(servers)
    h = httpx.get(rec["health_url"], timeout=5)
    assert h.status_code == 200 and h.json()["status"] == "ok"


def test_example_world_tools_and_exact_diff(serving, tmp_path):
    rec, root, _ = serving
    s = Session(rec["url"])
    r = _run("world", "snapshot", str(root), "-o", str(tmp_path / "before.tar"))
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_files"] > 10

    fs = root / "filesystem"
    # read the .xlsx formulas
    xlsx = "/" + next(fs.rglob("*.xlsx")).relative_to(fs).as_posix()
    withf = s.text("excel_read_tab", file_path=xlsx, tab_index=0, include_formulas=True)
    assert "(=" in withf
    # edit a .docx
    docx_path = next(fs.rglob("*.docx")).relative_to(fs).as_posix()
    s.text(
        "word_add_content_text",
        file_path=f"/{docx_path}",
        identifier="body.p.0",
        text=" Reviewed by the agent.",
    )
    read = s.text("word_read_document_content", file_path=f"/{docx_path}")
    assert "Reviewed by the agent." in read
    # send mail and find it in the mbox
    sent = s.text(
        "mail_send_mail",
        from_email="agent@example.com",
        to_email=["client@example.com"],
        subject="Status",
        body="All on track.",
    )
    sent_id = sent.split("Mail ID: ")[1].split(",")[0]
    mbox = next((root / ".apps_data" / "mail").glob("*.mbox"))
    box = mailbox.mbox(str(mbox))
    assert any(m["Message-ID"] == sent_id for m in box)
    box.close()
    # post in chat
    space = json.loads(s.text("chat_list_channels"))["groups"][0]["id"]
    posted = s.json("chat_post_message", channel_id=space, message="Draft is ready for review.")
    hist = s.json("chat_get_channel_history", channel_id=space)
    assert hist["messages"][0]["message_id"] == posted["message_id"]
    # rename a calendar event
    first = s.text("calendar_list_events", limit=1).split("Event ID: ")[1].splitlines()[0]
    s.text("calendar_update_event", event_id=first, summary="Agent check-in")
    assert "Summary: Agent check-in" in s.text("calendar_read_event", event_id=first)
    cals = (root / ".apps_data" / "calendar").rglob("*.ics")
    cal = next(p for p in cals if "Agent check-in" in p.read_text())
    # run code
    assert json.loads(s.text("code_execution_code_exec", code="ls"))["success"] is True

    r = _run("world", "snapshot", str(root), "-o", str(tmp_path / "after.tar"))
    assert r.exit_code == 0, r.output
    r = _run("world", "diff", str(tmp_path / "before.tar"), str(tmp_path / "after.tar"), "--json")
    assert r.exit_code == 0, r.output
    changes = {(c["change"], c["path"]) for c in map(json.loads, r.stdout.splitlines())}
    assert changes == {
        ("modified", f"filesystem/{docx_path}"),
        ("modified", mbox.relative_to(root).as_posix()),
        ("modified", f".apps_data/chat/Groups/{space}/messages.json"),
        ("modified", cal.relative_to(root).as_posix()),
    }


def test_serve_fails_loudly_when_a_server_cannot_come_up(example, tmp_path):
    out, world = example
    zpath = out / "world_files_zipped" / f"{world['world_id']}.zip"
    wd = tmp_path / "w"
    from apexrl.worlds.world import open_world

    open_world(zpath, workdir=wd)
    next((wd / ".apps_data" / "calendar").glob("*.ics")).write_text(
        "BEGIN:VCALENDAR\nthis is not ics"
    )
    r = runner.invoke(app, ["world", "serve", str(wd), "--port", "0"])
    assert r.exit_code == 1
    assert "calendar" in r.output and "did not come up" in r.output
    # leaving the broken server out serves the rest
    assert "--apps" in r.output


def test_serve_refuses_traversal_zip(tmp_path):
    import zipfile

    z = tmp_path / "bad.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("filesystem/ok.txt", "ok")
        zf.writestr("../../escape.txt", "x")
    r = runner.invoke(app, ["world", "serve", str(z), "--port", "0"])
    assert r.exit_code == 1
    assert "../../escape.txt" in r.output and "traversal" in r.output
    r = runner.invoke(app, ["world", "serve", str(tmp_path), "--apps", "fax"])
    assert r.exit_code == 2


def test_serve_world_is_a_library_call(example):
    """`world serve` is apexrl.envs.serve.serve_world: the runtime and profile are checked
    before the world opens, and a ready gateway is told as a ServeRecord."""
    from apexrl.envs.serve import serve_world
    from apexrl.errors import UsageError

    out, world = example
    src = out / "world_files_zipped" / f"{world['world_id']}.zip"
    with pytest.raises(UsageError, match="--peer names the checkout"):
        serve_world(src, peer=Path("peer"), on_ready=lambda rec: None)
    with pytest.raises(UsageError):
        serve_world(src, runtime="nobody", on_ready=lambda rec: None)
    with pytest.raises(UsageError):
        serve_world(src, profile="nobody", on_ready=lambda rec: None)


def test_sigterm_after_a_session_removes_the_extracted_world(example, tmp_path):
    """`docker stop` sends SIGTERM: the gateway shuts down, the world a zip was extracted
    to is removed, and the process still ends by that signal (it used to die before any
    cleanup, leaving a whole world in the temp folder per stop)."""
    out, world = example
    zpath = out / "world_files_zipped" / f"{world['world_id']}.zip"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "NO_COLOR": "1", "TMPDIR": str(tmp)}
    args = [sys.executable, "-m", "apexrl", "world", "serve", str(zpath), "--port", "0"]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        rec = json.loads(_read_line(proc, 60))
        root = Path(rec["world_dir"])
        assert root.is_dir() and tmp in root.parents
        assert Session(rec["url"]).tools()  # a whole MCP session first (the exit once hung)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert rc == -signal.SIGTERM, proc.stderr.read()
    assert "stopped (SIGTERM)" in proc.stderr.read()
    assert not root.exists() and not [p for p in tmp.iterdir() if p.name.startswith("apexrl-world")]
