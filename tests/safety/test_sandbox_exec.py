"""An exec of the local environment, run for real with the command line every exec
starts with (`apexrl.envs.local.sandbox.bwrap_argv` + `with_env`), and what it promises:
namespaces of its own (PID, IPC, UTS, network when offline, user), the trial's uid, no
capability of the host, no_new_privs, the per-process limits, a capped /dev/shm, the
system read-only and only the trial's binds writable, only the given environment.

Kernel knobs stay out of an exec's reach (`apexrl.envs.local.sandbox.bwrap_argv`, the
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
    assert sandbox.find_bwrap() is not None, "the local sandbox is bubblewrap: make sysdeps"
    argv = sandbox.bwrap_argv([], cwd="/", network=False)
    proc = argv.index("--proc")
    assert argv[proc + 1] == "/proc"
    for p in sandbox.PROC_READ_ONLY:
        if os.path.exists(p):
            at = argv.index(p)
            assert argv[at - 1 : at + 2] == ["--ro-bind", p, p]
            assert at > proc


_WHOLE = r"""
import json, os, resource, socket, sys
out = {"uid": os.getuid(), "cwd": os.getcwd(), "hostname": socket.gethostname(),
       "env": dict(os.environ), "pid": os.getpid()}
out["ns"] = {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "ipc", "uts", "net", "user")}
out["uid_map"] = open("/proc/self/uid_map").read().split()
status = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
out["status"] = {k: status[k].strip() for k in ("NoNewPrivs", "CapAmb", "CapInh")}
out["procs"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
names = ("NPROC", "NOFILE", "AS", "CPU", "FSIZE", "CORE")
out["rlimits"] = {n: resource.getrlimit(getattr(resource, "RLIMIT_" + n)) for n in names}
out["shm"] = os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize
def writable(path):
    try:
        with open(os.path.join(path, ".probe"), "w") as f:
            f.write("x")
        return True
    except OSError as e:
        return e.strerror
out["writable"] = {p: writable(p) for p in sys.argv[1:]}
out["etc_mode"] = oct(os.stat("/etc").st_mode & 0o777)
out["passwd"] = os.access("/etc/passwd", os.R_OK)
print(json.dumps(out))
"""


@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("as_trial_uid", [True, False])
def test_an_exec_is_a_sandbox_of_its_own(tmp_path, monkeypatch, network, as_trial_uid):
    uid = sandbox.new_sandbox_uid() if as_trial_uid else None
    assert uid is not None or not as_trial_uid, "a trial uid is used when apexrl is root"
    world, tests, extra = tmp_path / "world", tmp_path / "tests", tmp_path / "extra"
    for d in (world, tests, extra):
        d.mkdir()
        (d / "seen").write_text("x")
        if uid is not None:
            os.chown(d, uid, uid)
    limits = sandbox.SandboxLimits(
        nproc=321, nofile=123, address_space_bytes=3 << 30, cpu_seconds=77,
        file_bytes=5 << 20, shm_bytes=8 << 20, scratch_bytes=None, trial_memory_bytes=None,
    )  # fmt: skip
    monkeypatch.setenv("LD_PRELOAD", "/host/evil.so")  # the host's: never inside
    monkeypatch.setenv("APEXRL_TEST_HOST_SECRET", "host-only")
    try:
        argv = sandbox.bwrap_argv(
            [("/world", world)], cwd="/world", network=network, uid=uid, limits=limits,
            ro=[str(extra)], ro_binds=[("/tests", tests)],
        )  # fmt: skip
        cmd, fd = sandbox.with_env(
            [sys.executable, "-I", "-c", _WHOLE, "/world", "/tests", str(extra), "/usr"],
            {"TASK_VALUE": "v=1 two", "HOME": "/root"},
        )
        try:
            r = subprocess.run(
                [*argv, *cmd], env=sandbox.base_env({}), capture_output=True, text=True,
                timeout=60, pass_fds=(fd,),
            )  # fmt: skip
        finally:
            os.close(fd)
    finally:
        sandbox.release_uid(uid)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    host_ns = {n: os.readlink(f"/proc/self/ns/{n}") for n in out["ns"]}
    for n in ("pid", "ipc", "uts", "user"):
        assert out["ns"][n] != host_ns[n], n
    assert (out["ns"]["net"] == host_ns["net"]) is network
    assert out["procs"] == [1, out["pid"]], out["procs"]  # bwrap's init and the command
    assert out["hostname"] == "apexrl-sandbox"
    assert out["uid"] == 0  # root inside its user namespace...
    outside = uid if uid is not None else os.geteuid()
    assert out["uid_map"] == ["0", str(outside), "1"]  # ...the trial's uid outside
    assert out["status"] == {"NoNewPrivs": "1", "CapAmb": "0" * 16, "CapInh": "0" * 16}
    gib = 1 << 30
    assert out["rlimits"] == {
        "NPROC": [321, 321], "NOFILE": [123, 123], "AS": [3 * gib, 3 * gib],
        "CPU": [77, 77], "FSIZE": [5 << 20, 5 << 20], "CORE": [0, 0],
    }  # fmt: skip
    assert out["shm"] == 8 << 20
    assert out["cwd"] == "/world"
    w = out["writable"]
    assert w["/world"] is True and (world / ".probe").read_text() == "x"
    if uid is not None:  # written as the trial's uid on the host
        assert (world / ".probe").stat().st_uid == uid
    for ro in ("/tests", str(extra), "/usr"):
        assert w[ro] in ("Read-only file system", "Permission denied"), (ro, w[ro])
    assert w["/tests"] == "Read-only file system" and w["/usr"] == "Read-only file system"
    assert not (tests / ".probe").exists() and not (extra / ".probe").exists()
    assert out["etc_mode"] == "0o755" and out["passwd"] is True
    env = out["env"]
    assert env["TASK_VALUE"] == "v=1 two" and env["HOME"] == "/root"
    assert env["PATH"] == sandbox.DEFAULT_PATH and env["TMPDIR"] == "/tmp"
    assert "LD_PRELOAD" not in env and "APEXRL_TEST_HOST_SECRET" not in env


def test_the_environment_reaches_the_command_only_through_a_descriptor():
    assert sandbox.with_env(["true"], {}) == (["true"], None)
    assert sandbox.with_env(["true"], None) == (["true"], None)
    cmd, fd = sandbox.with_env(["env"], {"A": "x y", "B_2": "ü"})
    try:
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0  # read from its start inside
        assert os.read(fd, 1000) == "A=x y\0B_2=ü\0".encode()
        assert cmd[:2] == ["/bin/bash", "-c"] and cmd[3:] == ["apexrl-env", "env"]
        assert "x y" not in " ".join(cmd)  # values never on a command line
        assert not os.get_inheritable(fd)  # passed on purpose (pass_fds) only
    finally:
        os.close(fd)
    for bad in ({"A-B": "x"}, {"1A": "x"}, {"A": "x\0y"}, {"": "x"}, {"A=B": "x"}):
        with pytest.raises(ValueError, match="not a plain name, or a NUL byte"):
            sandbox.with_env(["true"], bad)
    assert sandbox.base_env({"N": 3}) == {
        "PATH": sandbox.DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1", "N": "3",
    }  # fmt: skip
    # run: the loader exports each record, closes the descriptor, runs the command
    cmd, fd = sandbox.with_env(
        ["/bin/sh", "-c", 'echo "$A|$B"; ls /proc/self/fd'], {"A": "1 2", "B": "$HOME;x"}
    )
    try:
        r = subprocess.run(cmd, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                           pass_fds=(fd,), timeout=30)  # fmt: skip
    finally:
        os.close(fd)
    lines = r.stdout.splitlines()
    assert lines[0] == "1 2|$HOME;x"
    if fd > 3:  # ls's own listing holds 3
        assert str(fd) not in lines[1:]  # closed before the command runs


def test_host_values_are_interpolated_for_allowed_names_only(monkeypatch):
    monkeypatch.setenv("OK_VAR", "fine")
    monkeypatch.setenv("SECRET_VAR", "host-secret")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    env = {
        "A": "${OK_VAR}", "B": "x-${SECRET_VAR}", "C": "${SECRET_VAR:-dflt}",
        "D": "${UNSET_VAR:-d2}", "E": "${UNSET_VAR}", "F": "plain", "G": "${OK_VAR:-no}",
    }  # fmt: skip
    values, refused = sandbox.resolve_allowed(env, {"OK_VAR", "UNSET_VAR"})
    assert values == {"A": "fine", "C": "dflt", "D": "d2", "F": "plain", "G": "fine"}
    assert refused == ["SECRET_VAR"]
    monkeypatch.setenv("APEXRL_PASS_ENV", " A_1, B_2  C ")
    assert sandbox.pass_env_from_environment() == {"A_1", "B_2", "C"}
    monkeypatch.delenv("APEXRL_PASS_ENV")
    assert sandbox.pass_env_from_environment() == set()  # unset: nothing passes
