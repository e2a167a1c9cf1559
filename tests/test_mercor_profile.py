"""Mercor-style world images: the image profile against an image built to that contract.

Under podman: an image with /app/tools/start.sh, a gateway on port 8000, /filesystem and
/.apps_data, POST /data/snapshot (tests/mercor_world.py) is started the way the profile
says; apexrl's readiness wait and snapshot fetch work against it. Under the Modal
environment (a recording fake of `modal`, the tunnel's far end the same server run
locally): a recipe-format task maps to the start command, port 8000, the data roots,
the snapshot as the grader's before-state, and the recipe's CPU/memory/lifetime.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from apexrl.envs.profiles import (
    MERCOR,
    check_snapshot,
    fetch_snapshot,
    get_profile,
    podman_run_argv,
    wait_ready,
)
from apexrl.errors import UsageError
from apexrl.trial.config import SandboxSettings, TrialConfig
from tests.mercor_world import build_image, start_in_sandbox, start_local, unpack_image

REF = "localhost/apexrl-test-mercor-world:v1"
SLUG = "mercor-219-01-deadbeef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_profiles_and_paths():
    assert MERCOR.start_argv(SLUG) == ["/app/tools/start.sh", SLUG]
    assert MERCOR.world_path("/world/filesystem/a/b.txt") == "/filesystem/a/b.txt"
    assert MERCOR.world_path("/world/.apps_data") == "/.apps_data"
    assert MERCOR.world_path("/logs/agent/answer.txt") == "/logs/agent/answer.txt"
    assert get_profile("apexrl").world_path("/world/filesystem/x") == "/world/filesystem/x"
    with pytest.raises(UsageError):
        get_profile("nonsense")
    with pytest.raises(UsageError, match="slug"):
        MERCOR.start_argv(None)
    with pytest.raises(ValueError, match="outside the world"):
        import io
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            info = tarfile.TarInfo("etc/passwd")
            tf.addfile(info, io.BytesIO(b""))
        check_snapshot(buf.getvalue())


@pytest.mark.integration
def test_mercor_style_image_under_podman(tmp_path):
    env = build_image(tmp_path, REF)
    port, name = free_port(), f"apexrl-mercor-{uuid.uuid4().hex[:8]}"
    argv = podman_run_argv(MERCOR, REF, SLUG, host_port=port, name=name)
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    try:
        base = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(base, MERCOR, timeout_s=60))
        import httpx

        assert httpx.get(base + "/health", timeout=10).json()["task_slug"] == SLUG
        names = check_snapshot(asyncio.run(fetch_snapshot(base, MERCOR)))
        assert "filesystem/Documents/figures.csv" in names
        assert ".apps_data/mail/inbox.mbox" in names
    finally:
        subprocess.run(["podman", "rm", "-f", name], capture_output=True, env=env, timeout=60)


def test_modal_environment_runs_a_recipe_task_on_a_mercor_image(tmp_path, monkeypatch):
    from tests.agent.test_modal_env import _calls, fake_modal, make_env
    from tests.test_tasks_recipe_format import recipe_task

    task = recipe_task(tmp_path / "tasks", "investment-banking-world-219", 1)
    files = task / "environment" / "task_files"
    (files / "filesystem" / "Inputs").mkdir(parents=True)
    (files / "filesystem" / "Inputs" / "brief.txt").write_text("brief\n")
    (files / ".apps_data" / "chat").mkdir(parents=True)
    (files / ".apps_data" / "chat" / "note.json").write_text("{}\n")
    arch = json.loads((task / "archipelago.json").read_text())
    sandbox = SandboxSettings(cpus=2, memory_mb=4096, timeout_s=6000)

    # eval/train pass the recipe's resources to the Modal environment
    from apexrl.trial.run import harbor_config

    hc = harbor_config(
        task, TrialConfig(environment="modal", sandbox=sandbox, logs_dir=tmp_path / "l")
    )
    assert hc.environment.kwargs["cpus"] == 2 and hc.environment.kwargs["memory_mb"] == 4096
    assert hc.environment.kwargs["timeout_s"] == 6000

    calls: list = []
    port = free_port()
    server = start_local(tmp_path / "far-end", arch["task_slug"], port)
    try:
        monkeypatch.setitem(
            sys.modules, "modal", fake_modal(calls, f"http://127.0.0.1:{port}", {}, port=8000)
        )
        env = make_env(tmp_path, task, **sandbox.environment_kwargs())
        asyncio.run(env.start(force_build=False))
        before = env.world_before_dir
        asyncio.run(env.stop(delete=True))
    finally:
        server.terminate()
        server.wait(timeout=10)
    (_, (ref,), _) = _calls(calls, "Image.from_aws_ecr")[0]
    assert ref == arch["ecr_image"]
    (_, args, kw) = _calls(calls, "Sandbox.create")[0]
    assert args == ("/app/tools/start.sh", arch["task_slug"])
    assert kw["encrypted_ports"] == [8000] and kw["workdir"] == "/filesystem"
    assert kw["cpu"] == 2 and kw["memory"] == 4096 and kw["timeout"] == 6000
    execs = [" ".join(map(str, a)) for _, a, _ in _calls(calls, "sandbox.exec")]
    assert any("ln -sfn" in e and "/world" in e for e in execs)  # /world -> the image's roots
    assert any("tar -xzf" in e and e.split()[-2] == "/filesystem" for e in execs)
    assert any("tar -xzf" in e and e.split()[-2] == "/.apps_data" for e in execs)
    assert env.gateway_url.endswith(f":{port}/mcp/")
    # the snapshot at start is the grader's before-state, kept on the host
    assert (before / "filesystem" / "Documents" / "figures.csv").is_file()
    assert (before / ".apps_data" / "mail" / "inbox.mbox").is_file()


# --- writing the contract: apexrl's own world images and `world serve --profile mercor` ---


def _example_world(tmp_path) -> Path:
    from apexrl.tasks.example import write_example

    write_example(tmp_path / "ds", seed=0)
    worlds = json.loads((tmp_path / "ds" / "world_descriptions.json").read_text())
    full = max(worlds, key=lambda w: len(w["apps"]))
    return tmp_path / "ds" / "world_files_zipped" / f"{full['world_id']}.zip"


def test_world_serve_profile_mercor_serves_the_contract(tmp_path):
    """`world serve --profile mercor`: /health names the task, MCP at /mcp, and POST
    /data/snapshot answers a tar.gz of filesystem/ and .apps_data/ that follows the
    world's changes (what the recipe keeps as the before- and after-state)."""
    import httpx
    from mcp import Client

    world = _example_world(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "apexrl", "world", "serve", str(world), "--profile", "mercor"]
        + ["--port", "0", "--task-slug", SLUG, "--apps", "files,docs"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        ready = json.loads(proc.stdout.readline() or "{}")
        assert ready.get("url", "").endswith("/mcp/"), ready or proc.stderr.read()
        base = ready["health_url"].removesuffix("/health")
        assert ready["snapshot_url"] == base + "/data/snapshot"
        asyncio.run(wait_ready(base, MERCOR, timeout_s=60))
        health = httpx.get(base + "/health", timeout=10).json()
        assert health["task_slug"] == SLUG and health["profile"] == "mercor"
        before = check_snapshot(asyncio.run(fetch_snapshot(base, MERCOR)))
        assert "filesystem/Process/timeline.txt" in before
        assert any(n.startswith(".apps_data/") for n in before)
        assert "filesystem/Reports/note.docx" not in before

        async def write() -> None:
            async with asyncio.timeout(60), Client(base + "/mcp") as c:
                r = await c.call_tool(
                    "word_create_document",
                    {
                        "directory": "/Reports",
                        "file_name": "note.docx",
                        "content": [{"type": "paragraph", "text": "hello"}],
                    },
                )
                assert not r.is_error, r

        asyncio.run(write())
        after = check_snapshot(asyncio.run(fetch_snapshot(base, MERCOR)))
        assert "filesystem/Reports/note.docx" in after
        # only POST answers a snapshot
        assert httpx.get(base + "/data/snapshot", timeout=10).status_code == 405
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_world_pack_profile_mercor_writes_the_contract(tmp_path):
    """The image's config and files: /app/tools/start.sh is the entrypoint, the world is
    at /filesystem and /.apps_data, the gateway's port is 8000; apexrl's images keep
    /world and 8080."""
    import tarfile as tf_mod

    from apexrl.images import oci

    world = _example_world(tmp_path)
    layouts = {}
    for profile in ("mercor", "apexrl"):
        p = subprocess.run(
            [sys.executable, "-m", "apexrl", "world", "pack", str(world)]
            + ["-o", str(tmp_path / profile), "--profile", profile, "--json"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert p.returncode == 0, p.stderr
        src = oci.open_image(Path(json.loads(p.stdout.splitlines()[0])["archive"]))
        names: set[str] = set()
        for ref in src.blob_refs()[1:]:
            with tf_mod.open(fileobj=io.BytesIO(src.read_blob(ref.digest))) as tf:
                names |= {m.name.removeprefix("./").rstrip("/") for m in tf}
        layouts[profile] = (src.config()["config"], names)
    cfg, names = layouts["mercor"]
    assert cfg["Entrypoint"] == ["/app/tools/start.sh"]
    assert cfg["WorkingDir"] == "/filesystem"
    assert "8000/tcp" in cfg["ExposedPorts"]
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["APEXRL_PORT"] == "8000" and env["APEXRL_WORLD"] == "/"
    assert cfg["Labels"]["io.apexrl.image.profile"] == "mercor"
    assert {"app/tools/start.sh", "app/world.json", "filesystem/Process/timeline.txt"} <= names
    assert not any(n.startswith("world/") for n in names)
    cfg, names = layouts["apexrl"]
    assert cfg["Entrypoint"] == ["/usr/local/bin/apexrl-world-entrypoint"]
    assert "8080/tcp" in cfg["ExposedPorts"]
    assert cfg["Labels"]["io.apexrl.image.profile"] == "apexrl"
    assert "world/filesystem/Process/timeline.txt" in names and "app/tools/start.sh" not in names


@pytest.mark.integration
def test_packed_mercor_image_starts_by_its_contract(tmp_path):
    """The packed image, unpacked by umoci and started as `/app/tools/start.sh <slug>` in
    the local sandbox: apexrl's own client side of the profile (readiness, snapshot)
    works against it."""
    import httpx

    world = _example_world(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "apexrl", "world", "pack", str(world)]
        + ["-o", str(tmp_path / "images"), "--profile", "mercor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    rootfs, spec = unpack_image(Path(json.loads(p.stdout.splitlines()[0])["archive"]), tmp_path)
    port = free_port()
    proc = start_in_sandbox(rootfs, spec, SLUG, port, tmp_path / "gateway.log")
    try:
        base = f"http://127.0.0.1:{port}"
        asyncio.run(wait_ready(base, MERCOR, timeout_s=120))
        health = httpx.get(base + "/health", timeout=10).json()
        assert health["task_slug"] == SLUG and health["n_tools"] == 73
        names = check_snapshot(asyncio.run(fetch_snapshot(base, MERCOR)))
        assert "filesystem/Process/timeline.txt" in names
    finally:
        import os
        import signal

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_compose_overlay_starts_the_world_by_its_profile(tmp_path):
    """Harbor's podman/docker get a Compose overlay for Mercor-profile tasks (the task's
    recorded profile or --image-profile), none for apexrl's own images."""
    from apexrl.envs.profiles import compose_override
    from apexrl.trial.run import harbor_config
    from tests.test_tasks_recipe_format import recipe_task

    assert compose_override(get_profile("apexrl"), SLUG) is None
    main = compose_override(MERCOR, SLUG)["services"]["main"]
    assert main["command"] == ["/app/tools/start.sh", SLUG]
    assert main["working_dir"] == "/filesystem"
    task = recipe_task(tmp_path / "tasks", "investment-banking-world-219", 1)
    hc = harbor_config(task, TrialConfig(environment="podman", logs_dir=tmp_path / "t" / "a"))
    (overlay,) = hc.environment.extra_docker_compose
    slug = json.loads((task / "archipelago.json").read_text())["task_slug"]
    assert json.loads(Path(overlay).read_text())["services"]["main"]["command"][-1] == slug
    forced = TrialConfig(
        environment="podman",
        sandbox=SandboxSettings(image_profile="apexrl"),
        logs_dir=tmp_path / "t" / "b",
    )
    assert harbor_config(task, forced).environment.extra_docker_compose == []


@pytest.mark.integration
def test_podman_environment_starts_a_mercor_image_by_its_profile(tmp_path):
    """Harbor's own podman environment, with the overlay apexrl gives it, starts a
    Mercor-style image by `/app/tools/start.sh <task_slug>` (its gateway keeps the
    container up), execs start in /filesystem and find the world at /world too."""
    import os
    import re

    from harbor.environments.factory import EnvironmentFactory
    from harbor.models.task.task import Task
    from harbor.models.trial.paths import TrialPaths

    from apexrl.trial.run import harbor_config
    from tests.test_tasks_recipe_format import recipe_task

    env_vars = build_image(tmp_path, REF)
    os.environ["CONTAINERS_CONF"] = env_vars["CONTAINERS_CONF"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ['PATH']}"  # podman-compose
    task = recipe_task(tmp_path / "tasks", "investment-banking-world-219", 1)
    toml = (task / "task.toml").read_text()
    toml = re.sub(r"(?m)^\[environment\]$", f'[environment]\ndocker_image = "{REF}"', toml)
    (task / "task.toml").write_text(toml)
    slug = json.loads((task / "archipelago.json").read_text())["task_slug"]
    logs = tmp_path / "trial"
    hc = harbor_config(task, TrialConfig(environment="podman", logs_dir=logs))
    t = Task(task)
    paths = TrialPaths(logs)
    paths.mkdir()
    env = EnvironmentFactory.create_environment_from_config(
        hc.environment,
        environment_dir=t.paths.environment_dir,
        environment_name=t.name,
        session_id=f"mercor-{uuid.uuid4().hex[:8]}",
        trial_paths=paths,
        task_env_config=t.config.environment,
    )
    probe = (
        "import json, time, urllib.request\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        print(json.load(urllib.request.urlopen('http://127.0.0.1:8000/health'))"
        "['task_slug']); break\n"
        "    except OSError: time.sleep(0.2)\n"
    )

    async def go():
        await env.start(force_build=False)
        try:
            return (
                await env.exec("pwd; ls /world/filesystem/Documents"),
                await env.exec(f'python3 -c "{probe}"'),
            )
        finally:
            await env.stop(delete=True)

    where, health = asyncio.run(go())
    assert where.stdout.split() == ["/filesystem", "figures.csv"], where
    assert health.stdout.strip() == slug, health
