"""Gateways forked from the pre-imported fork server (apexrl as root): two trials of the
same world served at once stay apart. Trial B's code tool (which runs inside B's
gateway sandbox) cannot see trial A's writes (world, /tmp, /dev/shm), its token, its
processes or its trial folder, runs as another host uid, and A's leftovers die with A."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from apexrl.envs.local import warm
from tests.trial.conftest import task_named
from tests.trial.test_local_env import make_env, pid_alive

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the fork server is used when apexrl is root"),
]

A_WRITES = (
    "echo A-WORLD-SECRET > /world/filesystem/a_secret.txt; "
    "echo A-TMP > /tmp/a_tmp.txt; echo A-SHM > /dev/shm/a_shm; "
    "setsid nohup sleep 4343 >/dev/null 2>&1 & "
    "echo done"
)


def _b_probe(token_a: str, host_secret: Path) -> str:
    return "; ".join(
        [
            "echo UID=$(id -u) MAP=$(tr -s ' ' < /proc/self/uid_map | tr ' ' ,)",
            "ls -A /world/filesystem /tmp /dev/shm 2>&1",
            "ls -A /trials 2>&1 | head -5",
            "echo PS=$(ls /proc | grep -c '^[0-9]')",
            "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null",
            # the pattern is written in two halves, so no command line holds the token
            f"printf '%s%s' {token_a[:8]} {token_a[8:]} > /dev/shm/pattern",
            "grep -rlsF -f /dev/shm/pattern /proc/[0-9]*/environ /proc/[0-9]*/cmdline /world "
            "/tmp 2>/dev/null && echo TOKEN_FOUND || echo TOKEN_ABSENT",
            f"cat {host_secret} 2>/dev/null || echo HOST_FILE_REFUSED",
            "(echo x > /proc/sys/kernel/core_pattern) 2>/dev/null && echo KNOB_WRITTEN "
            "|| echo KNOB_REFUSED",
            "touch /usr/x-from-b 2>/dev/null && echo USR_WRITTEN || echo USR_REFUSED",
            "touch /x-from-b 2>/dev/null && echo ROOT_WRITTEN || echo ROOT_REFUSED",
        ]
    )


def _wait_gone(pids: list[int], timeout_s: float) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(pid_alive(p) for p in pids)


def _sleepers() -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"4343"]:
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_two_forked_gateways_of_one_world_stay_apart(tmp_path, worlds, task_dirs, monkeypatch):
    from apexrl.agent.mcp_tools import ToolBox

    monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", "1")
    host_secret = tmp_path / "host-secret.txt"
    host_secret.write_text("HOST-ONLY-CONTENT")
    task = task_named(task_dirs, "steerco-40fc")
    env_a = make_env(task, tmp_path / "a", worlds)
    env_b = make_env(task, tmp_path / "b", worlds)

    async def code(env, command: str) -> str:
        box = ToolBox(env.gateway_url)
        await box.connect()
        try:
            name = next(n for n in box.names if n.startswith("code"))
            arg = "code" if name == "code_execution_code_exec" else "command"
            res = await box.call(name, {arg: command}, timeout_s=60)
        finally:
            await box.close()
        assert res.status == "ok", res
        return res.text

    async def go():
        await asyncio.gather(env_a.start(force_build=False), env_b.start(force_build=False))
        try:
            assert isinstance(env_a._slot.proc, warm.ForkedGateway)
            assert isinstance(env_b._slot.proc, warm.ForkedGateway)
            token_a = env_a.gateway_url.rstrip("/").split("/")[-2]
            assert token_a not in env_b.gateway_url
            wrote = await code(env_a, A_WRITES)
            a_id = await code(env_a, "echo MAP=$(tr -s ' ' < /proc/self/uid_map | tr ' ' ,)")
            seen = await code(env_b, _b_probe(token_a, host_secret))
            running = _sleepers()
            return wrote, a_id, seen, running, token_a
        finally:
            await env_a.stop(delete=True)
            await env_b.stop(delete=True)

    wrote, a_id, seen, running, token_a = asyncio.run(go())
    seen, a_id = json.loads(seen)["output"], json.loads(a_id)["output"]
    assert "done" in wrote
    # A's writes, token and processes are nowhere in B's view
    for mark in ("a_secret.txt", "a_tmp.txt", "a_shm", "A-WORLD-SECRET", "sleep 4343"):
        assert mark not in seen, (mark, seen)
    lines = set(seen.splitlines())  # (the probe's own command line is in its output too)
    assert "TOKEN_ABSENT" in lines and "TOKEN_FOUND" not in lines
    assert token_a not in seen
    # no other trial's folder: /trials is unmounted (an empty mount point)
    assert "apexrl-trial-" not in seen
    assert "HOST_FILE_REFUSED" in lines and "HOST-ONLY-CONTENT" not in seen
    assert {"KNOB_REFUSED", "USR_REFUSED", "ROOT_REFUSED"} <= lines
    # its own PID namespace: a handful of processes (the gateway, the shell, ls...)
    n_procs = int(seen.split("PS=")[1].split()[0])
    assert n_procs < 10, seen
    # root inside, a different unprivileged host uid outside for each trial
    map_b = seen.split("MAP=")[1].split()[0].strip(",").split(",")
    map_a = a_id.split("MAP=")[1].split()[0].strip(",").split(",")
    assert map_b[0] == map_a[0] == "0"
    # each code command runs in a user namespace of its own inside the trial's (its root
    # is the gateway's root, issue 29); each trial's host uid is its own
    assert map_b[1] == map_a[1] == "0"
    uid_a, uid_b = env_a._slot.uid, env_b._slot.uid
    assert uid_a >= 200_000 and uid_b >= 200_000 and uid_a != uid_b
    assert "UID=0" in seen
    # A's background process died with its code command (a PID namespace of its own,
    # issue 29), before A's trial ended
    assert running == [], running
    assert _sleepers() == []
    # stop() closes the lifelines; the outer processes exit and are reaped by the fork
    # server, which under load can lag stop()'s bounded wait a little
    gone = _wait_gone([env_a.gateway_pid, env_b.gateway_pid], timeout_s=15)
    assert gone, "a trial's gateway outlived its stop()"


CRASH = """
import asyncio, json, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.trial.test_local_env import make_env
env = make_env(Path({task!r}), Path({trial!r}), Path({worlds!r}))
async def go():
    await env.start(force_build=False)
    outer = env.gateway_pid
    inner = int(Path(f"/proc/{{outer}}/task/{{outer}}/children").read_text().split()[0])
    print(json.dumps({{"outer": outer, "inner": inner}}), flush=True)
    await asyncio.sleep(600)
asyncio.run(go())
"""


def test_a_crashed_driver_takes_its_forked_gateways_along(tmp_path, worlds, task_dirs):
    """SIGKILL of the process that owns the fork server: the fork server, each trial's
    outer process and the gateway itself (PID 1 of the trial's namespace) all die."""
    import signal
    import subprocess
    import sys
    import time

    task = task_named(task_dirs, "steerco-40fc")
    script = CRASH.format(
        root=str(Path(__file__).resolve().parents[2]),
        task=str(task),
        trial=str(tmp_path / "crashed"),
        worlds=str(worlds),
    )
    env = {**os.environ, "APEXRL_LOCAL_WORKDIR": str(tmp_path / "work")}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env)
    try:
        info = json.loads(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while (pid_alive(info["outer"]) or pid_alive(info["inner"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(info["outer"]) and not pid_alive(info["inner"])


def test_a_forked_gateway_that_cannot_start_turns_the_fork_server_off(
    tmp_path, worlds, task_dirs, monkeypatch
):
    """A child that fails before its gateway is warm fails its own start (a retryable
    sandbox_gateway error, its log in the message); the process then starts fresh
    gateway sandboxes for that work folder, and they work."""
    from apexrl.envs.local import sandbox
    from apexrl.envs.local.environment import SandboxError

    work = tmp_path / "work"
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(work))
    monkeypatch.setenv("APEXRL_LOCAL_PREWARM", "0")
    task = task_named(task_dirs, "steerco-40fc")
    srv = warm.server_for(work, 60.0)
    assert srv is not None
    try:
        # a request the fork server's child refuses (not one of its staged folders)
        monkeypatch.setattr(sandbox, "zygote_rebinds", lambda: [("/etc", "/root/x")])
        env1 = make_env(task, tmp_path / "t1", worlds)
        with pytest.raises(SandboxError, match="bad rebind"):
            asyncio.run(env1.start(force_build=False))
        monkeypatch.undo()
        monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(work))
        monkeypatch.setenv("APEXRL_LOCAL_PREWARM", "0")
        env2 = make_env(task, tmp_path / "t2", worlds)

        async def go():
            await env2.start(force_build=False)
            try:
                return type(env2._slot.proc).__name__, await env2.exec("echo ok", timeout_sec=30)
            finally:
                await env2.stop(delete=True)

        kind, res = asyncio.run(go())
        assert kind == "Popen" and res.stdout.strip() == "ok"
    finally:
        warm._FAILED.pop(str(work.resolve()), None)
        s = warm._SERVERS.pop(str(work.resolve()), None)
        if s is not None:
            s.close()
