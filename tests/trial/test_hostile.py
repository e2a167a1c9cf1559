"""A hostile oracle: a task whose solve.sh tries each sandbox escape of issue 16 in a real
bubblewrap trial and records what happened; the test asserts every escape failed."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import run_trial
from tests.trial.conftest import RUNTIMES, task_named

pytestmark = pytest.mark.integration

HOSTILE = r"""#!/usr/bin/env bash
out=/logs/agent/escapes.txt
rec() { echo "$1=$2" >> "$out"; }
rec uid_inside "$(id -u)"
rec uid_map "$(cat /proc/self/uid_map | tr -s ' ' | tr ' ' ,)"
try() { if eval "$2" 2>/dev/null; then rec "$1" "$3"; else rec "$1" refused; fi; }
try core_pattern "echo '|/tmp/pwn %p' > /proc/sys/kernel/core_pattern" WROTE
try drop_caches "echo 1 > /proc/sys/vm/drop_caches" WROTE
try sysrq "echo b > /proc/sysrq-trigger" WROTE
try host_loopback "(exec 3<>/dev/tcp/127.0.0.1/__PORT__)" CONNECTED
if cat /etc/shadow >/dev/null 2>&1; then rec shadow READ; else rec shadow refused; fi
if [ -e __SECRET__ ]; then rec host_file VISIBLE; else rec host_file refused; fi
if env | grep -q HOST-SECRET-VALUE; then rec env_secret LEAKED; else rec env_secret absent; fi
rec allowed_var "$OK_VAR"
rec leak_var "${LEAK:-unset}"
try on_cmdline "tr '\\0' ' ' < /proc/1/cmdline | grep -q ALLOWED-VALUE" YES
# a fork bomb stops at the trial's process limit
rec forks "$(python3 -c '
import os, signal, time
kids = []
while len(kids) < 2000:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
for k in kids:
    os.kill(k, signal.SIGKILL)
    os.waitpid(k, 0)
print(len(kids))
')"
# memory: one process cannot take more than its limit
try big_alloc "python3 -c 'b = bytearray(3 * 1024**3)'" ALLOCATED
# links to host files planted where the host reads
ln -s __SECRET__ /logs/agent/trajectory.json
ln -s __SECRET__ /logs/agent/stolen.log
ln -s / /logs/agent/rootdir
# something left running after the trial
setsid nohup sleep 4242 >/dev/null 2>&1 &
bash /solution/solve_orig.sh
"""


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        while not self.stop:
            try:
                c, _ = self.sock.accept()
                self.hits += 1
                c.close()
            except OSError:
                continue

    def close(self) -> None:
        self.stop = True
        self.t.join(2)
        self.sock.close()


def _sleepers() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"4242"]:
                    out.append(int(p.name))
            except OSError:
                pass
    return out


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_hostile_oracle_every_escape_fails(
    tmp_path, worlds, task_dirs, task_copy, monkeypatch, runtime
):
    monkeypatch.setenv("APEXRL_SANDBOX_NPROC", "300")
    monkeypatch.setenv("APEXRL_SANDBOX_MEMORY_BYTES", str(2 * 1024**3))
    monkeypatch.setenv("HOST_SECRET", "HOST-SECRET-VALUE")
    monkeypatch.setenv("ALLOWED_VAR", "ALLOWED-VALUE")
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-ONLY-CONTENT")
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    toml = (task / "task.toml").read_text()
    assert 'network_mode = "no-network"' in toml  # what convert writes by default
    # a dataset asking for host secrets: only names the user passes are interpolated
    toml = toml.replace(
        "[environment.env]\n",
        '[environment.env]\nLEAK = "${HOST_SECRET}"\nOK_VAR = "${ALLOWED_VAR}"\n',
    )
    (task / "task.toml").write_text(toml)
    sol = task / "solution"
    (sol / "solve.sh").rename(sol / "solve_orig.sh")
    listener = _Listener()
    try:
        script = HOSTILE.replace("__PORT__", str(listener.port)).replace("__SECRET__", str(secret))
        (sol / "solve.sh").write_text(script)
        (sol / "solve.sh").chmod(0o755)
        logs = tmp_path / "trial"
        cfg = TrialConfig(
            agent="oracle",
            worlds_dir=worlds,
            logs_dir=logs,
            pass_env=["ALLOWED_VAR"],
            runtime=runtime,
        )
        out = run_trial(task, cfg)
    finally:
        listener.close()
    assert (logs / "agent" / "escapes.txt").is_file(), out
    rec = dict(
        line.split("=", 1) for line in (logs / "agent" / "escapes.txt").read_text().splitlines()
    )
    assert out.result.status == "complete" and out.result.reward == 1.0, (out, rec)
    assert rec["uid_inside"] == "0"  # root inside ...
    inside, outside, _ = rec["uid_map"].strip(",").split(",")
    assert inside == "0" and outside != "0"  # ... an unprivileged uid outside
    if os.geteuid() == 0:
        assert int(outside) >= 200_000
    for knob in ("core_pattern", "drop_caches", "sysrq"):
        assert rec[knob] == "refused", (knob, rec)
    assert rec["host_loopback"] == "refused" and listener.hits == 0
    assert rec["shadow"] == "refused" and rec["host_file"] == "refused"
    assert rec["env_secret"] == "absent" and rec["leak_var"] == "unset"
    assert rec["allowed_var"] == "ALLOWED-VALUE"  # passed, through the environment ...
    assert rec["on_cmdline"] == "refused"  # ... never on bwrap's command line
    assert 0 < int(rec["forks"]) < 300  # stopped by the limit, not by the script
    assert rec["big_alloc"] == "refused"
    # the planted links were removed from the run and recorded, never followed
    agent = logs / "agent"
    assert not (agent / "trajectory.json").exists() and not (agent / "stolen.log").exists()
    refused = (logs / "refused_links.json").read_text()
    assert "agent/stolen.log" in refused and "agent/rootdir" in refused
    assert out.trajectory_path is None
    for p in logs.rglob("*"):
        assert not p.is_symlink()
        if p.is_file():
            assert b"HOST-ONLY-CONTENT" not in p.read_bytes()
    # nothing left running
    assert _sleepers() == []


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_gateway_only_for_its_trial_and_code_tool_offline(tmp_path, worlds, task_dirs, runtime):
    """Another trial's sandbox that reaches the gateway's port gets 404 without this
    trial's token; the code tool of a no-network task cannot reach the host either."""
    import asyncio

    import httpx

    from apexrl.agent.mcp_tools import ToolBox
    from tests.trial.test_local_env import make_env

    listener = _Listener()
    task = task_named(task_dirs, "steerco-40fc")  # converted: network_mode = "no-network"
    from harbor.models.task.config import NetworkPolicy

    # what Harbor's trial hands the environment for a task that says no network
    env = make_env(
        task,
        tmp_path / "trial",
        worlds,
        network_policy=NetworkPolicy(network_mode="no-network"),
        runtime=runtime,
    )
    connect = f"import socket; socket.create_connection(('127.0.0.1', {listener.port}), 2)"
    probe = f'python3 -c "{connect}" && echo CONNECTED || echo refused'

    async def go():
        await env.start(force_build=False)
        try:
            url = env.gateway_url
            assert url is not None
            base = "/".join(url.split("/")[:3])  # http://127.0.0.1:PORT, no token
            async with httpx.AsyncClient() as c:
                guessed = [
                    (await c.get(base + "/health")).status_code,
                    (await c.post(base + "/mcp/", json={})).status_code,
                    (await c.get(base + "/mcp")).status_code,
                ]
                own = (await c.get(env.gateway_health_url)).status_code
            box = ToolBox(url)
            await box.connect()
            try:
                name = next(n for n in box.names if n.startswith("code"))
                arg = "code" if name == "code_execution_code_exec" else "command"
                res = await box.call(name, {arg: probe}, timeout_s=30)
            finally:
                await box.close()
            return guessed, own, res
        finally:
            await env.stop(delete=True)

    try:
        guessed, own, res = asyncio.run(go())
    finally:
        listener.close()
    assert guessed == [404, 404, 404] and own == 200
    assert "refused" in res.text and "CONNECTED" not in res.text, res
    assert listener.hits == 0
