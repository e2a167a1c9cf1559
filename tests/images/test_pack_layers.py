"""A large world is cut into several layers (packed and pushed in parallel) that an
independent tool (umoci) unpacks to exactly the tree of the one-layer image."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from apexrl.images import oci
from apexrl.images.pack import split_world_entries
from tests.images.conftest import apexrl, make_world, records, run


def _file(name: str, size: int) -> oci.Entry:
    return oci.Entry(name, "file", 0o644, size, lambda: None)


def test_split_keeps_path_order_whole_files_and_parents_in_every_group():
    entries = [_file(f"world/fs/d{i % 3}/f{i:02d}.bin", 10 + i) for i in range(30)]
    entries.append(oci.Entry("world/fs/d1", "dir", 0o700))  # an explicit mode is carried along
    entries.append(oci.Entry("world/fs/link", "symlink", 0o777, linkname="d0/f00.bin"))
    groups = split_world_entries(entries, layer_bytes=200)
    total = sum(10 + i for i in range(30))
    assert len(groups) == -(-total // 200) == 4
    files = [e.name for g in groups for e in g if e.kind != "dir"]
    assert files == sorted(e.name for e in entries if e.kind != "dir")  # each once, in order
    target = -(-total // len(groups))
    for g in groups:
        names = {e.name for e in g}
        for e in g:  # every entry's parents are in its own group, with the same entry
            parts = e.name.split("/")[:-1]
            assert all("/".join(parts[: i + 1]) in names for i in range(len(parts)))
        assert sum(e.size for e in g if e.kind == "file") <= target + 39
        assert [e.name for e in g] == sorted(e.name for e in g)
    d1 = [e for g in groups for e in g if e.name == "world/fs/d1"]
    assert d1 and {e.mode for e in d1} == {0o700}


def test_split_leaves_small_worlds_whole_and_caps_the_layer_count():
    entries = [_file(f"world/f{i:03d}", 100) for i in range(100)]
    assert len(split_world_entries(entries, layer_bytes=10_000)) == 1
    assert len(split_world_entries(entries, layer_bytes=0)) == 1
    assert len(split_world_entries(entries, layer_bytes=10)) == 8  # MAX_WORLD_LAYERS
    big = [_file("world/huge", 5000), _file("world/small", 10)]
    groups = split_world_entries(big, layer_bytes=1000)  # a file is never split
    assert [[e.name for e in g if e.kind == "file"] for g in groups] == [
        ["world/huge"],
        ["world/small"],
    ]


def _tree(root: Path) -> dict[str, tuple[int, bytes | str | None]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                body = os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                body = p.read_bytes()
            else:
                body = None
            out[str(p.relative_to(root))] = (stat.S_IMODE(st.st_mode), body)
    return out


@pytest.mark.integration  # skopeo and umoci, the independent readers
def test_cut_image_unpacks_to_the_one_layer_tree_and_stays_reproducible(runtime_pkg, tmp_path):
    world = make_world(tmp_path / "w", n_files=2)
    data = world / "filesystem" / "data"
    data.mkdir()
    for i in range(7):
        (data / f"part_{i}.bin").write_bytes(bytes([i]) * (700 << 10))
    (world / "filesystem" / "latest").symlink_to("data/part_6.bin")

    def pack(out: str, *extra: str) -> dict:
        p = apexrl("world", "pack", str(world), "-o", str(tmp_path / out),
                   "--runtime", str(runtime_pkg), *extra)  # fmt: skip
        assert p.returncode == 0, p.stderr
        (rec,) = records(p.stdout)
        return rec

    cut, again, whole = (
        pack("a", "--layer-mb", "1"),
        pack("b", "--layer-mb", "1"),
        pack("c", "--layer-mb", "0"),
    )
    assert cut["digest"] == again["digest"]  # byte-identical however the threads ran
    cut_src, whole_src = (
        oci.open_image(Path(cut["archive"])),
        oci.open_image(Path(whole["archive"])),
    )
    n_cut, n_whole = len(cut_src.manifest["layers"]), len(whole_src.manifest["layers"])
    assert n_whole == 2 and n_cut == 1 + 5  # runtime + ceil(~4.8 MiB / 1 MiB) world layers
    history = [h.get("created_by", "") for h in cut_src.config()["history"]]
    assert [h.rsplit("(", 1)[-1] for h in history[-5:]] == [f"part {i}/5)" for i in range(1, 6)]

    trees = []
    for rec in (cut, whole):
        layout, bundle = (
            tmp_path / f"layout-{rec['digest'][7:15]}",
            tmp_path / f"b-{rec['digest'][7:15]}",
        )
        run(["skopeo", "copy", f"oci-archive:{rec['archive']}", f"oci:{layout}:img"])
        run(["umoci", "unpack", "--rootless", "--image", f"{layout}:img", str(bundle)])
        trees.append(_tree(bundle / "rootfs" / "world"))
    assert trees[0] == trees[1]
    assert trees[0]["filesystem/latest"][1] == "data/part_6.bin"
    assert trees[0]["filesystem/data/part_3.bin"][1] == bytes([3]) * (700 << 10)
