"""Pack and unpack of 2,000 tasks against `tar czf` / `tar xzf` of the same tree.

Measures only; writes ratios to bench/results.json (key "tasks_pack"). Targets
(issue 2): pack within 1.5x of tar czf, unpack within 1.5x of tar xzf.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.benchmarks.results import best_of, record

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


def test_bench_pack_unpack_vs_tar(tmp_path):
    from apexrl.tasks.dataset import write_dataset
    from apexrl.tasks.pack import find_task_dirs, pack_dirs
    from apexrl.tasks.unpack import unpack_dataset

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

    t_pack, t_tar = best_of(3, pack), best_of(3, tar_czf)
    t_unpack, t_untar = best_of(3, unpack), best_of(3, tar_xzf)
    ds_bytes = sum(p.stat().st_size for p in (tmp_path / "ds").rglob("*") if p.is_file())
    figures = {
        "command": "make bench (tests/benchmarks/test_bench_tasks.py)",
        "n_tasks": len(dirs),
        "n_files": n_files,
        "tree_bytes": tree_bytes,
        "dataset_bytes": ds_bytes,
        "tar_gz_bytes": (tmp_path / "tree.tgz").stat().st_size,
        "pack_s": round(t_pack, 3),
        "tar_czf_s": round(t_tar, 3),
        "pack_vs_tar_czf": round(t_pack / t_tar, 3),
        "unpack_s": round(t_unpack, 3),
        "tar_xzf_s": round(t_untar, 3),
        "unpack_vs_tar_xzf": round(t_unpack / t_untar, 3),
        "peer": "GNU tar (tar czf / tar xzf) of the same task tree, same run",
        "target": "pack <= 1.5x tar czf; unpack <= 1.5x tar xzf",
    }
    record("tasks_pack", figures)
    print(figures)
