"""Issue 29, findings 2 and 3: the code tool is a sandbox of its own, and the gateway
imports nothing from the trial's world.

2. The code tool's shell used to run in the gateway's PID and user namespaces, with a
   dumpable gateway: ptrace plus pidfd_getfd took the gateway's host-network sockets,
   and /proc/1/net/tcp listed every host listening port. Each command now has its own
   user, PID, mount (own /proc) and, with no network, network namespaces, no_new_privs,
   and the gateway's seccomp filter (no ptrace, pidfd_getfd, process_vm_*, keyrings).
3. The fresh gateway ran `python -m` in /world, so /world/fpdf.py shadowed fpdf.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.trial.conftest import task_named
from tests.trial.test_hostile import _Listener
from tests.trial.test_local_env import make_env

pytestmark = pytest.mark.integration

PROBE = r"""
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
port, gw_port = int(sys.argv[1]), int(sys.argv[2])
out = {}
out["ptrace_pid1"] = libc.ptrace(16, 1, 0, 0) == 0  # PTRACE_ATTACH
out["ptrace_parent"] = libc.ptrace(16, os.getppid(), 0, 0) == 0
pidfd = libc.syscall(434, 1, 0)  # pidfd_open(1)
out["pidfd_getfd"] = pidfd >= 0 and any(
    libc.syscall(438, pidfd, fd, 0) >= 0 for fd in range(0, 64)
)
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
out["process_vm_readv"] = libc.syscall(310, 1, iov, 1, iov, 1, 0) >= 0
out["keyctl"] = libc.syscall(250, 0, -3, 0, 0, 0) >= 0  # KEYCTL_GET_KEYRING_ID, user


def procs():  # none where /proc cannot be listed (archipelago's code server blocks it)
    try:
        return [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []


listed = ""
for pid in procs() + ["self"]:
    for f in ("tcp", "tcp6"):
        try:
            listed += open(f"/proc/{pid}/net/{f}").read()
        except OSError:
            pass
out["host_port_listed"] = any(f":{p:04X} " in listed for p in (port, gw_port))
cmds = []
for p in procs():
    if p.isdigit():
        try:
            cmds.append(open(f"/proc/{p}/cmdline", "rb").read())
        except OSError:
            pass
out["gateway_visible"] = any(b"apexrl" in c or b"bwrap" in c for c in cmds)
out["no_new_privs"] = libc.prctl(39, 0, 0, 0, 0) == 1
try:
    socket.create_connection(("127.0.0.1", port), 2)
    out["connected"] = True
except OSError:
    out["connected"] = False
open("probe.json", "w").write(json.dumps(out))
"""


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _gateways(root_pid: int) -> dict[int, str]:
    """pid -> /proc status of the gateway's Python processes under `root_pid`."""
    out = {}
    for pid in _descendants(root_pid):  # the root: bwrap, or the fork server's C1
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"python" in cmd.split(b"\0")[0] and b"apexrl.envs." in cmd:
                out[pid] = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            pass
    return out


async def _call(env, name_prefix: str, args: dict) -> str:
    from apexrl.agent.mcp_tools import ToolBox

    box = ToolBox(env.gateway_url)
    await box.connect()
    try:
        name = next(n for n in box.names if n.startswith(name_prefix))
        if name_prefix == "code" and name == "code_execution_code_exec":
            args = {"code": args["command"]}
        res = await box.call(name, args, timeout_s=60)
    finally:
        await box.close()
    return res.text


@pytest.mark.parametrize(
    ("forkserver", "runtime"),
    [
        ("1", "apexrl"),
        ("0", "apexrl"),
        # archipelago's code server, in the same sandbox (a fresh gateway, no fork server)
        pytest.param("0", "archipelago", marks=pytest.mark.peer, id="0-archipelago"),
    ],
)
def test_code_tool_cannot_reach_the_gateway_or_the_host(
    tmp_path, worlds, task_dirs, monkeypatch, forkserver, runtime
):
    from harbor.models.task.config import NetworkPolicy

    monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", forkserver)
    monkeypatch.setenv("APEXRL_LOCAL_PREWARM", "0")
    listener = _Listener()
    task = task_named(task_dirs, "steerco-40fc")
    env = make_env(
        task,
        tmp_path / "trial",
        worlds,
        network_policy=NetworkPolicy(network_mode="no-network"),
        runtime=runtime,
    )
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)

    async def go():
        await env.start(force_build=False)
        try:
            await env.upload_file(probe, "/world/filesystem/probe.py")
            gw_port = int(env.gateway_url.split("/")[2].rsplit(":", 1)[1])
            cmd = f"python3 probe.py {listener.port} {gw_port}"
            text = await _call(env, "code", {"command": cmd})
            out = env.world_dir / "filesystem" / "probe.json"
            rec = json.loads(out.read_text()) if out.is_file() else None
            return text, rec, _gateways(env.gateway_pid)
        finally:
            await env.stop(delete=True)

    try:
        text, rec, gateways = asyncio.run(go())
    finally:
        listener.close()
    assert rec is not None, text
    for escape in (
        "ptrace_pid1",
        "ptrace_parent",
        "pidfd_getfd",
        "process_vm_readv",
        "keyctl",
        "host_port_listed",
        "gateway_visible",
        "connected",
    ):
        assert rec[escape] is False, (escape, rec)
    assert rec["no_new_privs"] is True, rec
    assert listener.hits == 0
    # the gateway itself: under the seccomp filter, no_new_privs
    assert gateways, "no gateway process found"
    for status in gateways.values():
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        assert fields["Seccomp"].strip() == "2" and fields["NoNewPrivs"].strip() == "1"


def test_fresh_gateway_imports_nothing_from_the_world(tmp_path, worlds, task_dirs, monkeypatch):
    """A module written into /world (by a no-network exec) is not what the gateway imports."""
    from harbor.models.task.config import NetworkPolicy

    monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", "0")
    monkeypatch.setenv("APEXRL_LOCAL_PREWARM", "0")
    task = task_named(task_dirs, "steerco-40fc")
    env = make_env(
        task, tmp_path / "trial", worlds, network_policy=NetworkPolicy(network_mode="no-network")
    )
    shadow = "open('/world/filesystem/SHADOWED', 'w').write('imported from /world')\n"

    async def go():
        await env.start(force_build=False)
        try:
            for folder in ("/world", "/world/filesystem", "/tmp", "/root"):
                r = await env.exec(f'printf %s "{shadow}" > {folder}/fpdf.py', timeout_sec=20)
                assert r.return_code == 0, r
            text = await _call(
                env,
                "pdfs_create",
                {
                    "directory": "/outputs",
                    "file_name": "memo.pdf",
                    "content": [{"type": "paragraph", "text": "hello"}],
                },
            )
            shadowed = (env.world_dir / "filesystem" / "SHADOWED").exists()
            made = (env.world_dir / "filesystem" / "outputs" / "memo.pdf").is_file()
            return text, shadowed, made
        finally:
            await env.stop(delete=True)

    text, shadowed, made = asyncio.run(go())
    assert not shadowed, text
    assert made and text == "PDF memo.pdf created at /outputs/memo.pdf", text
