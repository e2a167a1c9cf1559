"""apexrl.host: environment numbers read one way (a limit the sandbox may lift, an archive
limit it may not) and bubblewrap found one way."""

from __future__ import annotations

import pytest

from apexrl.errors import ApexError
from apexrl.host import NO_LIMIT, env_int, find_bwrap


def test_env_int_unset_number_and_lift(monkeypatch):
    monkeypatch.delenv("APEXRL_T", raising=False)
    assert env_int("APEXRL_T", 7, lift=True) == 7 and env_int("APEXRL_T", None, lift=False) is None
    monkeypatch.setenv("APEXRL_T", " 1e6 ")
    assert env_int("APEXRL_T", 7, lift=False) == 1_000_000
    for word in (*NO_LIMIT, "OFF"):
        monkeypatch.setenv("APEXRL_T", word)
        assert env_int("APEXRL_T", 7, lift=True) is None  # the sandbox's: 0/off lifts it
        with pytest.raises(ApexError, match="APEXRL_T=.*cannot be lifted"):
            env_int("APEXRL_T", 7, lift=False)  # an archive limit is never 0 = refuse all
    monkeypatch.setenv("APEXRL_T", "lots")
    with pytest.raises(ApexError, match="APEXRL_T='lots' is not a number"):
        env_int("APEXRL_T", 7, lift=True)


def test_the_limits_read_through_it(monkeypatch):
    from apexrl.artifacts.archive_extract import Limits
    from apexrl.envs.local.sandbox import SandboxLimits

    monkeypatch.setenv("APEXRL_SANDBOX_NPROC", "off")
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_MEMBERS", "0")
    assert SandboxLimits.from_env().nproc is None
    with pytest.raises(ApexError, match="APEXRL_ARCHIVE_MAX_MEMBERS"):
        Limits.from_env()


def test_bwrap_is_found_on_the_path_given(tmp_path):
    assert find_bwrap(str(tmp_path)) is None
    tool = tmp_path / "bwrap"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert find_bwrap(str(tmp_path)) == str(tool)
