"""Issue 29: a per-trial memory cap. RLIMIT_AS bounds each process and RLIMIT_NPROC their
count, so two processes of one trial could together hold more than either limit says.
Where apexrl runs as root and the host has a writable memory cgroup (cgroup v1's
`memory` hierarchy on these hosts; v2 where apexrl's group delegates `memory`), each
trial gets a group of its own ($APEXRL_SANDBOX_TRIAL_MEMORY_BYTES): the gateway, its
code tool and every exec join it before they run anything of the trial, the sum is
capped, and stopping the trial removes the group with whatever was left in it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from apexrl.envs.local import memcg
from tests.trial.conftest import task_named
from tests.trial.test_code_tool_sandbox import _call
from tests.trial.test_local_env import make_env

pytestmark = pytest.mark.integration

MIB = 1 << 20
CAP = 384 * MIB
# one process holding `mib` MiB for a moment (bytes written, so the pages are charged)
HOLD = (
    '/usr/bin/python3 -c \'import time; b = b"x" * ({mib} << 20); time.sleep({s}); print("held")\''
)


def _both(mib: int) -> str:
    """Two processes of the trial, each under any per-process limit, together over CAP."""
    one = HOLD.format(mib=mib, s=4)
    return f"({one}) & ({one}) & wait; echo done"


def test_the_host_gives_a_writable_memory_cgroup():
    """These hosts (cgroup v1 hybrid, tests as root) do: the cap below is really exercised."""
    assert os.geteuid() == 0
    found = memcg.parent()
    assert found is not None, "no writable memory cgroup for apexrl's process"


@pytest.mark.parametrize("forkserver", ["1", "0"])
def test_a_trial_is_capped_as_a_whole(tmp_path, worlds, task_dirs, monkeypatch, forkserver):
    monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", forkserver)
    monkeypatch.setenv("APEXRL_LOCAL_PREWARM", "0")
    monkeypatch.setenv("APEXRL_SANDBOX_TRIAL_MEMORY_BYTES", str(CAP))
    task = task_named(task_dirs, "steerco-40fc")
    env = make_env(task, tmp_path / "trial", worlds)

    async def go():
        await env.start(force_build=False)
        r = {}
        try:
            group = env._slot.group
            r["group"] = group
            r["limit"] = group.limit()
            gateway_pid = env._slot.proc.pid
            r["gateway_in_group"] = _in_group(group, gateway_pid)
            r["small"] = await env.exec(HOLD.format(mib=64, s=0), timeout_sec=60)
            r["big"] = await env.exec(_both(250), timeout_sec=60)
            r["oom_after_exec"] = group.oom_kills()
            r["code"] = await _call(env, "code", {"command": _both(250)})
            r["oom_after_code"] = group.oom_kills()
            # something the trial leaves running is in the group, and goes with it
            await env.exec("(sleep 300 &) ; echo started", timeout_sec=20)
            r["left"] = len(group.pids())
        finally:
            await env.stop(delete=True)
        return r

    r = asyncio.run(go())
    group = r["group"]
    assert r["limit"] == CAP
    assert r["gateway_in_group"], "the gateway did not join the trial's group"
    assert r["small"].return_code == 0 and "held" in r["small"].stdout, r["small"]
    # 2 x 250 MiB > 384 MiB: the kernel killed one of them at the trial's cap
    assert r["big"].stdout.count("held") < 2, r["big"]
    assert r["oom_after_exec"] >= 1
    assert r["code"].count("held") < 2, r["code"]
    assert r["oom_after_code"] > r["oom_after_exec"]
    assert r["left"] >= 1
    assert not group.path.exists(), "the trial's group outlived the trial"


def _in_group(group: memcg.TrialGroup, pid: int) -> bool:
    """pid, or a process it started (bwrap's child, the forked gateway), is in the group."""
    pids = set(group.pids())
    if pid in pids:
        return True
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return False
    return any(int(c) in pids or _in_group(group, int(c)) for c in children)


def test_no_cap_no_group():
    assert memcg.group_for("apexrl-trial-1-x", None) is None


def test_stale_groups_of_dead_owners_are_swept():
    base, _ = memcg.parent()
    dead = base / "apexrl-trial-999999999-abc"
    mine = base / f"apexrl-trial-{os.getpid()}-abc"
    dead.mkdir()
    mine.mkdir()
    try:
        assert memcg.sweep_stale(base) >= 1
        assert not dead.exists() and mine.exists()
    finally:
        for d in (dead, mine):
            if d.exists():
                d.rmdir()
