"""`publish traces` on a run dir written by the real `apexrl eval run` (trials scripted)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from apexrl.trial.config import TrialConfig, TrialOutcome
from tests.eval.conftest import eval_runner
from tests.publish.conftest import PLANTED, make_checkpoint
from tests.publish.hub_formats import check_parquet_for_viewer, check_session_file


def _meta(task_dir):
    import tomllib

    return tomllib.loads((task_dir / "task.toml").read_text())["metadata"]


def agent_like_trial(task_dir, config: TrialConfig) -> TrialOutcome:
    """What the apexrl agent leaves in a trial's logs: ATIF + TITO trajectory, grading."""
    from apexrl.artifacts.models import TrialResult
    from apexrl.tito.trajectory import TitoTrajectory, TitoTurn

    meta = _meta(task_dir)
    messages = [
        {"role": "user", "content": f"Do {meta['task_id']}"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "files_read", "arguments": "{}"},
                },
            ],
        },  # fmt: skip
        {"role": "tool", "tool_call_id": "c1", "content": f"token={PLANTED['hf']}"},
        {"role": "assistant", "content": "42"},
    ]
    traj = TitoTrajectory(
        trajectory_id=f"{meta['task_id']}-{config.attempt}",
        model="tiny",
        messages=messages,
        prompt_ids=[1, 2],
        n_prompt_messages=1,
        turns=[
            TitoTurn(kind="sampled", token_ids=[3], logprobs=[-0.5], message_index=1),
            TitoTurn(kind="observation", token_ids=[4, 5], message_index=2),
            TitoTurn(kind="sampled", token_ids=[6], logprobs=[-0.1], message_index=3),
        ],
    )
    agent = config.logs_dir / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "trajectory.json").write_text(json.dumps(traj.to_atif()))
    (agent / "tito.json").write_text(traj.model_dump_json())
    (agent / "agent.log").write_text(f"export AWS_ACCESS_KEY_ID={PLANTED['aws_key']}\n")
    ver = config.logs_dir / "verifier"
    ver.mkdir(parents=True, exist_ok=True)
    (ver / "grading.json").write_text(
        json.dumps({"verdicts": [{"verifier_id": "v1", "criteria": "c", "met": True,
                                  "source": "deterministic"}]})
    )  # fmt: skip
    n = int(meta.get("n_criteria") or 1)
    return TrialOutcome(
        result=TrialResult(
            task_id=meta["task_id"],
            domain=meta["domain"],
            world_id=meta["world_id"],
            attempt=config.attempt,
            reward=1.0,
            criteria_met=n,
            criteria_total=n,
            turns=2,
        ),  # fmt: skip
        trajectory_path=agent / "trajectory.json",
        tokens_path=agent / "tito.json",
        verdicts=[{"verifier_id": "v1", "criteria": "c", "met": True, "source": "reference"}],
    )


@pytest.fixture
def eval_run(runner, mini_apex, tmp_path, monkeypatch):

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    runner = eval_runner(agent_like_trial)
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    run = tmp_path / "run"
    res = runner.invoke(
        app, ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run), "-k", "2"]
    )
    assert res.exit_code == 0, res.output
    return run


def test_traces_of_a_real_eval_run(runner, eval_run, tmp_path):
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(eval_run), "--repo", "acme/t", "--include-tokens",
         "--dry-run", "--stage", str(stage), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "token-ids-withheld" in r.stderr
    results = pq.read_table(eval_run / "results.parquet").to_pylist()
    rows = pq.read_table(stage / "data/train-00000-of-00001.parquet").to_pylist()
    assert sorted(x["trial_id"] for x in rows) == sorted(x["trial_id"] for x in results)
    for row in rows:
        assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert row["messages"][2]["content"] == "token=[REDACTED:hf-token]"
        # the ids spell the trial's text, the planted token included: withheld (issue 29)
        assert row["token_ids"] == [] and row["loss_mask"] == []
        # trajectories/<trial>/verdicts.json (written by eval run) wins over logs/ grading.json
        assert (eval_run / "trajectories" / row["trial_id"] / "verdicts.json").is_file()
        assert row["criteria"][0]["source"] == "reference"
        assert "agent/agent.log" in [x["name"] for x in row["logs"]]
        assert PLANTED["aws_key"] not in json.dumps(row)
    card = (stage / "README.md").read_text()
    assert "| this run | all |" in card


def test_model_card_from_a_real_eval_run(runner, eval_run, tmp_path):
    ckpt = make_checkpoint(tmp_path / "ckpt")
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "model", str(ckpt), "--repo", "acme/m", "--eval", str(eval_run),
         "--dry-run", "--stage", str(stage)],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    card = (stage / "README.md").read_text()
    assert "| run | all | 4 | 100.00 | [100.00, 100.00] |" in card
    assert "name: Pass@1 (law)" in card


def test_links_planted_in_trial_logs_are_never_followed(runner, mini_apex, tmp_path, monkeypatch):
    """Issue 16: `trajectory.json` and `*.log` linked to host files: `eval run` copied the
    host file into the run and `publish traces` staged it. Now both refuse the links."""

    secret = tmp_path / "host-shadow"
    secret.write_text("root:HOST-ONLY-HASH:19000:0:99999:7:::\n")

    def hostile_trial(task_dir, config: TrialConfig) -> TrialOutcome:
        out = agent_like_trial(task_dir, config)
        agent = config.logs_dir / "agent"
        (agent / "trajectory.json").unlink()
        (agent / "trajectory.json").symlink_to(secret)
        (agent / "shadow.log").symlink_to(secret)
        (agent / "sub").mkdir()
        (agent / "sub" / "up").symlink_to(tmp_path)  # a folder link: never descended
        return out

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    runner = eval_runner(hostile_trial)
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    run = tmp_path / "run"
    res = runner.invoke(
        app, ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run)]
    )
    assert res.exit_code == 0, res.output
    for p in (run / "trajectories").rglob("*"):
        assert not p.is_symlink()
        if p.is_file():
            assert "HOST-ONLY-HASH" not in p.read_text(errors="replace"), p
    refused = list((run / "trajectories").rglob("trajectory.json.refused.txt"))
    assert refused and "link" in refused[0].read_text()
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(run), "--repo", "acme/t", "--dry-run", "--stage", str(stage)],
    )
    assert r.exit_code == 0, r.stderr
    for p in stage.rglob("*"):
        if p.is_file():
            assert b"HOST-ONLY-HASH" not in p.read_bytes(), p


def test_traces_of_the_demo_run_open_in_the_hubs_viewers(runner, eval_run, tmp_path):
    """Issue 44: one Session Traces file per trial, parsed line by line against the format's
    required fields; Parquet whose row groups are under 100 MB, with a page index."""
    stage = tmp_path / "stage"
    r = runner.invoke(
        app, ["publish", "traces", str(eval_run), "--repo", "acme/t", "--dry-run",
              "--stage", str(stage), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    staged = {json.loads(x)["path"] for x in r.stdout.splitlines()}
    results = pq.read_table(eval_run / "results.parquet").to_pylist()
    sessions = sorted(stage.glob("sessions/*/*.jsonl"))
    assert len(sessions) == len(results) > 1
    assert {p.relative_to(stage).as_posix() for p in sessions} <= staged
    ids = set()
    for p in sessions:
        header = json.loads(p.read_text().splitlines()[0])
        assert header["harness"] == "apexrl"
        ids.add(header["id"])
        messages = check_session_file(p)
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[1]["toolCalls"][0]["function"]["name"] == "files_read"
        assert messages[2]["toolCallId"] == messages[1]["toolCalls"][0]["id"]
        assert messages[2]["content"] == "token=[REDACTED:hf-token]"  # the same scanner
        assert PLANTED["hf"] not in p.read_text()
    assert ids == {x["trial_id"] for x in results}
    shards = sorted(stage.glob("data/*.parquet"))
    assert shards
    for shard in shards:
        check_parquet_for_viewer(shard)
    card = (stage / "README.md").read_text()
    assert "config_name: sessions" in card and "sessions/*/*.jsonl" in card


def test_an_ungraded_trial_is_published_without_a_reward(runner, mini_apex, tmp_path, monkeypatch):
    """A trial whose judge was unavailable has no score: its published reward is null and
    `graded` false (a Hub user averaging `reward` must not count it as a failure), the
    session header says so too, and the card counts the ungraded rows."""

    def judge_down_on_attempt_1(task_dir, config: TrialConfig) -> TrialOutcome:
        out = agent_like_trial(task_dir, config)
        if config.attempt == 1:
            r = out.result.model_copy(
                update={"status": "no_verifier_result", "error_class": "judge_unavailable",
                        "reward": 0.0, "criteria_met": 0}
            )  # fmt: skip
            out = out.model_copy(update={"result": r, "verdicts": []})
        return out

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    runner = eval_runner(judge_down_on_attempt_1)
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    run = tmp_path / "run"
    res = runner.invoke(
        app, ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run), "-k", "2"]
    )
    assert res.exit_code == 4, res.output  # infrastructure is never exit 0
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(run), "--repo", "acme/t", "--dry-run", "--stage", str(stage)],
    )
    assert r.exit_code == 0, r.stderr
    rows = pq.read_table(stage / "data/train-00000-of-00001.parquet").to_pylist()
    n = len(rows)
    assert n == 2 * len(json.loads((run / "run.json").read_text())["plan"]["tasks"]) > 2
    for row in rows:
        graded = row["trial_id"].endswith(".a0")
        assert row["graded"] is graded
        assert row["reward"] == (1.0 if graded else None)
        assert (row["criteria_met"] is None) is not graded
    for p in stage.glob("sessions/*/*.jsonl"):
        header = json.loads(p.read_text().splitlines()[0])
        assert header["graded"] is (header["attempt"] == 0)
        assert header["reward"] == (1.0 if header["attempt"] == 0 else None)
    card = (stage / "README.md").read_text()
    why = f"(an infrastructure error: judge_unavailable {n // 2})"
    assert f"**{n // 2} of {n} trials are ungraded** {why}" in card
    assert "| graded | bool |" in card


def test_traces_cover_the_runs_plan_only(runner, eval_run, tmp_path):
    """A run folder whose rows include trials outside its plan (a journal written before a
    `--force` rerun replaced the plan): those are not this run's, so not published, and
    the card counts them."""
    run_json = eval_run / "run.json"
    run = json.loads(run_json.read_text())
    run["plan"]["attempts"] = 1  # the attempt-1 rows are now outside the plan
    run_json.write_text(json.dumps(run))
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(eval_run), "--repo", "acme/t", "--dry-run", "--stage",
         str(stage)],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rows = pq.read_table(stage / "data/train-00000-of-00001.parquet").to_pylist()
    n = len(run["plan"]["tasks"])
    assert len(rows) == n == len(list(stage.glob("sessions/*/*.jsonl"))) > 1
    assert all(x["trial_id"].endswith(".a0") for x in rows)
    card = (stage / "README.md").read_text()
    assert f"{n} trial(s) of the run folder outside the run's plan" in card
