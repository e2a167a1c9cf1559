"""Pack and unpack of 2,000 tasks against `tar czf` / `tar xzf` of the same tree.

Measures only; writes ratios to bench/results.json (key "tasks_pack"): the median of
RUNS interleaved rounds with min/max and the load average. Targets (issue 21): pack
<= 1.0x tar czf, unpack <= 1.0x tar xzf.

Two places, same tree: the benchmark's temp folder on disk (what a user's job sees:
figures at the top level of the key) and, where /dev/shm is a tmpfs with room, memory
("tmpfs": no disk in the figure, so it compares CPU cost, where a Python unpacker is
furthest from tar). Before every timed call, untimed, the previous output is removed
and the disk flushed (sync), so neither contender pays for the other's writeback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.benchmarks.results import RUNS, interleaved, load_average, ratio, record, stats

N_TASKS = 2000


def _replicated_tasks(root: Path) -> Path:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    write_example(root / "expert", seed=0)
    converted = root / "converted"
    list(convert_all(load_source(root / "expert"), converted, {}, strict=True))
    templates = sorted(converted.iterdir())
    tree = root / "tasks"
    tree.mkdir()
    for i in range(N_TASKS):
        src = templates[i % len(templates)]
        shutil.copytree(src, tree / f"{src.name}-{i:05d}")
    return tree


TMPFS = Path("/dev/shm")
TMPFS_ROOM = 1 << 30  # the tree, its tar.gz, the dataset and two extracted copies fit well


def _flush(*outs: Path):
    def before() -> None:
        for out in outs:
            shutil.rmtree(out, ignore_errors=True)
        os.sync()

    return before


def _measure(work: Path, tree: Path) -> dict:
    """Pack/tar czf and unpack/tar xzf rounds with everything they write under `work`."""
    from apexrl.tasks.dataset import write_dataset
    from apexrl.tasks.pack import find_task_dirs, pack_dirs
    from apexrl.tasks.unpack import unpack_dataset

    dirs = find_task_dirs(tree)
    ds, tgz, unpacked, untarred = (work / n for n in ("ds", "tree.tgz", "unpacked", "untarred"))

    def pack():
        write_dataset(pack_dirs(dirs), ds)

    def tar_czf():
        subprocess.run(["tar", "czf", str(tgz), "-C", str(tree), "."], check=True)

    def unpack():
        unpack_dataset(ds, unpacked, strict=True)

    def tar_xzf():
        untarred.mkdir()
        subprocess.run(["tar", "xzf", str(tgz), "-C", str(untarred)], check=True)

    packing = interleaved(RUNS, {"pack": pack, "tar_czf": tar_czf}, before=_flush())
    unpacking = interleaved(
        RUNS, {"unpack": unpack, "tar_xzf": tar_xzf}, before=_flush(unpacked, untarred)
    )
    return {
        "n_tasks": len(dirs),
        "dataset_bytes": sum(p.stat().st_size for p in ds.rglob("*") if p.is_file()),
        "tar_gz_bytes": tgz.stat().st_size,
        "pack": stats(packing["pack"]),
        "tar_czf": stats(packing["tar_czf"]),
        "pack_vs_tar_czf": ratio(packing["pack"], packing["tar_czf"]),
        "unpack": stats(unpacking["unpack"]),
        "tar_xzf": stats(unpacking["tar_xzf"]),
        "unpack_vs_tar_xzf": ratio(unpacking["unpack"], unpacking["tar_xzf"]),
    }


def _tmpfs_work() -> Path | None:
    """A fresh folder on /dev/shm when it is a tmpfs with room, else None."""
    if not TMPFS.is_dir() or shutil.disk_usage(TMPFS).free < TMPFS_ROOM:
        return None
    with open("/proc/mounts", encoding="utf-8") as fh:
        if not any(line.split()[1:3] == [str(TMPFS), "tmpfs"] for line in fh):
            return None
    return Path(tempfile.mkdtemp(prefix="apexrl-bench-tasks-", dir=TMPFS))


@pytest.mark.timeout(1800)  # a busy shared disk makes one round take minutes
def test_bench_pack_unpack_vs_tar(tmp_path):
    load_at_start = load_average()
    tree = _replicated_tasks(tmp_path)
    tree_bytes = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    n_files = sum(1 for p in tree.rglob("*") if p.is_file())
    disk = tmp_path / "disk"
    disk.mkdir()
    figures = {
        "command": "make bench (tests/benchmarks/test_bench_tasks.py)",
        "runs": RUNS,
        "n_files": n_files,
        "tree_bytes": tree_bytes,
        **_measure(disk, tree),
        "peer": "GNU tar (tar czf / tar xzf) of the same task tree, same run, rounds interleaved",
        "target": "pack <= 1.0x tar czf; unpack <= 1.0x tar xzf (issue 21)",
        "rounds": "before every timed call, untimed: the last output removed, then sync",
    }
    shm = _tmpfs_work()
    if shm is None:
        figures["tmpfs"] = "not measured: /dev/shm is not a tmpfs with 1 GiB free"
    else:
        try:
            shutil.copytree(tree, shm / "tree")
            figures["tmpfs"] = _measure(shm, shm / "tree")
        finally:
            shutil.rmtree(shm, ignore_errors=True)
    record("tasks_pack", figures, load_at_start=load_at_start)
    print(figures)
