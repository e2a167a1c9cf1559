"""`apexrl world serve --runtime archipelago`: a world served by the checkout's own
servers (each in bubblewrap over the world) behind apexrl's gateway, as a model sees it:
archipelago's tool names under the recipe's prefixes, its schemas without the envelope,
its own text back; /health names the runtime and the checkout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.peer]


def test_world_serve_with_archipelagos_servers(example_worlds, checkout, tmp_path):
    from apexrl.agent.mcp_tools import ToolBox
    from apexrl.peer.runtime import checkout_key

    world = example_worlds[0]  # every app; the investment-banking world has the workbook
    cmd = [sys.executable, "-m", "apexrl", "world", "serve", str(world), "-p", "0"]
    cmd += ["--runtime", "archipelago", "--peer", str(checkout), "--apps", "files,sheets"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        rec = json.loads(line)
        fs = Path(rec["world_dir"]) / "filesystem"
        book = "/" + next(fs.rglob("*.xlsx")).relative_to(fs).as_posix()

        async def go():
            async with httpx.AsyncClient() as c:
                health = (await c.get(rec["health_url"])).json()
            box = ToolBox(rec["url"])
            await box.connect()
            try:
                tab = await box.call(
                    "excel_read_tab", {"file_path": book, "tab_index": 0}, timeout_s=60
                )
                missing = await box.call(
                    "filesystem_read_text_file", {"file_path": "/nope.txt"}, timeout_s=60
                )
            finally:
                await box.close()
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in box.tools}
            return health, schemas, tab, missing

        health, schemas, tab, missing = asyncio.run(go())
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    assert rec["servers"] == ["filesystem", "excel"] and rec["n_tools"] == 18, rec
    assert health["runtime"] == "archipelago" and health["checkout_key"] == checkout_key(checkout)
    assert sorted(health["servers"]) == ["excel", "filesystem"]
    # the envelope ({"input": {...}}) is off: the arguments are the fields inside it
    props = schemas["excel_read_tab"]["properties"]
    assert "file_path" in props and "input" not in props, schemas["excel_read_tab"]
    assert tab.text.startswith("Range: all\nTable:\n\tA\tB"), tab.text
    assert missing.status != "ok" and "nope.txt" in missing.text, missing
