"""apexrl.trial.task_memo: Harbor's task load and task hashes, once per folder state,
with Harbor's own results, and Harbor's checks again after any change."""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from pathlib import Path

import pytest
from harbor.models.task.task import Task
from harbor.models.trial.config import TaskConfig, VerifierConfig
from harbor.models.trial.config import TrialConfig as HarborTrialConfig
from harbor.publisher.packager import Packager
from harbor.trial.trial import Trial

from apexrl.trial import task_memo
from apexrl.trial.config import TrialConfig
from apexrl.trial.run import run_trial
from tests.trial.conftest import task_named


def _config(task_dir: Path, tmp_path: Path) -> HarborTrialConfig:
    return HarborTrialConfig(
        task=TaskConfig(path=task_dir),
        trial_name="t",
        trials_dir=tmp_path / "trials",
        verifier=VerifierConfig(),
    )


def _load(task_dir: Path, tmp_path: Path):
    return asyncio.run(task_memo.load_task(_config(task_dir, tmp_path), Trial._load_task))


def _checksum(task) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return task.checksum


def test_content_hash_is_harbors_and_follows_every_change(tmp_path, task_dirs, task_copy):
    task = task_copy(task_dirs[0])
    calls = []

    def harbor(d):
        calls.append(d)
        return Packager.compute_content_hash(d)

    first = task_memo.content_hash(task, harbor)
    assert first[0] == Packager.compute_content_hash(task)[0]
    assert task_memo.content_hash(task, harbor) == first and len(calls) == 1  # a hit
    solve = task / "solution" / "solve.sh"
    solve.write_text(solve.read_text().replace("#", "# ", 1))  # same folder, new content
    second = task_memo.content_hash(task, harbor)
    assert len(calls) == 2 and second[0] != first[0]
    assert second[0] == Packager.compute_content_hash(task)[0]
    (task / "tests" / "extra.txt").write_text("x")  # a new file
    assert task_memo.content_hash(task, harbor)[0] == Packager.compute_content_hash(task)[0]
    assert len(calls) == 3


def test_a_loaded_task_is_harbors_and_each_trial_gets_its_own(tmp_path, task_dirs, task_copy):
    path = task_copy(task_dirs[0])
    a, _ = _load(path, tmp_path)
    b, download = _load(path, tmp_path)
    plain = Task(task_dir=path)
    assert a.config == b.config == plain.config and a.instruction == plain.instruction
    assert _checksum(a) == _checksum(b) == _checksum(plain)
    assert a is not b and a.config is not b.config
    assert Path(download.path).resolve() == path.resolve()
    b.config.agent.timeout_sec = 1.0  # one trial's change stays in that trial
    c, _ = _load(path, tmp_path)
    assert c.config.agent.timeout_sec == plain.config.agent.timeout_sec


def test_a_link_planted_after_a_load_meets_harbors_check(tmp_path, task_dirs, task_copy):
    path = task_copy(task_dirs[0])
    _load(path, tmp_path)  # memoised
    os.symlink("/etc/passwd", path / "tests" / "passwd")
    with pytest.raises(Exception, match="(?i)symlink|link|outside|escape"):
        Task(task_dir=path)  # what Harbor says of this folder...
    with pytest.raises(Exception, match="(?i)symlink|link|outside|escape"):
        _load(path, tmp_path)  # ...the memo says too


def test_large_folders_are_not_kept(monkeypatch, task_dirs, task_copy):
    path = task_copy(task_dirs[0])
    monkeypatch.setattr(task_memo, "MAX_ENTRIES", 3)
    assert task_memo.fingerprint(path) is None
    calls = []

    def harbor(d):
        calls.append(d)
        return Packager.compute_content_hash(d)

    task_memo.content_hash(path, harbor)
    task_memo.content_hash(path, harbor)
    assert len(calls) == 2


def test_off_switch_gives_harbors_trial(monkeypatch):
    monkeypatch.setenv("APEXRL_TASK_MEMO", "0")
    assert task_memo.trial_class() is Trial
    monkeypatch.setenv("APEXRL_TASK_MEMO", "1")
    assert issubclass(task_memo.trial_class(), Trial) and task_memo.trial_class() is not Trial


def test_repeated_trials_of_one_task_score_and_lock_as_harbor_does(
    tmp_path, worlds, task_dirs, task_copy
):
    task = task_copy(task_named(task_dirs, "market-size-table"))
    rewards, digests = [], []
    for i in range(3):
        logs = tmp_path / "l" / str(i)
        out = run_trial(task, TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=logs))
        rewards.append(out.result.reward)
        digests.append(json.loads((logs / "lock.json").read_text())["task"]["digest"])
        if i == 1:  # change the task between trials: the next lock has the new digest
            (task / "instruction.md").write_text((task / "instruction.md").read_text() + "\n")
    assert rewards == [1.0, 1.0, 1.0]
    expected = [Packager.compute_content_hash(task)[0]]
    assert digests[0] == digests[1] != digests[2]
    assert digests[2].removeprefix("sha256:") == expected[0]


def test_published_shape_tasks_load_as_harbor_loads_them(tmp_path):
    """Every task converted from data in the published APEX-Agents shape: the memo's load,
    checksum and content hash are Harbor's, first load and repeat alike."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from tests.published_shape import build

    build(tmp_path / "apex", bad=False)
    outcomes = list(
        convert_all(load_source(tmp_path / "apex"), tmp_path / "tasks", {}, strict=True)
    )
    paths = [tmp_path / "tasks" / o.record.path for o in outcomes if o.record]
    assert len(paths) >= 9
    for path in paths:
        plain = Task(task_dir=path)
        for _ in range(2):
            task, _ = _load(path, tmp_path)
            assert task.config == plain.config and task.instruction == plain.instruction
            assert _checksum(task) == _checksum(plain)
            digest = task_memo.content_hash(path, Packager.compute_content_hash)[0]
            assert digest == Packager.compute_content_hash(path)[0]
