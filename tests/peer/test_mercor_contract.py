"""Mercor's world-image contract, both ways, against archipelago's own parts.

The recipe's side: archipelago's agent runner (its `agents/` package, the loop agent, its
model calls through LiteLLM to apexrl's scripted engine) completes a task against a world
image `apexrl world pack --profile mercor` wrote, started as the contract says
(`/app/tools/start.sh <task_slug>`, MCP at /mcp, /health, POST /data/snapshot), in the
local sandbox; archipelago's grading runner grades the snapshots the image returned.

apexrl's side: apexrl's agent completes a task against archipelago's own environment
gateway (`environment/`, what Mercor's images run), started in the local sandbox with the
world at /filesystem and /.apps_data and the peer's servers mounted through its /apps.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from apexrl.envs.profiles import MERCOR, check_snapshot, fetch_snapshot, wait_ready
from tests.mercor_world import start_in_sandbox, unpack_image
from tests.scripted_engine import ScriptedEngine, chat_script, chat_tool_call, marker_judge

pytestmark = pytest.mark.peer

SLUG = "halvorsen-timeline-01"
MARKER = "MK-TIMELINE-9Z"
CRITERION = f"[c-doc] Reports/timeline_summary.docx gives the final bid date ({MARKER})"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def snapshot_files(tar_gz: bytes) -> dict[str, bytes]:
    """A snapshot tar's regular files by name (filesystem/..., .apps_data/...)."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(tar_gz)) as tf:
        for m in tf:
            f = tf.extractfile(m) if m.isfile() else None
            if f is not None:
                out[m.name.removeprefix("./")] = f.read()
    return out


@pytest.fixture(scope="module")
def example_world(tmp_path_factory) -> Path:
    """The example world with every app (the one with Process/timeline.txt)."""
    from apexrl.tasks.example import write_example

    out = tmp_path_factory.mktemp("example")
    write_example(out, seed=0)
    worlds = json.loads((out / "world_descriptions.json").read_text())
    full = max(worlds, key=lambda w: len(w["apps"]))
    return out / "world_files_zipped" / f"{full['world_id']}.zip"


def test_peer_agent_runner_completes_a_task_on_an_apexrl_mercor_image(
    checkout, example_world, tmp_path
):
    from apexrl.grading.archipelago import (
        RunnerInputs,
        resolve_checkout,
        run_runner,
        runner_dir,
    )
    from apexrl.peer.runtime import project_runtime

    agents = project_runtime(checkout, "agents", build=False)
    grader = runner_dir(resolve_checkout(checkout), build=False)

    # the image, packed to Mercor's contract and started by it
    p = subprocess.run(
        [sys.executable, "-m", "apexrl", "world", "pack", str(example_world)]
        + ["-o", str(tmp_path / "images"), "--profile", "mercor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    archive = Path(json.loads(p.stdout.splitlines()[0])["archive"])
    rootfs, spec = unpack_image(archive, tmp_path)
    assert (rootfs / "filesystem" / "Process" / "timeline.txt").is_file()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gateway = start_in_sandbox(rootfs, spec, SLUG, port, tmp_path / "gateway.log")
    agent_engine = judge = None
    try:
        # the recipe's readiness: /health, then tools/list is not a 404
        asyncio.run(wait_ready(base, MERCOR, timeout_s=180))
        assert httpx.get(base + "/health", timeout=10).json()["task_slug"] == SLUG
        initial = asyncio.run(fetch_snapshot(base, MERCOR))  # the grader's before-state

        # the model: what the loop agent asks LiteLLM for comes from the scripted engine
        steps = [
            chat_tool_call("filesystem_read_text_file", {"file_path": "/Process/timeline.txt"}),
            chat_tool_call(
                "word_create_document",
                {
                    "directory": "/Reports",
                    "file_name": "timeline_summary.docx",
                    "content": [
                        {"type": "heading", "text": "Timeline", "level": 1},
                        {"type": "paragraph", "text": f"Final bids are due 2025-10-10. {MARKER}"},
                    ],
                },
            ),
            "Done: Reports/timeline_summary.docx gives the final bid date.",
        ]
        agent_engine = ScriptedEngine([], model="scripted", chat=chat_script(steps)).start()
        judge = ScriptedEngine([], model="judge", chat=marker_judge({"[c-doc]": MARKER})).start()
        files = {
            "messages.json": [
                {"role": "system", "content": "You complete tasks with the tools you have."},
                {
                    "role": "user",
                    "content": "Summarise the deal timeline's final bid date in a Word "
                    "document at Reports/timeline_summary.docx.",
                },
            ],
            "agent.json": {
                "agent_config_id": "loop_agent",
                "agent_name": "Loop Agent",
                "agent_config_values": {"max_steps": 8, "timeout": 600},
            },
            "extra.json": {"api_base": agent_engine.url + "/v1", "api_key": "none"},
        }
        for name, obj in files.items():
            (tmp_path / name).write_text(json.dumps(obj))
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        t0 = time.monotonic()
        run = subprocess.run(
            [str(agents / ".venv" / "bin" / "python"), "-m", "runner.main"]
            + ["--trajectory-id", "mercor-contract", "--mcp-gateway-url", base + "/mcp"]
            + ["--initial-messages", str(tmp_path / "messages.json")]
            + ["--agent-config", str(tmp_path / "agent.json")]
            + ["--orchestrator-model", "openai/scripted"]
            + ["--orchestrator-extra-args", str(tmp_path / "extra.json")]
            + ["--output", str(tmp_path / "trajectory.json")],
            cwd=agents,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        took = time.monotonic() - t0
        assert run.returncode == 0, run.stderr[-3000:]
        traj = json.loads((tmp_path / "trajectory.json").read_text())
        assert traj["status"] == "completed", run.stderr[-3000:]

        # the runner saw the image's tools and their results
        asked = agent_engine.chat_requests
        assert len(asked) == 3, run.stderr[-3000:]
        listed = {t["function"]["name"] for t in asked[0]["tools"]}
        assert {"filesystem_read_text_file", "word_create_document"} <= listed
        assert len(listed) == 73
        tool_texts = [
            json.dumps(m.get("content"))
            for m in asked[1]["messages"]
            if isinstance(m, dict) and m.get("role") == "tool"
        ]
        assert any("Final bids: 2025-10-10" in t for t in tool_texts), tool_texts

        # the image's snapshot after the run holds what the agent wrote
        final = asyncio.run(fetch_snapshot(base, MERCOR))
        names = check_snapshot(final)
        assert "filesystem/Reports/timeline_summary.docx" in names
        before, after = snapshot_files(initial), snapshot_files(final)
        assert "filesystem/Reports/timeline_summary.docx" not in before
        with zipfile.ZipFile(io.BytesIO(after["filesystem/Reports/timeline_summary.docx"])) as z:
            assert MARKER in z.read("word/document.xml").decode()
    finally:
        stop(gateway)
        if agent_engine is not None:
            agent_engine.stop()

    # archipelago's grading runner grades the trajectory over the image's snapshots
    try:
        res = run_runner(
            grader,
            RunnerInputs(
                task_id=SLUG,
                criteria=[{"criteria": CRITERION, "verifier_id": "c-doc"}],
                messages=traj["messages"],
                before=before,
                after=after,
                elapsed_s=took,
            ),
            model="openai/judge",
            api_base=judge.url + "/v1",
            timeout_s=600,
        )
    finally:
        judge.stop()
    assert res.status == "completed", res.error
    assert res.final_score == 1.0, res.verifiers
    # the judge was shown the document the agent wrote through the image's tools
    assert any(MARKER in json.dumps(r) for r in judge.chat_requests)


def test_apexrl_agent_completes_a_task_on_the_peer_environment_gateway(
    checkout, example_world, tmp_path
):
    """archipelago's environment gateway, in the local sandbox with the world at
    /filesystem and /.apps_data, mounts the peer's servers through its /apps; apexrl's
    client side of the contract (readiness, snapshot) and apexrl's agent loop (TITO over
    the scripted engine, MCP tools from the peer's gateway, the peer's argument
    envelopes) complete a task there; the gateway's snapshot holds what it wrote."""
    from apexrl.agent.loop import AgentLoop
    from apexrl.agent.mcp_tools import ToolBox
    from apexrl.tito.client import EngineClient, RetryPolicy
    from apexrl.tito.session import TitoSession
    from apexrl.tito.template import resolve_template
    from apexrl.trial.config import AgentBudgets, Sampling
    from tests.mercor_world import start_peer_environment
    from tests.scripted_engine import tool_call_text

    world = tmp_path / "world"
    with zipfile.ZipFile(example_world) as z:
        z.extractall(world)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    gateway, apps = start_peer_environment(checkout, world, ["filesystem", "word"], port, tmp_path)
    steps = [
        tool_call_text("filesystem_read_text_file", {"file_path": "/Process/timeline.txt"}),
        tool_call_text(
            "word_create_document",
            {
                "input": {  # the peer's own argument envelope, as its schema lists it
                    "directory": "/Reports",
                    "file_name": "timeline_summary.docx",
                    "content": [{"type": "paragraph", "text": f"Final bids: 2025-10-10 {MARKER}"}],
                }
            },
        ),
        "The final bid date, 2025-10-10, is in Reports/timeline_summary.docx.",
    ]
    engine = ScriptedEngine(steps, model="scripted").start()
    try:
        deadline = time.monotonic() + 240
        while True:  # the peer's gateway serves /health before any server is mounted
            assert gateway.poll() is None, (tmp_path / "peer-environment.log").read_text()
            try:
                if httpx.get(base + "/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the peer's gateway did not start"
            time.sleep(0.5)
        r = httpx.post(base + "/apps", json=apps, timeout=300)
        assert r.status_code == 200, r.text
        asyncio.run(wait_ready(base, MERCOR, timeout_s=120))
        before = snapshot_files(asyncio.run(fetch_snapshot(base, MERCOR)))
        assert "filesystem/Process/timeline.txt" in before

        async def agent():
            client = EngineClient(
                engine.url, model="scripted", timeout_s=60, retry=RetryPolicy(max_retries=0)
            )
            tools = ToolBox(base + "/mcp/")
            try:
                await tools.connect(ready_timeout_s=120)
                tname, template = resolve_template(None, engine.tok.chat_template)
                session = TitoSession(
                    engine.tok, chat_template=template, template_name=tname, model="scripted"
                )
                loop = AgentLoop(
                    session=session,
                    client=client,
                    tools=tools,
                    budgets=AgentBudgets(max_steps=6),
                    sampling=Sampling(),
                    context_window=32768,
                )
                return await loop.run("Put the final bid date in Reports/timeline_summary.docx.")
            finally:
                await tools.close()
                await client.aclose()

        rec = asyncio.run(agent())
        assert rec.status == "complete", (rec.error_class, rec.error)
        calls = rec.tool_call_records
        assert [c.name for c in calls] == ["filesystem_read_text_file", "word_create_document"]
        assert all(c.status == "ok" for c in calls), calls
        assert rec.final_answer and "2025-10-10" in rec.final_answer
        # the peer's tool results reached the model, as tokens
        seen = engine.tok.decode(engine.requests[1]["prompt"])
        assert "Final bids: 2025-10-10" in seen
        after = snapshot_files(asyncio.run(fetch_snapshot(base, MERCOR)))
    finally:
        engine.stop()
        stop(gateway)
    doc = after["filesystem/Reports/timeline_summary.docx"]
    with zipfile.ZipFile(io.BytesIO(doc)) as z:
        assert MARKER in z.read("word/document.xml").decode()
    assert (world / "filesystem" / "Reports" / "timeline_summary.docx").read_bytes() == doc
