"""Pack and unpack of 2,000 tasks against `tar czf` / `tar xzf` of the same tree.

Measures only; writes ratios to bench/results.json (key "tasks_pack"): the median of
RUNS interleaved rounds with min/max and the load average. Targets (issue 21): pack
<= 1.0x tar czf, unpack <= 1.0x tar xzf.
"""

from __future__ import annotations

import shutil
import subprocess
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


@pytest.mark.timeout(1800)  # a busy shared disk makes one round take minutes
def test_bench_pack_unpack_vs_tar(tmp_path):
    from apexrl.tasks.dataset import write_dataset
    from apexrl.tasks.pack import find_task_dirs, pack_dirs
    from apexrl.tasks.unpack import unpack_dataset

    load_at_start = load_average()
    tree = _replicated_tasks(tmp_path)
    dirs = find_task_dirs(tree)
    tree_bytes = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
    n_files = sum(1 for p in tree.rglob("*") if p.is_file())

    def pack():
        write_dataset(pack_dirs(dirs), tmp_path / "ds")

    def tar_czf():
        subprocess.run(["tar", "czf", str(tmp_path / "tree.tgz"), "-C", str(tree), "."], check=True)

    def unpack():
        out = tmp_path / "unpacked"
        shutil.rmtree(out, ignore_errors=True)
        unpack_dataset(tmp_path / "ds", out, strict=True)

    def tar_xzf():
        out = tmp_path / "untarred"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        subprocess.run(["tar", "xzf", str(tmp_path / "tree.tgz"), "-C", str(out)], check=True)

    packing = interleaved(RUNS, {"pack": pack, "tar_czf": tar_czf})
    unpacking = interleaved(RUNS, {"unpack": unpack, "tar_xzf": tar_xzf})
    ds_bytes = sum(p.stat().st_size for p in (tmp_path / "ds").rglob("*") if p.is_file())
    figures = {
        "command": "make bench (tests/benchmarks/test_bench_tasks.py)",
        "runs": RUNS,
        "n_tasks": len(dirs),
        "n_files": n_files,
        "tree_bytes": tree_bytes,
        "dataset_bytes": ds_bytes,
        "tar_gz_bytes": (tmp_path / "tree.tgz").stat().st_size,
        "pack": stats(packing["pack"]),
        "tar_czf": stats(packing["tar_czf"]),
        "pack_vs_tar_czf": ratio(packing["pack"], packing["tar_czf"]),
        "unpack": stats(unpacking["unpack"]),
        "tar_xzf": stats(unpacking["tar_xzf"]),
        "unpack_vs_tar_xzf": ratio(unpacking["unpack"], unpacking["tar_xzf"]),
        "peer": "GNU tar (tar czf / tar xzf) of the same task tree, same run, rounds interleaved",
        "target": "pack <= 1.0x tar czf; unpack <= 1.0x tar xzf (issue 21)",
    }
    record("tasks_pack", figures, load_at_start=load_at_start)
    print(figures)
