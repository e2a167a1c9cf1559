"""Building archipelago's uv projects (apexrl.artifacts.toolchain): a synced copy of a
project, built once under a lock and marked whole by its `.built` record (no uv needed:
a stand-in records how it was called)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from apexrl.artifacts.toolchain import BUILT, build_once, is_built, synced_copy
from apexrl.errors import UsageError


def test_built_once_then_reused(tmp_path):
    dest, calls = tmp_path / "proj", []

    def build() -> dict:
        calls.append(1)
        dest.mkdir()
        return {"n": len(calls)}

    assert build_once(dest, tmp_path / "proj.lock", build) == dest
    assert build_once(dest, tmp_path / "proj.lock", build) == dest
    assert calls == [1] and json.loads((dest / BUILT).read_text()) == {"n": 1}


def test_refused_when_not_built_and_a_failed_build_is_not_whole(tmp_path):
    dest = tmp_path / "proj"
    with pytest.raises(UsageError, match="not built"):
        build_once(dest, tmp_path / "proj.lock", dict, refuse=UsageError("not built"))
    assert not dest.exists()

    def half() -> dict:
        dest.mkdir()
        raise OSError("disk full")

    with pytest.raises(OSError):
        build_once(dest, tmp_path / "proj.lock", half)
    assert dest.is_dir() and not is_built(dest)


def test_synced_copy_starts_fresh_and_leaves_out_the_skipped(tmp_path):
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    (src / ".venv").mkdir()
    (src / ".venv" / "stale").write_text("")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "left-by-a-stopped-build").write_text("")
    uv = tmp_path / "uv"
    uv.write_text('#!/bin/sh\necho "$@" > uv-args\necho "$UV_PROJECT_ENVIRONMENT" >> uv-args\n')
    os.chmod(uv, 0o755)
    synced_copy(src, dest, skip=(".venv",), python="py3.13", uv=str(uv), what="test sync")
    assert sorted(p.name for p in dest.iterdir()) == ["pkg", "uv-args"]
    args, venv = (dest / "uv-args").read_text().splitlines()
    assert args == "sync --frozen --no-dev --quiet --python py3.13"
    assert Path(venv) == dest / ".venv"
