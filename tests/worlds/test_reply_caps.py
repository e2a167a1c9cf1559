"""Issue 42, finding 4: the host driver took whole tool results into memory (a 200 MB
file read with `filesystem_read_text_file` cost it ~4.5x the file's size before the
agent loop cut the text). Tool servers now cap their replies at the source (files,
images, any text, with a note the model reads) and the driver's MCP client refuses a
reply over its byte limit while it streams in. The driver here is a fresh process with
the agent's ToolBox against a real gateway process; its peak RSS is measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apexrl.agent.mcp_tools import DEFAULT_REPLY_MAX_BYTES, refused_text

BIG = 200 * 1024 * 1024
LINE = b"0123456789 the quick brown fox jumps over the lazy dog ABCDEFGHIJKLMNOPQRSTUVWXYZ\n"

_GATEWAY = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from apexrl.worlds.gateway import build_gateway, serve_in_thread
    from apexrl.worlds.world import open_world
    w = open_world(Path(sys.argv[1]))
    with serve_in_thread(build_gateway(w), port=0) as r:
        print(r.url, flush=True)
        sys.stdin.read()  # until the test closes it
    """
)
_DRIVER = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from apexrl.agent.loop import truncate_result
    from apexrl.agent.mcp_tools import ToolBox

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    async def main():
        box = ToolBox(sys.argv[1])
        await box.connect(ready_timeout_s=60)
        # the baseline: a small file through the same path, so every lazy import is done
        await box.call("filesystem_read_text_file", {"file_path": "/small.txt"}, timeout_s=60)
        base = peak_mb()
        out = await box.call("filesystem_read_text_file", {"file_path": "/big.txt"},
                             timeout_s=300)
        peak = peak_mb()
        seen, cut = truncate_result(out.text, 42_000)  # what the model reads
        after = await box.call("filesystem_list_files", {"path": "/"}, timeout_s=60)
        await box.close()
        print(json.dumps({"base": base, "peak": peak, "status": out.status, "chars": len(out.text),
                          "seen": seen, "after": after.status}))

    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def big_world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bigworld") / "w"
    (root / "filesystem").mkdir(parents=True)
    (root / "filesystem" / "small.txt").write_text("a small file\n")
    block = LINE * (1024 * 1024 // len(LINE))
    with open(root / "filesystem" / "big.txt", "wb") as fh:
        while fh.tell() < BIG:
            fh.write(block)
    return root


def _drive(world: Path, server_env: dict[str, str]) -> dict:
    env = {**os.environ, **server_env}
    gw = subprocess.Popen(
        [sys.executable, "-c", _GATEWAY, str(world)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        url = gw.stdout.readline().strip()
        assert url.startswith("http://"), gw.stderr.read()
        res = subprocess.run(
            [sys.executable, "-c", _DRIVER, url], capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])
    finally:
        gw.stdin.close()
        try:
            gw.wait(timeout=30)
        except subprocess.TimeoutExpired:
            gw.kill()
            gw.wait()


def _bounded(r: dict) -> None:
    # before: ~80 MB baseline, ~1.3 GB peak (the file several times over)
    assert r["peak"] < 2 * r["base"] and r["peak"] - r["base"] < 64, r
    assert r["after"] == "ok", json.dumps(r)  # the session goes on


def test_a_200mb_file_reaches_the_driver_capped_at_the_source(big_world):
    r = _drive(big_world, {})
    _bounded(r)
    assert r["status"] == "ok" and r["chars"] <= 1_000_000, r["chars"]
    seen = r["seen"]
    assert seen.startswith(LINE.decode()) and "truncated by the tool server" in seen
    assert f"of a file of {os.path.getsize(big_world / 'filesystem' / 'big.txt'):,} bytes" in seen


def test_an_uncapped_server_reply_is_refused_while_it_streams(big_world):
    """A server without the cap (archipelago's own images answer whole files): the
    driver reads no more than its byte limit and tells the model why."""
    r = _drive(big_world, {"APEXRL_TOOL_REPLY_MAX_CHARS": "0"})
    _bounded(r)
    assert r["status"] == "mcp_error"
    assert r["seen"] == refused_text("filesystem_read_text_file", DEFAULT_REPLY_MAX_BYTES)


def test_a_chunked_reply_is_cut_at_the_limit_not_read_to_its_end():
    """No length header (chunked, or SSE): the body is counted as it streams in, and
    reading stops past the limit; a compressed body is refused (its size read is unknown)."""
    import asyncio

    import httpx2

    from apexrl.agent.mcp_tools import ToolBox, _capped_transport_class

    sent = [0]

    async def body():
        for _ in range(200):
            sent[0] += 1
            yield b"x" * (1024 * 1024)

    def handler(request):
        headers = {"content-type": "application/json"}
        if request.url.path == "/gz":
            headers["content-encoding"] = "gzip"
        return httpx2.Response(200, headers=headers, stream=body())

    async def go(path: str) -> str:
        box = ToolBox("http://gw/mcp/", max_reply_bytes=4 * 1024 * 1024)
        transport = _capped_transport_class()(box, httpx2.MockTransport(handler))
        async with httpx2.AsyncClient(transport=transport) as c:
            try:
                await (await c.post(f"http://gw{path}", content=b"{}")).aread()
            except httpx2.StreamError as e:
                assert box.refused == 1
                return str(e)
        return "read whole"

    assert asyncio.run(go("/mcp/")) == "tool reply refused: over 4194304 bytes"
    assert sent[0] <= 6  # 1 MiB chunks: stopped just past 4 MiB, not at 200
    assert asyncio.run(go("/gz")) == "tool reply refused: compressed (gzip)"


def test_images_and_text_are_capped_with_a_note(fresh_served, monkeypatch):
    """Each cap is a setting of the gateway's process; the model reads what was cut."""
    from mcp.types import CallToolResult, ImageContent, TextContent

    from apexrl.worlds.servers import caps

    session, root = fresh_served
    (root / "filesystem" / "photo.png").write_bytes(b"\x89PNG" + bytes(5000))
    monkeypatch.setenv(caps.IMAGE_MAX_BYTES_ENV, "1000")
    r = session.call("filesystem_read_image_file", file_path="/photo.png")
    assert r.content[0].type == "text"
    assert r.content[0].text == caps.image_note(5004)
    monkeypatch.setenv(caps.REPLY_MAX_CHARS_ENV, "600")
    (root / "filesystem" / "long.txt").write_text("A" * 1000 + "Z" * 1000)
    text = session.text("filesystem_read_text_file", file_path="/long.txt")
    assert text.startswith("A" * 400 + "\n\n[... truncated") and text.endswith("]\n\n" + "Z" * 200)
    assert "600 characters shown of 2,000; one tool reply holds at most 600" in text
    (root / "filesystem" / "huge.txt").write_text("B" * 3000)  # over 4x the limit: head only
    text = session.text("filesystem_read_text_file", file_path="/huge.txt")
    assert text.startswith("B" * 200 + "\n\n") and len(text) <= 600
    assert "200 characters shown of a file of 3,000 bytes" in text
    # a result made of several parts shares one budget; images over the limit become notes
    img = ImageContent(type="image", data="A" * 4000, mimeType="image/png")
    parts = [TextContent(type="text", text=c * 500) for c in "CD"] + [img]
    out = caps.capped(CallToolResult(content=parts)).content
    assert out[0].text == "C" * 500 and "100 characters shown of 500" in out[1].text
    assert out[2].text == caps.image_note(3000)
    monkeypatch.setenv(caps.REPLY_MAX_CHARS_ENV, "0")  # 0: no cap
    assert caps.capped("E" * 5000) == "E" * 5000
    monkeypatch.setenv(caps.REPLY_MAX_CHARS_ENV, "lots")  # malformed: the default holds
    assert caps.reply_max_chars() == caps.DEFAULT_REPLY_MAX_CHARS
