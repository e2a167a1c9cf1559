"""A world store that cannot give a task's world (its zip corrupt or missing) is the
environment's failure, not the task's nor the model's: class `world_store` (kind
`world`), counted with the infrastructure (exit 4, `--retry-errors` reruns it), shown
apart from the model's failures and from broken tasks (issue 41 leftover)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.cli.eval import EvalDeps
from apexrl.errors import BadRecordError, ExitCode
from apexrl.eval.infra import infra_kind, is_infra, is_task_error
from tests.eval.conftest import passing_trial
from tests.eval.test_world_zip_reason import _junk_store


def store_trial(task_dir: Path, config):
    """What the local environment does first (its world from the store), with the
    trial runner's own failure record; then a pass."""
    from apexrl.trial.run import _failed_outcome
    from apexrl.worlds.store import WorldStore, task_world

    try:
        WorldStore(Path(config.worlds_dir)).pristine(task_world(task_dir).world_id)
    except Exception as e:  # as apexrl.trial.run.arun_trial records a trial's failure
        return _failed_outcome(task_dir, config, datetime.now(UTC), 0.0, e)
    return passing_trial(task_dir, config)


def test_a_corrupt_or_missing_world_is_the_stores_failure(example_dirs, tmp_path):
    from apexrl.worlds.store import WorldStore, WorldStoreError

    expert, _ = example_dirs
    store, law = _junk_store(expert, tmp_path)
    with pytest.raises(WorldStoreError, match="not a readable zip") as bad:
        WorldStore(store, cache_dir=tmp_path / "cache").pristine(law)
    assert isinstance(bad.value, BadRecordError)  # still a bad record where one is caught
    with pytest.raises(WorldStoreError, match="is not in the world store") as gone:
        WorldStore(store, cache_dir=tmp_path / "cache").pristine("world_absent")
    assert gone.value.code == ExitCode.USAGE
    assert infra_kind("error", "world_store") == "world"
    assert is_infra("error", "world_store") and not is_task_error("error", "world_store")


def test_the_run_counts_it_as_infrastructure_not_the_tasks(example_dirs, tmp_path):
    expert, tasks = example_dirs
    store, law = _junk_store(expert, tmp_path)
    run_dir = tmp_path / "run"
    argv = ["eval", "run", "--agent", "oracle", "-t", str(tasks), "--worlds", str(store)]
    argv += ["-o", str(run_dir), "--domain", "law", "--limit", "2"]
    res = CliRunner().invoke(app, argv, obj=EvalDeps(trial_fn=store_trial))
    assert res.exit_code == 4, res.output
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    assert summary["infra_errors"] == {"world_store": 2} and summary["task_errors"] == {}
    assert summary["trials_ungraded"] == 2 and summary["n_trials"] == 0
    (msg,) = summary["error_messages"]["world_store"]
    assert f"{law}.zip" in msg and "not a readable zip" in msg
    assert "world_store 2" in res.stderr and "--retry-errors" in res.stderr
    md = CliRunner().invoke(app, ["eval", "report", str(run_dir), "-f", "md"]).stdout
    assert "world_store" in md and "task errors" not in md
    # the store fixed, --retry-errors reruns exactly those trials, and they are graded
    (store / f"{law}.zip").write_bytes((expert / "world_files_zipped" / f"{law}.zip").read_bytes())
    res = CliRunner().invoke(app, [*argv, "--retry-errors"], obj=EvalDeps(trial_fn=store_trial))
    assert res.exit_code == 0, res.output
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    assert summary["infra_errors"] == {} and summary["n_trials"] == 2
