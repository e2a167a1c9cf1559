"""Where the local environment puts trial folders (apexrl.envs.local.scratch): RAM or disk.

The RAM checks run against real tmpfs mounts made here (apexrl's tests run as root,
as the fork server does), one with room, one too small, one mounted noexec.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from apexrl.envs.local import environment as local
from apexrl.envs.local import scratch
from apexrl.envs.preflight import check_scratch


@contextlib.contextmanager
def _tmpfs(where: Path, options: str):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "apexrl-test", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("APEXRL_LOCAL_WORKDIR", "APEXRL_LOCAL_SCRATCH", "APEXRL_LOCAL_RAM_MIN_FREE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_workdir_wins_over_the_scratch_choice(clean_env, tmp_path):
    clean_env.setenv("APEXRL_LOCAL_WORKDIR", str(tmp_path / "w"))
    clean_env.setenv("APEXRL_LOCAL_SCRATCH", "ram")
    s = scratch.choose()
    assert (s.path, s.kind) == (tmp_path / "w", "set")
    assert local.default_work_dir() == tmp_path / "w"


def test_disk_is_the_system_temp_folder(clean_env):
    clean_env.setenv("APEXRL_LOCAL_SCRATCH", "disk")
    s = scratch.choose()
    assert s == scratch.Scratch(Path(tempfile.gettempdir()) / "apexrl-local", "disk", s.why)
    assert local.default_work_dir() == s.path


def test_auto_takes_ram_when_dev_shm_has_room_else_disk(clean_env):
    # this machine's /dev/shm is a tmpfs of half its memory (CI's too)
    assert scratch.ram_unusable() is None, scratch.ram_unusable()
    s = scratch.choose()
    assert (s.path, s.kind) == (scratch.RAM_ROOT / "apexrl-local", "ram")
    clean_env.setenv("APEXRL_LOCAL_RAM_MIN_FREE", str(1 << 60))
    s = scratch.choose()
    assert s.kind == "disk" and "MiB available" in s.why, s


def test_ram_that_cannot_be_had_is_an_error_naming_the_fix(clean_env):
    clean_env.setenv("APEXRL_LOCAL_SCRATCH", "ram")
    clean_env.setenv("APEXRL_LOCAL_RAM_MIN_FREE", str(1 << 60))
    with pytest.raises(scratch.ScratchError, match="APEXRL_LOCAL_SCRATCH=disk"):
        scratch.choose()
    problems = check_scratch(dict(os.environ))
    assert len(problems) == 1 and "MiB available" in problems[0].what


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("APEXRL_LOCAL_SCRATCH", "nvme", "auto, ram, disk"),
        ("APEXRL_LOCAL_RAM_MIN_FREE", "4G", "whole number of bytes"),
        ("APEXRL_LOCAL_RAM_MIN_FREE", "-1", "0 or more"),
    ],
)
def test_bad_settings_are_named(clean_env, name, value, match):
    clean_env.setenv(name, value)
    with pytest.raises(scratch.ScratchError, match=match):
        scratch.choose()
    assert match in check_scratch(dict(os.environ))[0].what


def test_preflight_passes_a_usable_choice(clean_env):
    assert check_scratch(dict(os.environ)) == []
    assert check_scratch({"APEXRL_LOCAL_SCRATCH": "disk"}) == []


def test_real_tmpfs_mounts(tmp_path):
    assert scratch.ram_unusable(tmp_path, 0) == f"{tmp_path} is not a tmpfs"
    with _tmpfs(tmp_path / "roomy", "size=64m") as d:
        assert scratch.ram_unusable(d, 32 << 20) is None
        assert "64 MiB available, under the 128 MiB" in scratch.ram_unusable(d, 128 << 20)
    with _tmpfs(tmp_path / "noexec", "size=64m,noexec") as d:
        assert scratch.ram_unusable(d, 0) == f"{d} is mounted noexec"


def test_a_sandbox_sees_no_other_trial_folder_in_ram(tmp_path):
    """Trial folders under the host's /dev/shm: a sandbox's /dev/shm is its own, empty."""
    from apexrl.envs.local import sandbox
    from apexrl.envs.local.sandbox import base_env

    root = scratch.RAM_ROOT / f"apexrl-test-{os.getpid()}"
    try:
        mine, other = root / "apexrl-trial-mine", root / "apexrl-trial-other"
        (other / "world").mkdir(parents=True)
        (other / "world" / "secret.txt").write_text("OTHER-TRIAL-SECRET")
        (mine / "world").mkdir(parents=True)
        argv = sandbox.bwrap_argv([("/world", mine / "world")], cwd="/world", network=False)
        script = f"ls -A /dev/shm; cat {other}/world/secret.txt; grep -rs OTHER-TRIAL /dev /tmp"
        out = subprocess.run(
            [*argv, "/bin/bash", "-c", script + "; echo done"],
            capture_output=True,
            text=True,
            env=base_env({}),
            timeout=60,
        )
        assert out.stdout.strip() == "done", out
        assert "OTHER-TRIAL-SECRET" not in out.stdout + out.stderr
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=True)


def test_a_default_folder_someone_else_made_is_refused(clean_env, tmp_path):
    mine = scratch.own_folder(tmp_path / "apexrl-local")
    assert mine.is_dir() and scratch.own_folder(mine) == mine  # idempotent
    os.symlink(tmp_path / "elsewhere", tmp_path / "linked")
    with pytest.raises(scratch.ScratchError, match="not a folder of this user's"):
        scratch.own_folder(tmp_path / "linked")
    (tmp_path / "shared").mkdir(mode=0o777)
    os.chmod(tmp_path / "shared", 0o777)
    with pytest.raises(scratch.ScratchError, match="drwxrwxrwx"):
        scratch.own_folder(tmp_path / "shared")
    (tmp_path / "theirs").mkdir()
    os.chown(tmp_path / "theirs", 4242, 4242)
    with pytest.raises(scratch.ScratchError, match="uid 4242"):
        scratch.own_folder(tmp_path / "theirs")
    # preflight says so before any trial starts
    clean_env.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "tmp" / "apexrl-local")
    problems = check_scratch({"APEXRL_LOCAL_SCRATCH": "disk"})
    assert len(problems) == 1 and "not a folder of this user's" in problems[0].what


def test_a_foreign_ram_folder_sends_auto_to_disk_with_a_warning(clean_env, tmp_path, capsys):
    """Issue 29, 7b: another local user who made /dev/shm/apexrl-local first no longer
    blocks every `auto` run: it goes to disk, saying why."""
    clean_env.setenv("APEXRL_LOCAL_RAM_MIN_FREE", "0")
    clean_env.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with _tmpfs(tmp_path / "shm", "size=16m") as shm:
        clean_env.setattr(scratch, "RAM_ROOT", shm)
        assert scratch.choose().kind == "ram"
        (shm / "apexrl-local").mkdir()
        os.chown(shm / "apexrl-local", 4242, 4242)  # another user's
        s = scratch.choose()
        assert s.kind == "disk" and "uid 4242" in s.why, s
        assert local.default_work_dir() == tmp_path / "tmp" / "apexrl-local"
        err = capsys.readouterr().err
        assert "trial folders go to disk" in err and str(shm / "apexrl-local") in err
        assert check_scratch({}) == []  # preflight lets the run go on (to disk)
        clean_env.setenv("APEXRL_LOCAL_SCRATCH", "ram")  # asked for RAM: still an error
        assert "uid 4242" in check_scratch(dict(os.environ))[0].what
