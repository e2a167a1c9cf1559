"""Kernel knobs stay out of an exec's reach (`apexrl.envs.local.sandbox.bwrap_argv`, the
command line every exec of the local environment starts with): /proc/sys and the other
knob folders are mounted read-only over the sandbox's own /proc, whatever the sandbox's
user namespace could otherwise write there (issue 42: nothing checked it; the hostile-exec
tests see a write refused, but the uid switch refuses it first (EACCES) and hides a
missing read-only mount, so this test reads the mount table and the folder's flags)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from apexrl.envs.local import sandbox

_PROBE = r"""
import errno, json, os
out = {}
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches"):
    try:
        fd = os.open(path, os.O_WRONLY)
        os.close(fd)
        out[path] = "opened"
    except OSError as e:
        out[path] = errno.errorcode[e.errno]
mounts = {}
with open("/proc/self/mountinfo") as f:
    for line in f:
        parts = line.split()
        mounts[parts[4]] = parts[5].split(",")
knobs = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
out["mounts"] = {p: mounts.get(p) for p in ("/proc", *knobs)}
out["st_rdonly"] = {p: bool(os.statvfs(p).f_flag & os.ST_RDONLY)
                    for p in ("/proc", *knobs) if os.path.exists(p)}
print(json.dumps(out))
"""


@pytest.fixture
def uid():
    u = sandbox.new_sandbox_uid()  # as an exec's: the trial's host uid when apexrl is root
    yield u
    sandbox.release_uid(u)


@pytest.mark.skipif(sandbox.find_bwrap() is None, reason="the local sandbox is bubblewrap")
@pytest.mark.parametrize("network", [False, True])
def test_proc_sys_is_read_only_in_an_exec(uid, network):
    argv = sandbox.bwrap_argv([], cwd="/", network=network, uid=uid)
    r = subprocess.run(
        [*argv, sys.executable, "-I", "-c", _PROBE],
        env=sandbox.base_env({}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches"):
        assert out[path] in ("EROFS", "EACCES", "EPERM"), (path, out)
    mounts, rdonly = out["mounts"], out["st_rdonly"]
    assert "ro" in mounts["/proc/sys"] and rdonly["/proc/sys"] is True, out
    for p in sandbox.PROC_READ_ONLY:  # each knob folder the host has
        if os.path.exists(p):
            assert "ro" in mounts[p] and rdonly[p] is True, (p, out)
    assert "rw" in mounts["/proc"] and rdonly["/proc"] is False, out  # the rest of /proc


def test_every_knob_folder_is_bound_read_only():
    """Each folder of PROC_READ_ONLY the host has is bound read-only at its own path,
    after the sandbox's /proc is mounted (a bind before it would be hidden)."""
    assert sandbox.PROC_READ_ONLY == (
        "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"
    )  # fmt: skip
    if sandbox.find_bwrap() is None:
        pytest.skip("the local sandbox is bubblewrap")
    argv = sandbox.bwrap_argv([], cwd="/", network=False)
    proc = argv.index("--proc")
    assert argv[proc + 1] == "/proc"
    for p in sandbox.PROC_READ_ONLY:
        if os.path.exists(p):
            at = argv.index(p)
            assert argv[at - 1 : at + 2] == ["--ro-bind", p, p]
            assert at > proc
