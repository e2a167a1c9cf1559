"""walk_files: the world-state walk behind every trial's before/after diff.

Checked against os.walk (the walk it replaced) on random trees with files, folders,
links to files, folders and nowhere, and FIFOs: the same files in the same order.
A top folder that is a link is not walked (a sandbox that swaps /world/filesystem
for a link must not send the host's diff somewhere else)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from apexrl.worlds.store import TOPS, walk_files


def _os_walk_files(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for top in TOPS:
        base = root / top
        if not base.is_dir() or base.is_symlink():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in filenames:
                p = Path(dirpath) / name
                if p.is_symlink() or not p.is_file():
                    continue
                out[p.relative_to(root).as_posix()] = p
    return out


def _random_tree(root: Path, rng: random.Random) -> None:
    folders = []
    for top in TOPS:
        if rng.random() < 0.9:
            (root / top).mkdir()
            folders.append(root / top)
    for _ in range(rng.randint(0, 60)):
        if not folders:
            return
        p = rng.choice(folders) / f"n{rng.randint(0, 30)}"
        if p.exists() or p.is_symlink():
            continue
        kind = rng.random()
        if kind < 0.55:
            p.write_text("x" * rng.randint(0, 20))
        elif kind < 0.75:
            p.mkdir()
            folders.append(p)
        elif kind < 0.9:
            os.symlink(rng.choice(["/etc", "/etc/passwd", "missing", str(root)]), p)
        else:
            os.mkfifo(p)


def test_same_files_and_order_as_os_walk(tmp_path):
    rng = random.Random(20)
    for i in range(150):
        root = tmp_path / str(i)
        root.mkdir()
        _random_tree(root, rng)
        assert list(walk_files(root).items()) == list(_os_walk_files(root).items()), i


def test_a_top_folder_that_is_a_link_is_not_walked(tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "host.txt").write_text("host")
    world = tmp_path / "world"
    (world / TOPS[1]).mkdir(parents=True)
    (world / TOPS[1] / "mail.mbox").write_text("m")
    os.symlink(outside, world / TOPS[0])
    assert list(walk_files(world)) == [f"{TOPS[1]}/mail.mbox"]
