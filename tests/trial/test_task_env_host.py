"""Issue 29, finding 1: a task's env values never reach a host process.

A task ships a shared library whose constructor appends to a marker file on the host.
Named in `LD_PRELOAD` by the task's `[environment.env]` (or an exec's env), it used to be
loaded into bwrap itself, on the host, as root, before any namespace existed. Now
(layer 1) env values go to the final process inside the sandbox through a file
descriptor, never into the environment of bwrap, prlimit, setpriv or unshare; and
(layer 2) names that change how programs load are refused at convert, validate and
trial time."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from apexrl.envs.local.environment import SandboxError
from tests.trial.conftest import task_named
from tests.trial.test_local_env import make_env

pytestmark = pytest.mark.integration

EVIL_C = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
    char comm[64] = {0};
    FILE *c = fopen("/proc/self/comm", "r");
    if (c) { if (!fgets(comm, sizeof comm, c)) comm[0] = 0; fclose(c); }
    FILE *f = fopen(MARKER, "a");
    if (f) { fprintf(f, "euid=%d comm=%s", (int)geteuid(), comm); fclose(f); }
}
"""


def _evil_library(task: Path, marker: Path) -> Path:
    """The task's own .so (shipped in its folder): writes `marker` wherever it loads."""
    src = task / "environment" / "evil.c"
    lib = task / "environment" / "evil.so"
    src.write_text(EVIL_C)
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler builds the test's library (the Makefile needs one too)"
    subprocess.run(
        [cc, "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(lib), str(src)], check=True
    )
    return lib


def _with_task_env(task: Path, lines: str) -> None:
    toml = (task / "task.toml").read_text()
    assert "[environment.env]\n" in toml
    (task / "task.toml").write_text(
        toml.replace("[environment.env]\n", "[environment.env]\n" + lines)
    )


def test_ld_preload_in_task_env_never_runs_on_the_host(tmp_path, worlds, task_dirs, task_copy):
    """The exploit as a dataset ships it: refused before anything starts, marker absent."""
    marker = tmp_path / "host-marker.txt"
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    lib = _evil_library(task, marker)
    _with_task_env(task, f'LD_PRELOAD = "{lib}"\n')

    async def go():
        env = make_env(task, tmp_path / "trial", worlds)
        await env.start(force_build=False)
        try:
            return await env.exec("echo ran", timeout_sec=20)
        finally:
            await env.stop(delete=True)

    with pytest.raises(SandboxError, match="LD_PRELOAD"):
        asyncio.run(go())
    assert not marker.exists(), marker.read_text()


def test_exec_env_reaches_only_the_final_process(tmp_path, worlds, task_dirs, monkeypatch):
    """Layer 1 alone (the name refusal switched off): the value reaches the command inside
    the sandbox, and no host process loads the library."""
    from apexrl.tasks import envnames

    monkeypatch.setattr(envnames, "refused_names", lambda names: [], raising=False)
    marker = tmp_path / "host-marker.txt"
    task = task_named(task_dirs, "steerco-40fc")
    shipped = tmp_path / "ship"
    (shipped / "environment").mkdir(parents=True)
    lib = _evil_library(shipped, marker)
    env = make_env(task, tmp_path / "trial", worlds, gateway=False)
    tricky = "a b\n'c' \"d\" $(touch /tmp/x) `e` \\ ;f"

    async def go():
        await env.start(force_build=False)
        try:
            return await env.exec(
                'printf "%s|%s|%s" "$PROBE" "$TRICKY" "$LD_PRELOAD"; test -e /tmp/x && echo X; :',
                env={"LD_PRELOAD": str(lib), "PROBE": "probe-value", "TRICKY": tricky},
                timeout_sec=20,
            )
        finally:
            await env.stop(delete=True)

    r = asyncio.run(go())
    assert not marker.exists(), marker.read_text()  # bwrap & co never loaded it
    assert r.return_code == 0, r
    assert r.stdout == f"probe-value|{tricky}|{lib}", r  # the command got every value as is


def test_a_trial_of_such_a_task_is_refused_naming_it(tmp_path, worlds, task_dirs, task_copy):
    from apexrl.trial.config import TrialConfig
    from apexrl.trial.run import run_trial

    marker = tmp_path / "host-marker.txt"
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    lib = _evil_library(task, marker)
    toml = (task / "task.toml").read_text()
    toml = toml.replace("[solution.env]\n", f'[solution.env]\nLD_AUDIT = "{lib}"\n')
    (task / "task.toml").write_text(toml)
    cfg = TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=tmp_path / "trial")
    out = run_trial(task, cfg)
    assert out.result.status == "error" and out.result.error_class == "task_env_refused"
    assert task.name in out.error_message and "[solution.env] sets LD_AUDIT" in out.error_message
    assert not marker.exists()
