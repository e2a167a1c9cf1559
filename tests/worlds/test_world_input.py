"""World input: folders and zips, safe extraction, app selection."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest

from apexrl.errors import ApexError, BadRecordError, UsageError
from apexrl.worlds.store import extract_zip_safely
from apexrl.worlds.world import open_world, resolve_apps


def _zip(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


OK = {"filesystem/a.txt": b"hi", ".apps_data/mail/inbox.mbox": b""}


@pytest.mark.parametrize(
    ("member", "why"),
    [
        ("../evil.txt", "traversal"),
        ("filesystem/../../evil.txt", "traversal"),
        ("/etc/evil.txt", "absolute"),
        ("C:/evil.txt", "absolute"),
    ],
)
def test_zip_traversal_refused(tmp_path, member, why):
    z = _zip(tmp_path / "w.zip", {**OK, member: b"x"})
    dest = tmp_path / "out"
    with pytest.raises(BadRecordError) as e:
        extract_zip_safely(z, dest)
    assert member in str(e.value) and why in str(e.value)
    assert not dest.exists() or not any(dest.rglob("*"))  # nothing written
    assert not (tmp_path / "evil.txt").exists()


@pytest.mark.parametrize("target", ["/etc/passwd", "../../outside", "../../../tmp"])
def test_zip_link_out_refused(tmp_path, target):
    z = _zip(tmp_path / "w.zip", OK, links={"filesystem/link": target})
    with pytest.raises(BadRecordError) as e:
        open_world(z, workdir=tmp_path / "out")
    assert "filesystem/link" in str(e.value) and "leaves the tree" in str(e.value)


def test_zip_link_inside_kept(tmp_path):
    z = _zip(tmp_path / "w.zip", OK, links={"filesystem/b.txt": "a.txt"})
    w = open_world(z, workdir=tmp_path / "out")
    assert (w.fs_root / "b.txt").read_text() == "hi"


def test_zip_with_wrapping_folder_and_temp_cleanup(tmp_path):
    z = _zip(tmp_path / "world_x.zip", {f"world_x/{k}": v for k, v in OK.items()})
    w = open_world(z)
    assert w.world_id == "world_x" and (w.fs_root / "a.txt").read_text() == "hi"
    root = w.root
    w.close()
    assert not root.exists()


def test_not_a_world(tmp_path):
    (tmp_path / "junk").mkdir()
    with pytest.raises(BadRecordError, match="not a world"):
        open_world(tmp_path / "junk")
    with pytest.raises(UsageError):
        open_world(tmp_path / "missing")


def test_symlink_in_folder_cannot_escape(world_dir, tmp_path):
    from apexrl.worlds.servers.archipelago import filesystem

    (tmp_path / "secret.txt").write_text("top secret")
    (world_dir / "filesystem" / "leak").symlink_to(tmp_path / "secret.txt")
    w = open_world(world_dir)
    with pytest.raises(ApexError, match="outside the world"):
        w.fs_path("leak")
    assert "leak" not in json.dumps(filesystem.search_files(w, pattern="*"))


def test_apps_from_descriptions_and_aliases(tmp_path):
    ds = tmp_path / "ds"
    (ds / "world_files_zipped").mkdir(parents=True)
    z = _zip(ds / "world_files_zipped" / "w1.zip", OK)
    (ds / "world_descriptions.json").write_text(
        json.dumps(
            [{"world_id": "w1", "world_name": "W", "apps": ["Mail", "Spreadsheets", "Chat"]}]
        )
    )
    w = open_world(z)
    assert w.apps == ["sheets", "mail", "chat"]
    w.close()
    assert resolve_apps(["mail,Calendar", "documents"]) == ["docs", "mail", "calendar"]
    with pytest.raises(UsageError, match="unknown app"):
        resolve_apps(["fax"])
