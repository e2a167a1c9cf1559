"""Published traces hold no absolute host path (issue 42, finding 5): the run, task and
world folders (a username under /home) become paths relative to the run, or go.

A real `apexrl eval run` (trials scripted as the agent leaves them) whose trial logs name
the trial's folder, the task folder and a home folder; `publish traces` stages it."""

from __future__ import annotations

import json

import pytest

from apexrl.cli.app import app
from apexrl.trial.config import TrialConfig, TrialOutcome
from tests.eval.conftest import eval_runner
from tests.publish.test_publish_eval_run import agent_like_trial


def trial_that_logs_paths(task_dir, config: TrialConfig) -> TrialOutcome:
    out = agent_like_trial(task_dir, config)
    log = config.logs_dir / "agent" / "agent.log"
    log.write_text(
        log.read_text()
        + f"trial folder {config.logs_dir}/agent\ntask {task_dir}\n"
        + "world copy at /home/alice/apexrl/worlds/world_a\n"
    )
    return out


@pytest.fixture
def path_run(mini_apex, tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    runner = eval_runner(trial_that_logs_paths)
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    run = tmp_path / "run"
    res = runner.invoke(
        app, ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run)]
    )
    assert res.exit_code == 0, res.output
    return run


def staged_bytes(stage):
    """Every staged file's bytes; a Parquet file's rows as JSON (its pages are compressed)."""
    import pyarrow.parquet as pq

    out = {}
    for p in stage.rglob("*"):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix == ".parquet":
                data = json.dumps(pq.read_table(p).to_pylist(), default=str).encode()
            out[p.relative_to(stage).as_posix()] = data
    return out


def test_published_traces_hold_no_host_path(runner, path_run, tmp_path):
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(path_run), "--repo", "acme/t", "--dry-run", "--stage",
         str(stage), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    staged = staged_bytes(stage)
    for host in (str(tmp_path).encode(), b"/home/alice"):
        found = {name: data.count(host) for name, data in staged.items() if host in data}
        assert found == {}, (host, found)
    # what they became: relative to the run
    rows = json.loads(staged["data/train-00000-of-00001.parquet"])
    log = next(x["text"] for x in rows[0]["logs"] if x["name"] == "agent/agent.log")
    tid = rows[0]["trial_id"]
    assert f"trial folder logs/{tid}/agent\n" in log, log
    assert "world copy at ~/apexrl/worlds/world_a" in log
    run = json.loads(staged["run.json"])
    assert run["dataset"]["source"] == "../tasks", run["dataset"]


def test_host_paths_rules():
    from apexrl.publish.hostpaths import HostPaths

    h = HostPaths("/home/alice/runs/r1", ["/home/alice/data/tasks", "/tmp/worlds"])
    assert h.text("/home/alice/runs/r1/logs/t1/a.log") == "logs/t1/a.log"
    assert h.text('"/home/alice/runs/r1", /home/alice/runs/r1.') == '".", ..'
    assert h.text("/home/alice/runs/r10/x") == "~/runs/r10/x"  # another folder
    assert h.text("src=/home/alice/data/tasks/t") == "src=../../data/tasks/t"
    assert h.text("/tmp/worlds/w.zip") == "worlds/w.zip"  # shares only /: its own name
    assert h.text("cat /home/bob/.ssh/id; ls /root/.cache /rootfs") == (
        "cat ~/.ssh/id; ls ~/.cache /rootfs"
    )
    assert h.obj({"a": ["/home/alice/runs/r1/x", 3]}) == {"a": ["x", 3]}
    assert h.bytes_text(b"\xff/home/alice/runs/r1/y") == b"\xffy"
