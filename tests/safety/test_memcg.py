"""The per-trial memory cgroup (`apexrl.envs.local.memcg`) on its own, fast: a real group
on this host where it gives apexrl one (the cap holds, a process that joined is counted,
killed at the cap and removed with the group), and each decision the module makes on
faked cgroup trees (v1 and v2 layouts, a parent that cannot hold groups, a write the
kernel refuses, stale groups of dead owners). The whole-trial cap (gateway, execs and
the code tool together) is tests/trial/test_trial_memcg.py."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from apexrl.envs.local import memcg

MIB = 1 << 20


@pytest.fixture
def fresh_parent(monkeypatch):
    """parent() looked up anew in each test (it is cached per process)."""
    monkeypatch.setattr(memcg, "_PARENT", False)


def _real_parent():
    # CI runs as root with a writable memory cgroup (as apexrl's trials do there)
    assert os.geteuid() == 0, "apexrl makes memory cgroups when it runs as root: run as root"
    found = memcg._find_parent()
    assert found is not None, "this host gives apexrl's process no writable memory cgroup"
    return found


def test_a_real_group_caps_counts_kills_and_goes(fresh_parent):
    base, version = _real_parent()
    name = f"{memcg.PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    group = memcg.group_for(name, 64 * MIB)
    assert group is not None
    try:
        assert group.path == base / name and group.version == version
        assert group.limit() == 64 * MIB
        if version == 1 and (group.path / "memory.memsw.limit_in_bytes").exists():
            assert int((group.path / "memory.memsw.limit_in_bytes").read_text()) == 64 * MIB
        if version == 2 and (group.path / "memory.swap.max").exists():
            assert (group.path / "memory.swap.max").read_text().strip() == "0"
        assert group.oom_kills() == 0 and group.pids() == []
        # a process that joined through join_argv holds more than the cap: killed there
        hog = "b = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('held')"
        r = subprocess.run(
            group.join_argv([sys.executable, "-I", "-c", hog]),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode != 0 and "held" not in r.stdout, r
        assert group.oom_kills() >= 1
        # one that joined through the descriptor (the fork server's way) is in the group
        fd = group.open_procs()
        assert not os.get_inheritable(fd)
        try:
            join = f"import os; os.write({fd}, b'0'); os.execvp('sleep', ['sleep', '300'])"
            sleeper = subprocess.Popen([sys.executable, "-I", "-c", join], pass_fds=(fd,))
        finally:
            os.close(fd)
        deadline = time.monotonic() + 10
        while sleeper.pid not in group.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sleeper.pid in group.pids()
        # the same name again: the existing group, capped anew
        again = memcg.group_for(name, 32 * MIB)
        assert again == group and group.limit() == 32 * MIB
        group.remove()
        assert sleeper.wait(timeout=10) == -9  # what was left is killed...
        assert not group.path.exists()  # ...and the group is gone
    finally:
        if group.path.exists():
            group.remove()


def test_no_group_without_a_cap_root_or_a_parent(fresh_parent, monkeypatch, tmp_path):
    assert memcg.group_for("apexrl-trial-1-x", None) is None
    monkeypatch.setattr(memcg, "parent", lambda: (tmp_path, 2))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert memcg.group_for("apexrl-trial-1-x", MIB) is None  # not root
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(memcg, "parent", lambda: None)
    assert memcg.group_for("apexrl-trial-1-x", MIB) is None  # nothing writable
    monkeypatch.setattr(memcg, "parent", lambda: (tmp_path / "gone" / "base", 1))
    assert memcg.group_for("apexrl-trial-1-x", MIB) is None  # the group cannot be made
    assert not (tmp_path / "gone").exists()


def test_a_cap_the_kernel_refuses_leaves_no_group(fresh_parent, monkeypatch, tmp_path):
    """The limit cannot be written: no uncapped group is handed out (None), and the
    group is removed."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for version, knob in ((1, "memory.limit_in_bytes"), (2, "memory.max")):
        base = tmp_path / f"v{version}"
        base.mkdir()
        monkeypatch.setattr(memcg, "parent", lambda base=base, v=version: (base, v))
        removed = []
        monkeypatch.setattr(memcg.TrialGroup, "remove", lambda self, w=5.0, r=removed: r.append(w))
        (base / "apexrl-trial-1-x" / knob).mkdir(parents=True)  # writing it fails
        assert memcg.group_for("apexrl-trial-1-x", MIB) is None
        assert removed == [0]


@pytest.mark.parametrize("version", [1, 2])
def test_the_knobs_written_per_version(fresh_parent, monkeypatch, tmp_path, version):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(memcg, "parent", lambda: (tmp_path, version))
    # without swap accounting: only the memory cap
    g = memcg.group_for("apexrl-trial-1-a", 5 * MIB)
    files = sorted(p.name for p in g.path.iterdir())
    assert files == (["memory.limit_in_bytes"] if version == 1 else ["memory.max"])
    assert g.limit() == 5 * MIB and g.version == version
    # with it (the kernel shows the file): swap capped too (v1: RAM + swap at the cap)
    swap = "memory.memsw.limit_in_bytes" if version == 1 else "memory.swap.max"
    (tmp_path / "apexrl-trial-1-b").mkdir()
    (tmp_path / "apexrl-trial-1-b" / swap).write_text("max")
    g = memcg.group_for("apexrl-trial-1-b", 7 * MIB)
    assert (g.path / swap).read_text() == (str(7 * MIB) if version == 1 else "0")


def test_reading_a_group(tmp_path):
    g1, g2 = memcg.TrialGroup(tmp_path / "a", 1), memcg.TrialGroup(tmp_path / "b", 2)
    for g in (g1, g2):
        g.path.mkdir()
        assert g.pids() == [] and g.oom_kills() == 0  # nothing there yet
        assert g.procs == g.path / "cgroup.procs"
    (g2.path / "memory.max").write_text("max\n")
    assert g2.limit() == -1
    (g1.path / "memory.limit_in_bytes").write_text("1048576\n")
    assert g1.limit() == MIB
    (g1.path / "cgroup.procs").write_text("12\n345\n")
    assert g1.pids() == [12, 345]
    (g1.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (g2.path / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 8\noom_kill 4\n")
    assert g1.oom_kills() == 3 and g2.oom_kills() == 4
    (g2.path / "memory.events").write_text("oom_kill x\n")
    assert g2.oom_kills() == 0
    assert g1.join_argv(["bwrap", "--x"]) == [
        "/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(g1.path / "cgroup.procs"),
        "bwrap", "--x",
    ]  # fmt: skip
    gone = memcg.TrialGroup(tmp_path / "never", 1)
    gone.remove(wait_s=0)  # already gone: nothing to do
    stuck = memcg.TrialGroup(tmp_path / "a", 1)  # cannot be removed (files in it)
    t0 = time.monotonic()
    stuck.remove(wait_s=0.3)
    assert 0.25 < time.monotonic() - t0 < 5 and stuck.path.exists()


def test_removing_goes_on_past_processes_it_cannot_signal(tmp_path, monkeypatch):
    """A pid already gone or not ours to signal does not stop the removal; retries are
    short (a trial's stop waits on them)."""
    g = memcg.TrialGroup(tmp_path / "g", 1)
    g.path.mkdir()
    (g.path / "cgroup.procs").write_text("11\n22\n33\n")
    killed, slept = [], []

    def kill(pid, sig):
        killed.append((pid, sig))
        if pid == 11:
            raise ProcessLookupError(3, "gone")
        if pid == 22:
            raise PermissionError(1, "not ours")

    monkeypatch.setattr(os, "kill", kill)
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: slept.append(s) or real_sleep(s))
    g.remove(wait_s=0.1)
    assert killed[:3] == [(11, 9), (22, 9), (33, 9)]
    assert slept and max(slept) <= 0.05 and g.path.exists()


def test_the_parent_per_cgroup_layout(monkeypatch, tmp_path):
    v1, v2 = tmp_path / "memory", tmp_path / "unified"
    (v1 / "me").mkdir(parents=True)
    (v2 / "me").mkdir(parents=True)

    def layout(mounts, own):
        monkeypatch.setattr(memcg, "_cgroup_mounts", lambda: mounts)
        monkeypatch.setattr(memcg, "_own_groups", lambda: own)
        return memcg._find_parent()

    both = {"memory": v1, "": v2}
    assert layout(both, {"memory": "/me", "": "/me"}) == (v1 / "me", 1)  # v1 first
    assert layout(both, {"memory": "/gone", "": "/me"}) is None  # v1 not writable
    assert layout({"": v2}, {"": "/me"}) is None  # no subtree_control
    (v2 / "me" / "cgroup.subtree_control").write_text("cpu io\n")
    assert layout({"": v2}, {"": "/me"}) is None  # memory not delegated
    (v2 / "me" / "cgroup.subtree_control").write_text("cpu memory io\n")
    assert layout({"": v2}, {"": "/me"}) == (v2 / "me", 2)
    assert layout({"": v2}, {"": "/gone"}) is None
    assert layout({"memory": v1}, {"": "/me"}) is None
    assert layout({}, {"memory": "/me", "": "/me"}) is None
    # group names are taken as they are below the mount ("/X-g": only "/" stripped)
    (v1 / "X-g").mkdir()
    assert layout({"memory": v1}, {"memory": "/X-g"}) == (v1 / "X-g", 1)
    (v2 / "X-g").mkdir()
    (v2 / "X-g" / "cgroup.subtree_control").write_text("memory\n")
    assert layout({"": v2}, {"": "/X-g"}) == (v2 / "X-g", 2)
    (v1 / "file").write_text("")  # writable, but no folder: no parent
    assert layout({"memory": v1}, {"memory": "/file"}) is None


def test_mounts_and_own_groups_are_read_from_proc(monkeypatch):
    text = {
        "/proc/self/mountinfo": (
            "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
            "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup none rw,memory\n"
            "36 31 0:33 / /other/memory rw - cgroup cgroup rw,nosuid,memory\n"
            "short line - cgroup\n"
            "1 2 3 - cgroup cgroup rw,memory\n"
            "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 none rw\n"
            "42 31 0:39 / /later/unified rw - cgroup2 cgroup2 rw\n"
        ),
        "/proc/self/cgroup": "4:memory:/a/b\n3:cpu,cpuacct:/c\n0::/d:e\n",
    }

    class FakePath(type(Path("/"))):
        def read_text(self, *a, **k):
            return text[str(self)]

    monkeypatch.setattr(memcg, "Path", FakePath)
    assert memcg._cgroup_mounts() == {
        "memory": Path("/sys/fs/cgroup/memory"), "": Path("/sys/fs/cgroup/unified")
    }  # fmt: skip
    assert memcg._own_groups() == {"memory": "/a/b", "cpu": "/c", "cpuacct": "/c", "": "/d:e"}

    class Unreadable(type(Path("/"))):
        def read_text(self, *a, **k):
            raise PermissionError(13, "no")

    monkeypatch.setattr(memcg, "Path", Unreadable)
    assert memcg._cgroup_mounts() == {} and memcg._own_groups() == {}


def test_parent_is_looked_up_once_and_sweeps_first(monkeypatch, tmp_path):
    monkeypatch.setattr(memcg, "_PARENT", False)
    stale = tmp_path / "apexrl-trial-999999999-x"
    stale.mkdir()
    calls = []
    monkeypatch.setattr(memcg, "_find_parent", lambda: calls.append(1) or (tmp_path, 1))
    assert memcg.parent() == (tmp_path, 1) and not stale.exists()
    stale.mkdir()
    assert memcg.parent() == (tmp_path, 1) and stale.exists()  # cached: no second sweep
    assert calls == [1]
    monkeypatch.setattr(memcg, "_PARENT", False)
    monkeypatch.setattr(memcg, "_find_parent", lambda: None)
    assert memcg.parent() is None


def test_stale_groups_of_dead_owners_are_swept(tmp_path):
    dead = tmp_path / "apexrl-trial-999999999-abc"
    dead2 = tmp_path / "apexrl-trial-999999998-abc"
    busy = tmp_path / "apexrl-trial-999999997-abc"  # holds processes: rmdir refused
    mine = tmp_path / f"apexrl-trial-{os.getpid()}-abc"
    nameless = tmp_path / "apexrl-trial-nopid"  # no owner: stale
    other = tmp_path / "someone-else-999999999"
    for d in (dead, dead2, busy, mine, nameless, other):
        d.mkdir()
    (busy / "cgroup.procs").write_text("1\n")
    assert memcg.sweep_stale(tmp_path) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([busy.name, mine.name, other.name])
    assert memcg.sweep_stale(tmp_path / "missing") == 0
    assert memcg._owner_pid("apexrl-trial-123-abc") == 123
    assert memcg._owner_pid("apexrl-trial-x1-y") is None
