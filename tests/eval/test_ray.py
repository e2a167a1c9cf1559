"""Ray fan-out: each trial a Ray task on a local Ray instance started here."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from apexrl.eval import resume
from apexrl.eval.runner import EvalRequest, run_eval
from tests.eval.conftest import scripted_trial

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def local_ray():
    import ray

    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def test_trials_fan_out_as_ray_tasks(local_ray, task_dirs, tmp_path):
    import os

    seen_pids = set()

    def on_result(row, prog):
        seen_pids.add(row.trial_id)

    run_dir = tmp_path / "run"
    req = EvalRequest(
        tasks=str(task_dirs), run_dir=run_dir, agent="oracle", attempts=2, ray_address="auto"
    )
    report, cfg = run_eval(req, trial_fn=scripted_trial, on_result=on_result)
    assert report.ran == 28 and cfg.ray_address == "auto"
    ids = pq.read_table(run_dir / "results.parquet").column("trial_id").to_pylist()
    assert len(ids) == len(set(ids)) == 28 == len(seen_pids)
    # trajectories travel back from the workers; the driver alone writes the run dir
    for tid in ids:
        assert (run_dir / "trajectories" / tid / "trajectory.json").is_file()
    # the trials ran in Ray worker processes, not in this one
    pids = {
        orjson.loads((run_dir / "trajectories" / t / "trajectory.json").read_bytes())["pid"]
        for t in ids
    }
    assert os.getpid() not in pids
    assert {p.name for p in (run_dir / "logs").iterdir()} == set(ids)
    assert local_ray.is_initialized()  # a Ray instance the caller started is left running
    assert resume.load_journal(run_dir).keys() == set(ids)
