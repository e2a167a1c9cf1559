"""Issue 29, finding 6: what a trial can write is capped. Trial folders in RAM (a tmpfs
work folder, as /dev/shm/apexrl-local is by default) used to share the host's whole
/dev/shm: 2 x 1 GiB written into /world went through and host memory grew 2 GiB. Each
trial folder is now a tmpfs of its own ($APEXRL_SANDBOX_SCRATCH_BYTES: /world, /tmp,
/root, /tests, /solution together) and every /dev/shm in a sandbox is a tmpfs of
$APEXRL_SANDBOX_SHM_BYTES, for execs and for the gateway and its code tool alike.
Small caps here keep the test cheap."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess

import pytest

from tests.trial.conftest import task_named
from tests.trial.test_code_tool_sandbox import _call
from tests.trial.test_local_env import make_env

pytestmark = pytest.mark.integration

MIB = 1 << 20


@contextlib.contextmanager
def _ram_work_dir(where):
    where.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512m", "apexrl-test", str(where)], check=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _used(path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _write(path: str, mib: int) -> str:
    return (
        f"dd if=/dev/zero of={path} bs=1M count={mib} 2>&1 | grep -o 'No space left'; "
        f"echo size=$(stat -c %s {path})"
    )


@pytest.mark.parametrize(
    ("forkserver", "runtime"),
    [
        ("1", "apexrl"),
        ("0", "apexrl"),
        # archipelago's servers: a fresh gateway sandbox (no fork server), its code tool
        pytest.param("0", "archipelago", marks=pytest.mark.peer, id="0-archipelago"),
    ],
)
def test_a_trial_cannot_fill_host_memory(
    tmp_path, worlds, task_dirs, monkeypatch, forkserver, runtime
):
    assert os.geteuid() == 0, "per-trial tmpfs caps hold when apexrl runs as root (as tests do)"
    monkeypatch.setenv("APEXRL_LOCAL_FORKSERVER", forkserver)
    monkeypatch.setenv("APEXRL_LOCAL_PREWARM", "0")
    monkeypatch.setenv("APEXRL_SANDBOX_SCRATCH_BYTES", str(64 * MIB))
    monkeypatch.setenv("APEXRL_SANDBOX_SHM_BYTES", str(16 * MIB))
    task = task_named(task_dirs, "steerco-40fc")
    with _ram_work_dir(tmp_path / "ram") as ram:
        env = make_env(task, tmp_path / "trial", worlds, work_dir=ram, runtime=runtime)
        before = _used(ram)

        async def go():
            await env.start(force_build=False)
            try:
                r = {}
                r["world"] = await env.exec(
                    _write("/world/big1", 48) + "; " + _write("/world/big2", 48), timeout_sec=60
                )
                r["world_size"] = os.path.getsize(env.world_dir / "big1") + os.path.getsize(
                    env.world_dir / "big2"
                )
                r["peak"] = _used(ram) - before
                await env.exec("rm -f /world/big1 /world/big2", timeout_sec=20)
                r["tmp"] = await env.exec(_write("/tmp/big", 96), timeout_sec=60)
                await env.exec("rm -f /tmp/big", timeout_sec=20)
                r["shm"] = await env.exec(_write("/dev/shm/big", 48), timeout_sec=60)
                # the gateway's code tool: the same trial tmpfs, its own capped /dev/shm
                r["code_world"] = await _call(env, "code", {"command": _write("/world/c", 96)})
                r["code_world_size"] = os.path.getsize(env.world_dir / "c")
                r["code_shm"] = await _call(env, "code", {"command": _write("/dev/shm/c", 48)})
                return r
            finally:
                await env.stop(delete=True)

        r = asyncio.run(go())
        after = _used(ram)
    assert "No space left" in r["world"].stdout, r["world"]
    assert r["world_size"] <= 64 * MIB and r["peak"] <= 66 * MIB, r
    assert "No space left" in r["tmp"].stdout, r["tmp"]
    assert "No space left" in r["shm"].stdout and "size=16777216" in r["shm"].stdout, r["shm"]
    assert "No space left" in r["code_world"], r["code_world"]
    assert r["code_world_size"] <= 64 * MIB
    assert "No space left" in r["code_shm"] and "size=16777216" in r["code_shm"], r["code_shm"]
    assert after <= before + MIB  # the trial's tmpfs went with the trial
    assert not any(p.name.startswith("apexrl-trial-") for p in (tmp_path / "ram").iterdir())
