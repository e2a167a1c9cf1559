"""The packed image runs: unpack it with umoci (independent OCI tool), start its
entrypoint from the unpacked rootfs, and talk MCP to the gateway it serves.

The test base has no Python (it is built offline), so the entrypoint is given the
host interpreter (APEXRL_PYTHON) while PYTHONPATH, the world and the apexrl source
all come from the unpacked image."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.images.conftest import apexrl, free_port, records, run

pytestmark = pytest.mark.integration  # a real registry, skopeo/umoci or podman


def test_unpacked_image_entrypoint_serves_the_world(base_layout, runtime_pkg, tmp_path):
    from apexrl.tasks.example import write_example

    ds = tmp_path / "ds"
    write_example(ds, seed=0)
    wid = json.loads((ds / "world_descriptions.json").read_text())[0]["world_id"]
    p = apexrl(
        "world",
        "pack",
        str(ds / "world_files_zipped" / f"{wid}.zip"),
        "-o",
        str(tmp_path / "out"),
        "--base",
        f"oci:{base_layout}:base",
        "--runtime",
        str(runtime_pkg),
    )
    assert p.returncode == 0, p.stderr
    (rec,) = records(p.stdout)
    layout = tmp_path / "layout"
    run(["skopeo", "copy", f"oci-archive:{rec['archive']}", f"oci:{layout}:img"])
    bundle = tmp_path / "bundle"
    run(["umoci", "unpack", "--rootless", "--image", f"{layout}:img", str(bundle)])
    rootfs = bundle / "rootfs"
    spec = json.loads((bundle / "config.json").read_text())
    env = dict(e.split("=", 1) for e in spec["process"]["env"])
    port = free_port()
    env.update(
        {
            # image paths, re-rooted at the unpacked rootfs
            "PYTHONPATH": ":".join(str(rootfs) + p for p in env["PYTHONPATH"].split(":")),
            "APEXRL_WORLD": str(rootfs) + env["APEXRL_WORLD"],
            "APEXRL_HOST": "127.0.0.1",
            "APEXRL_PORT": str(port),
            "APEXRL_PYTHON": sys.executable,
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "NO_COLOR": "1",
        }
    )
    # the apexrl code that runs is the image's copy
    cwd = str(rootfs) + spec["process"]["cwd"]
    where = run(
        [sys.executable, "-c", "import apexrl; print(apexrl.__file__)"], env=env, cwd=cwd
    ).stdout
    assert where.strip().startswith(str(rootfs / "opt" / "apexrl"))
    entry = str(rootfs) + spec["process"]["args"][0]
    log = open(tmp_path / "gateway.log", "w+")  # noqa: SIM115
    proc = subprocess.Popen(
        ["sh", entry],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"gateway exited: {(tmp_path / 'gateway.log').read_text()}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "gateway did not become healthy in 60 s"
            time.sleep(0.2)
        # the image's healthcheck command agrees
        hc = subprocess.run(["sh", entry, "healthcheck"], env=env, timeout=30, check=False)
        assert hc.returncode == 0
        ready = json.loads(proc.stdout.readline())
        assert ready["world_id"] == wid
        tools = asyncio.run(_list_tools(f"http://127.0.0.1:{port}/mcp/"))
        assert len(tools) > 10
        assert any("read" in t for t in tools)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


async def _list_tools(url: str) -> list[str]:
    from mcp import Client

    async with asyncio.timeout(60), Client(url) as c:
        return [t.name for t in (await c.list_tools()).tools]


def test_image_without_python_says_what_to_do(world, runtime_pkg, tmp_path):
    p = apexrl(
        "world", "pack", str(world), "-o", str(tmp_path / "o"), "--runtime", str(runtime_pkg)
    )
    assert p.returncode == 0 and "cannot run" in p.stderr
    (rec,) = records(p.stdout)
    layout = tmp_path / "layout"
    run(["skopeo", "copy", f"oci-archive:{rec['archive']}", f"oci:{layout}:img"])
    run(["umoci", "unpack", "--rootless", "--image", f"{layout}:img", str(tmp_path / "b")])
    entry = tmp_path / "b" / "rootfs" / "usr" / "local" / "bin" / "apexrl-world-entrypoint"
    r = subprocess.run(
        ["/bin/sh", str(entry)],
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert r.returncode == 127 and "--base" in r.stderr
    assert Path(rec["archive"]).is_file()
