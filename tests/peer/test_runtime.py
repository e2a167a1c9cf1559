"""Finding a checkout and keying its runtimes by content (no peer needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.errors import UsageError
from apexrl.peer.runtime import checkout_key, find_checkout, runtimes, servers


def fake_checkout(root: Path) -> Path:
    for s in servers():
        d = root / "mcp_servers" / s.folder
        d.mkdir(parents=True)
        (d / "uv.lock").write_text(f"lock of {s.folder}\n")
        (d / "pyproject.toml").write_text("[project]\n")
    return root


def test_key_follows_content(tmp_path):
    a = fake_checkout(tmp_path / "a")
    b = fake_checkout(tmp_path / "b")
    assert checkout_key(a) == checkout_key(b)  # same content, another place
    (b / "mcp_servers" / "code" / "uv.lock").write_text("edited\n")
    assert checkout_key(a) != checkout_key(b)
    (a / "mcp_servers" / "code" / ".venv").mkdir()  # a built venv does not count
    (a / "mcp_servers" / "code" / ".venv" / "x").write_text("x")
    assert checkout_key(a) == checkout_key(fake_checkout(tmp_path / "c"))


def test_missing_checkout_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setenv("APEXRL_ARCHIPELAGO", str(tmp_path / "nope"))
    with pytest.raises(UsageError) as e:
        find_checkout()
    assert "Mercor-Intelligence/archipelago" in str(e.value) and "1c3dcd4" in str(e.value)
    r = CliRunner().invoke(app, ["world", "verify", str(tmp_path), "--peer", str(tmp_path)])
    assert r.exit_code == 2 and "no archipelago checkout" in r.output


def test_unbuilt_runtimes_named_without_building(tmp_path):
    co = fake_checkout(tmp_path / "co")
    with pytest.raises(UsageError) as e:
        runtimes(co, home=tmp_path / "home", build=False, servers=["excel", "mail"])
    assert "spreadsheets, mail" in str(e.value) and checkout_key(co) in str(e.value)
    assert not (tmp_path / "home").exists()


def test_unknown_server_is_a_usage_error(tmp_path):
    co = fake_checkout(tmp_path / "co")
    r = CliRunner().invoke(
        app, ["world", "verify", str(tmp_path), "--peer", str(co), "--servers", "excel,nope"]
    )
    assert r.exit_code == 2 and "nope" in r.output


def test_a_runtimes_modules_are_compiled_once(tmp_path):
    import sys

    from apexrl.peer.runtime import BYTECODE, compile_bytecode

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "py2.py").write_text("print 'old'\n")  # not this Python's syntax
    compile_bytecode(tmp_path, Path(sys.executable))
    assert [p.name.split(".")[0] for p in (tmp_path / "pkg" / "__pycache__").iterdir()] == ["mod"]
    assert (tmp_path / BYTECODE).is_file()
