"""Harbor's own podman environment runs an apexrl world image (image ref from task.toml)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import harbor_config, run_trial
from tests.trial.conftest import task_named
from tests.trial.podman_world import build_world_image, podman_env

pytestmark = pytest.mark.integration
WORLD = "world_8ee6dc9ad01f38c743fa5b5a24a31e07"
REF = "localhost/apexrl-test-world:w8ee"


@pytest.fixture(scope="session")
def podman_task(tmp_path_factory, trial_data, task_dirs):
    """A copy of an example task whose task.toml names a loaded world image."""
    work = tmp_path_factory.mktemp("podman")
    build_world_image(trial_data / "ex" / "world_files_zipped" / f"{WORLD}.zip", work, REF)
    os.environ.update(
        {
            "CONTAINERS_CONF": podman_env(work)["CONTAINERS_CONF"],
            # Harbor finds podman-compose (a dev dependency) on PATH
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        }
    )
    src = task_named(task_dirs, "market-size-table")
    task = work / "tasks" / src.name
    shutil.copytree(src, task)
    toml = (task / "task.toml").read_text()
    assert WORLD in toml
    toml = re.sub(r"(?m)^\[environment\]$", f'[environment]\ndocker_image = "{REF}"', toml)
    # Harbor's podman environment cannot enforce convert's default "no-network": it
    # refuses such tasks, so this one opts into the network explicitly
    toml = toml.replace('network_mode = "no-network"', 'network_mode = "public"')
    (task / "task.toml").write_text(toml)
    return task


def test_oracle_trial_in_podman_with_host_grading(tmp_path, worlds, podman_task):
    for i in range(2):  # the world image survives a trial (it is shared by the world's tasks)
        cfg = TrialConfig(
            agent="oracle",
            environment="podman",
            worlds_dir=worlds,
            retries=0,
            logs_dir=tmp_path / f"t{i}",
        )
        out = run_trial(podman_task, cfg)
        assert (out.result.status, out.result.reward) == ("complete", 1.0), out.error_message
        assert out.result.criteria_met == out.result.criteria_total == 4
        grading = json.loads((tmp_path / f"t{i}" / "verifier" / "grading.json").read_text())
        assert grading["changes"]["created"] == ["filesystem/outputs/market_summary.csv"]


def test_harbor_oracle_and_verifier_in_podman(tmp_path, worlds, podman_task):
    """Harbor's own oracle and tests/test.sh (the vendored runner) inside the container."""
    from harbor.models.trial.config import AgentConfig, VerifierConfig
    from harbor.trial.trial import Trial

    cfg = TrialConfig(agent="oracle", environment="podman", logs_dir=tmp_path / "h")
    hc = harbor_config(podman_task, cfg)
    hc.agent = AgentConfig(name="oracle")
    hc.verifier = VerifierConfig()

    async def go():
        return await (await Trial.create(hc)).run()

    hr = asyncio.run(go())
    assert hr.exception_info is None, hr.exception_info
    assert hr.verifier_result.rewards["reward"] == 1.0
    assert hr.verifier_result.rewards["criteria_met"] == 4
