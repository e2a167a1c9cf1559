"""App data at the depths real worlds use, and empty app folders as readiness failures."""

from __future__ import annotations

import shutil

import pytest

from apexrl.errors import ApexError
from apexrl.worlds.gateway import build_gateway
from apexrl.worlds.world import open_world


def _details(root):
    gw = build_gateway(open_world(root), apps=["mail", "calendar", "chat"])
    return {name: s.detail for name, s in gw.status.items()}, gw


def test_nested_app_data_loads_the_same_items(world_template, tmp_path):
    flat, _ = _details(world_template)
    deep = tmp_path / "deep"
    shutil.copytree(world_template, deep)
    apps = deep / ".apps_data"
    # mail one account folder and one more folder down, calendar per user, chat export
    # under the export's own folder name (as Google Takeout-like exports do)
    (apps / "mail" / "ana.ruiz@acme.test" / "Mail").mkdir(parents=True)
    (apps / "mail" / "inbox.mbox").rename(
        apps / "mail" / "ana.ruiz@acme.test" / "Mail" / "inbox.mbox"
    )
    (apps / "calendar" / "ana" / "calendars").mkdir(parents=True)
    (apps / "calendar" / "work.ics").rename(apps / "calendar" / "ana" / "calendars" / "work.ics")
    (apps / "chat" / "Google Chat").mkdir()
    for name in ("Groups", "Users"):
        (apps / "chat" / name).rename(apps / "chat" / "Google Chat" / name)
    nested, gw = _details(deep)
    assert gw.ok, nested
    assert nested["calendar"] == flat["calendar"] and nested["chat"] == flat["chat"]
    assert nested["mail"].split(";")[0] == flat["mail"].split(";")[0]  # same message count
    assert not flat["mail"].startswith("0 messages") and not flat["chat"].startswith("0 spaces")


@pytest.mark.parametrize(
    "app,what",
    [("calendar", "calendar (.ics)"), ("mail", "mailbox (.mbox)"), ("chat", "chat export")],
)
def test_app_folder_without_data_is_not_ready(world_template, tmp_path, app, what):
    root = tmp_path / "w"
    shutil.copytree(world_template, root)
    shutil.rmtree(root / ".apps_data" / app)
    (root / ".apps_data" / app / "export").mkdir(parents=True)
    (root / ".apps_data" / app / "export" / "README.txt").write_text("nothing here\n")
    with pytest.raises(ApexError) as e:
        build_gateway(open_world(root), apps=[app])
    assert app in str(e.value) and "holds no" in str(e.value) and what in str(e.value)
    gw = build_gateway(open_world(root), apps=[app], strict=False)
    assert not gw.ok and gw.health()["status"] != "ok"


def test_a_world_without_the_app_folder_still_serves(world_template, tmp_path):
    root = tmp_path / "w"
    shutil.copytree(world_template, root)
    shutil.rmtree(root / ".apps_data" / "calendar")
    _, gw = _details(root)
    assert gw.status["calendar"].ok and gw.status["calendar"].detail.startswith("0 events")


def test_world_zip_wrapped_in_several_folders(tmp_path):
    import zipfile

    z = tmp_path / "w.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("export/world_x/filesystem/a.txt", "a\n")
        zf.writestr("export/world_x/.apps_data/mail/inbox.mbox", "")
        zf.writestr("__MACOSX/export/._a.txt", "")
    w = open_world(z, workdir=tmp_path / "x")
    assert (w.fs_root / "a.txt").read_text() == "a\n"
