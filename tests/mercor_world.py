"""A world image that follows the contract of Mercor's prebuilt world images.

The contract (docs/facts.md section 2): started with `/app/tools/start.sh <task_slug>`, a
gateway on port 8000 (`/health`, MCP over HTTP at `/mcp/`), the world's data at
`/filesystem` and `/.apps_data`, and a snapshot (a tar of both) from `POST
/data/snapshot`. Mercor's own servers are not public, so the image's server is a small
standard-library stand-in written here; what is under test is apexrl's side: the image
profile's start command, port, data roots, readiness and snapshot handling.

The image is built offline like tests/trial/podman_world.py's (this machine's own
shell, coreutils and Python 3 standard library), with umoci, and loaded into podman.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.trial.podman_world import build_rootfs, podman_env, run

SERVER = r"""
import io, json, os, sys, tarfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLUG = sys.argv[1] if len(sys.argv) > 1 else ""
FS = os.environ.get("MERCOR_FS", "/filesystem")
APPS = os.environ.get("MERCOR_APPS", "/.apps_data")
TOOLS = [{"name": "filesystem_list_files", "description": "List the world's files",
          "inputSchema": {"type": "object", "properties": {}}}]


def snapshot():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for root, name in ((FS, "filesystem"), (APPS, ".apps_data")):
            if os.path.isdir(root):
                tf.add(root, arcname=name)
    return buf.getvalue()


class H(BaseHTTPRequestHandler):
    def _send(self, code, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self._send(200, {"status": "ok", "task_slug": SLUG})
        self._send(404, {"error": "not found"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/data/snapshot":
            return self._send(200, snapshot(), "application/gzip")
        if self.path in ("/mcp", "/mcp/"):
            req = json.loads(body or b"{}")
            if req.get("method") == "tools/list":
                result = {"tools": TOOLS}
            elif req.get("method") == "tools/call":
                files = sorted(
                    os.path.relpath(os.path.join(d, f), FS)
                    for d, _, fs in os.walk(FS) for f in fs
                )
                result = {"content": [{"type": "text", "text": "\n".join(files)}]}
            else:
                result = {}
            return self._send(200, {"jsonrpc": "2.0", "id": req.get("id"), "result": result})
        self._send(404, {"error": "not found"})

    def log_message(self, *a):
        pass


host = os.environ.get("MERCOR_HOST", "0.0.0.0")
port = int(os.environ.get("MERCOR_PORT", "8000"))
ThreadingHTTPServer((host, port), H).serve_forever()
"""
START_SH = '#!/bin/sh\n# start the world for task "$1"\nexec python3 /app/tools/server.py "$1"\n'
WORLD_FILES = {
    "filesystem/Documents/figures.csv": "item,value\nrevenue,120\ncost,80\n",
    ".apps_data/mail/inbox.mbox": "",
}


def write_world(rootfs: Path) -> None:
    tools = rootfs / "app" / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "server.py").write_text(SERVER)
    (tools / "start.sh").write_text(START_SH)
    (tools / "start.sh").chmod(0o755)
    for rel, text in WORLD_FILES.items():
        p = rootfs / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def start_local(root: Path, slug: str, port: int) -> subprocess.Popen:
    """The same server on this machine (for the Modal mapping test's fake tunnel)."""
    write_world(root)
    env = {
        "MERCOR_FS": str(root / "filesystem"),
        "MERCOR_APPS": str(root / ".apps_data"),
        "MERCOR_HOST": "127.0.0.1",
        "MERCOR_PORT": str(port),
    }
    return subprocess.Popen(
        [sys.executable, str(root / "app" / "tools" / "server.py"), slug], env=env
    )


def build_image(work: Path, ref: str) -> dict[str, str]:
    """Build and load `ref`; returns the podman environment (CONTAINERS_CONF) to use."""
    env = podman_env(work)
    rootfs = work / "rootfs"
    build_rootfs(rootfs)
    write_world(rootfs)
    layer = work / "rootfs.tar"
    run(["tar", "-C", str(rootfs), "-cf", str(layer), "."])
    layout = work / "layout"
    run(["umoci", "init", "--layout", str(layout)])
    run(["umoci", "new", "--image", f"{layout}:mercor"])
    run(["umoci", "raw", "add-layer", "--image", f"{layout}:mercor", str(layer)])
    run(
        ["umoci", "config", "--image", f"{layout}:mercor", "--os", "linux"]
        + ["--architecture", "amd64", "--config.env", "PATH=/usr/local/bin:/usr/bin:/bin"]
    )
    archive = work / "mercor.tar"
    run(["tar", "-C", str(layout), "-cf", str(archive), "."])
    loaded = run(["podman", "load", "-i", str(archive)], env=env)
    run(["podman", "tag", loaded.strip().split()[-1], ref], env=env)
    return env


# --- an image `apexrl world pack --profile mercor` wrote, started as its contract says ------


def unpack_image(archive: Path, work: Path) -> tuple[Path, dict]:
    """The image's root folder (skopeo + umoci, independent OCI tools) and its config."""
    import json

    layout = work / "layout"
    run(["skopeo", "copy", f"oci-archive:{archive}", f"oci:{layout}:img"])
    bundle = work / "bundle"
    run(["umoci", "unpack", "--rootless", "--image", f"{layout}:img", str(bundle)])
    return bundle / "rootfs", json.loads((bundle / "config.json").read_text())


def start_in_sandbox(rootfs: Path, spec: dict, slug: str, port: int, log: Path) -> subprocess.Popen:
    """`/app/tools/start.sh <slug>` from the unpacked image, in a bubblewrap sandbox of the
    local environment's kind (apexrl.envs.local.sandbox) whose /filesystem, /.apps_data, /app,
    /opt/apexrl and /usr/local are the image's. The image's base is empty here, so the
    interpreter is this test's (APEXRL_PYTHON; its folders are bound read-only), while
    the apexrl code that runs is the image's copy (PYTHONPATH=/opt/apexrl). The gateway
    listens on 127.0.0.1:`port` (the image's 8000 would collide between tests)."""
    from apexrl.envs.local import sandbox

    binds = [
        ("/filesystem", rootfs / "filesystem"),
        ("/.apps_data", rootfs / ".apps_data"),
        ("/app", rootfs / "app"),
        ("/opt/apexrl", rootfs / "opt" / "apexrl"),
        ("/usr/local", rootfs / "usr" / "local"),
        ("/tmp", log.parent / "sandbox-tmp"),
    ]
    (log.parent / "sandbox-tmp").mkdir(exist_ok=True)
    cwd = spec["process"]["cwd"]
    argv = sandbox.bwrap_argv(binds, cwd=cwd, network=True, limits=sandbox.SandboxLimits())
    env = dict(e.split("=", 1) for e in spec["process"]["env"])
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        APEXRL_PYTHON=sys.executable,
        APEXRL_HOST="127.0.0.1",
        APEXRL_PORT=str(port),
        HOME="/tmp",
        NO_COLOR="1",
    )
    start = spec["process"]["args"]
    assert start == ["/app/tools/start.sh"], start  # the image's entrypoint is the contract's
    with open(log, "w") as fh:
        return subprocess.Popen(
            [*argv, *start, slug],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


# --- archipelago's own environment gateway (what Mercor's images run), in the sandbox ---


def start_peer_environment(
    checkout: Path, world: Path, servers: list[str], port: int, work: Path
) -> tuple[subprocess.Popen, dict]:
    """archipelago's environment gateway (`environment/`, built by `make peer`) in a
    bubblewrap sandbox of the local environment's kind, with the world's folders at
    /filesystem and /.apps_data as in Mercor's images and the built runtimes shown
    read-only; listening on 127.0.0.1:`port`. Returns the process and the `/apps`
    configuration that mounts `servers` (apexrl's names for them: filesystem, word,
    excel, ...; the recipe's tool prefixes) from their built runtimes."""
    import os

    from apexrl.envs.local import sandbox
    from apexrl.peer.runtime import project_runtime, runtimes

    env_rt = project_runtime(checkout, "environment", build=False)
    rts = runtimes(checkout, servers=servers, build=False)
    python_home = Path(os.path.realpath(env_rt / ".venv" / "bin" / "python")).parents[1]
    tmp = work / "sandbox-tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    binds = [
        ("/filesystem", world / "filesystem"),
        ("/.apps_data", world / ".apps_data"),
        ("/tmp", tmp),
    ]
    argv = sandbox.bwrap_argv(binds, cwd=str(env_rt), network=True, limits=sandbox.SandboxLimits())
    shown = [str(env_rt), str(python_home), *sorted({str(rt.root) for rt in rts.values()})]
    at = argv.index("--chdir")
    for p in shown:
        argv[at:at] = ["--ro-bind", p, p]
        at += 3
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [str(env_rt / ".venv" / "bin" / "python"), "-m", "uvicorn", "runner.main:app"]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    with open(work / "peer-environment.log", "w") as fh:
        proc = subprocess.Popen(
            [*argv, *cmd], env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    apps = {"mcpServers": {}}
    for name, rt in rts.items():
        server_env = {"MCP_TRANSPORT": "stdio", "USE_INDIVIDUAL_TOOLS": "true", "HOME": "/tmp"}
        if rt.shim is not None:
            server_env["SANDBOX_LIBRARY_PATH"] = str(rt.shim)
        apps["mcpServers"][name] = {
            "transport": "stdio",
            "command": str(rt.python),
            "args": ["main.py"],
            "cwd": str(rt.main_dir),
            "env": server_env,
        }
    return proc, apps
