"""One dataset digest: eval's run.json, a packed dataset's _dataset.json and a training
run's manifest (tasks.pack.source_digest) agree for the same tasks."""

from __future__ import annotations

from apexrl.eval.runner import resolve_tasks
from apexrl.tasks.pack import source_digest


def test_task_dirs_and_packed_dataset_give_the_digest_eval_records(task_dirs, tmp_path):
    from apexrl.tasks.dataset import PackedTask, write_dataset
    from apexrl.tasks.pack import find_task_dirs, pack_task_dir

    _, info = resolve_tasks(str(task_dirs), tmp_path / "run")
    assert info.n_tasks == 14
    assert source_digest(str(task_dirs)) == info.digest  # the folder of task dirs

    from apexrl.artifacts.models import DatasetRow

    packed = []
    for d in find_task_dirs(task_dirs):
        blob, sha = pack_task_dir(d)
        packed.append(PackedTask(DatasetRow(path=d.name, sha256=sha), blob))
    man = write_dataset(packed, tmp_path / "packed")
    assert man.digest == info.digest
    assert source_digest(str(tmp_path / "packed")) == info.digest
    _, info2 = resolve_tasks(str(tmp_path / "packed"), tmp_path / "run2")
    assert info2.digest == info.digest

    (task_dirs / next(iter(sorted(p.name for p in task_dirs.iterdir()))) / "extra.txt").write_text(
        "changed"
    )
    assert source_digest(str(task_dirs)) != info.digest
    assert source_digest("hf://org/name") is None
