"""Replay mode and trajectory records (apexrl JSONL and Harbor ATIF)."""

from __future__ import annotations

import json

import orjson
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.tito.trajectory import TitoTrajectory
from apexrl.tito.verify import replay_one
from tests.tito.synthetic import synthetic_trajectory

runner = CliRunner()


@pytest.fixture(scope="module")
def traj(tok, verbatim) -> TitoTrajectory:
    return synthetic_trajectory(tok, verbatim, seed=7, target_tokens=3000, template_name="v")


def test_synthetic_trajectory_is_consistent(tok, verbatim, traj):
    f = replay_one(tok, verbatim, traj)
    assert f.ok and f.status == "pass" and f.n_tokens == len(traj.ids) >= 3000
    st = traj.to_state()
    assert len(st.ids) == len(st.mask) == len(st.logprobs)


def _with_reasoning_trailing_newline(tok, traj: TitoTrajectory) -> TitoTrajectory:
    """The model ended its reasoning with an extra newline (kept verbatim in the stream)."""
    t = traj.model_copy(deep=True)
    turn = next(x for x in t.turns if x.kind == "sampled")
    text = tok.decode(turn.token_ids).replace("\n</think>", "\n\n</think>", 1)
    turn.token_ids = tok.encode(text)
    turn.logprobs = [0.0] * len(turn.token_ids)
    t.messages[turn.message_index]["reasoning_content"] += "\n"
    return t


def test_stock_template_drift_is_found_and_classified(tok, stock, verbatim, traj):
    t = _with_reasoning_trailing_newline(tok, traj)
    assert replay_one(tok, verbatim, t).ok
    f = replay_one(tok, stock, t)
    assert not f.ok and f.drift_rate > 0  # the stock template strips reasoning newlines
    assert f.causes == ["whitespace"], f.first_divergence
    t2 = t.model_copy(deep=True)
    t2.messages.append({"role": "user", "content": "And now?"})  # a new user turn prunes <think>
    f2 = replay_one(tok, stock, t2)
    assert "reasoning_pruned" in f2.causes and f2.drift_rate > f.drift_rate


def test_retokenization_and_tool_argument_reserialization(tok, verbatim, traj):
    t = traj.model_copy(deep=True)
    turn = next(x for x in t.turns if x.kind == "sampled")
    # split one multi-byte token into its pieces: decodes the same, encodes differently
    i = next(k for k, tid in enumerate(turn.token_ids) if len(tok.decode([tid])) >= 4)
    piece = tok.decode([turn.token_ids[i]])
    split = tok.encode(piece[:2]) + tok.encode(piece[2:])
    turn.token_ids[i : i + 1] = split
    turn.logprobs[i : i + 1] = [0.0] * len(split)
    f = replay_one(tok, verbatim, t)
    assert not f.ok and f.causes == ["retokenization"]

    t = traj.model_copy(deep=True)
    m = next(m for m in t.messages if m.get("tool_calls"))
    fn = m["tool_calls"][0]["function"]
    fn["arguments"] = json.dumps(json.loads(fn["arguments"]), separators=(",", ":"))
    f = replay_one(tok, verbatim, t)
    assert not f.ok and f.causes == ["tool_argument_reserialization"], f.first_divergence


def test_atif_export_round_trip(tok, verbatim, traj):
    from harbor.models.trajectories import Trajectory

    atif = traj.to_atif()
    Trajectory.model_validate(atif)  # harbor's own schema
    agent = [s for s in atif["steps"] if s["source"] == "agent"]
    assert len(agent) == sum(1 for t in traj.turns if t.kind == "sampled")
    assert agent[0]["metrics"]["prompt_token_ids"] == traj.prompt_ids
    back = TitoTrajectory.from_atif(atif)
    assert back.ids == traj.ids
    assert replay_one(tok, verbatim, back).ok


def test_atif_prefix_break_is_reported(tok, verbatim, traj):
    atif = traj.to_atif()
    agent = [s for s in atif["steps"] if s["source"] == "agent"]
    agent[2]["metrics"]["prompt_token_ids"][5] += 1  # the engine saw a different history
    back = TitoTrajectory.from_atif(atif)
    assert back.extra["prefix_breaks"]
    assert not replay_one(tok, verbatim, back).ok


def test_cli_replay_jsonl_atif_and_bad_records(tmp_path, tok, traj):
    p = tmp_path / "trajs.jsonl"
    lines = [traj.model_dump_json(), orjson.dumps(traj.to_atif()).decode(), "{not json", "{}"]
    p.write_text("\n".join(lines) + "\n")
    r = runner.invoke(
        app,
        [
            "tito",
            "verify",
            "-t",
            "qwen3",
            "--chat-template",
            "qwen3-verbatim",
            "--mode",
            "replay",
            "--trajectories",
            str(p),
        ],
    )
    assert r.exit_code == 1, r.output
    out = [orjson.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert [x["ok"] for x in out] == [True, True, False, False]
    assert out[2]["status"] == "error" and ":3" in out[2]["case"]

    good = tmp_path / "good.jsonl"
    good.write_text(_with_reasoning_trailing_newline(tok, traj).model_dump_json() + "\n")
    args = ["tito", "verify", "-t", "qwen3", "--mode", "replay", "--trajectories"]
    r = runner.invoke(app, [*args, str(good), "--chat-template", "qwen3-verbatim"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, [*args, str(good)])  # stock template: whitespace drift
    assert r.exit_code == 1
    r = runner.invoke(app, [*args, str(good), "--allow", "whitespace"])
    assert r.exit_code == 0, r.output
    single = tmp_path / "one.json"
    single.write_text(json.dumps(traj.to_atif(), indent=2))
    r = runner.invoke(app, [*args, str(single), "--chat-template", "qwen3-verbatim"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(
        app, [*args, "-", "--chat-template", "qwen3-verbatim"], input=traj.model_dump_json()
    )
    assert r.exit_code == 0, r.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = runner.invoke(app, [*args, str(empty)])
    assert r.exit_code == 1 and "no trajectories" in r.output
    r = runner.invoke(app, [*args, str(tmp_path / "missing.jsonl")])
    assert r.exit_code == 2


def test_an_unreadable_record_is_marked_not_guessed_from_its_message():
    """The bad-record decision is the finding's own flag (set where the record failed to
    read), not a match on message text: a template failure whose message happens to say
    "not a trajectory record" still gets the template advice."""
    from apexrl.tito.records import TitoFinding
    from apexrl.tito.verify import add_advice, fix_advice

    bad = TitoFinding.unreadable("replay", "t.jsonl:3", ValueError("not JSON"))
    assert bad.unreadable_input and bad.status == "error" and "t.jsonl:3" in bad.message
    assert "unreadable" not in bad.model_dump_json()  # the written record is unchanged
    odd = TitoFinding(
        mode="replay", case="t.jsonl:4", ok=False, status="error",
        message="t.jsonl:4: not a trajectory record, said the template",
    )  # fmt: skip
    assert not odd.unreadable_input
    assert fix_advice([bad], "tokenizer", "") is None  # only unreadable input: no advice
    advice = fix_advice([bad, odd], "tokenizer", "")
    assert advice and "breaks the prefix property" in advice
    add_advice([bad, odd], advice)
    assert advice in odd.message and advice not in bad.message
