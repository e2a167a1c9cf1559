"""Nudge modes (recipe, once, off) checked in the rendered token stream, and the agent-side
rows of the outcome policy: repairs counted per trajectory with the next reply graded as
final, max_steps endings keep an answer to grade."""

from __future__ import annotations

import pytest

from apexrl.tito.tokenizer import load_tokenizer
from apexrl.tito.trajectory import TitoTrajectory
from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv
from tests.scripted_engine import ScriptedEngine, tool_call_text

BAD = '<tool_call>\n{"name": "filesystem_list_files", "arguments": {"path": \n</tool_call>'
NUDGE = "Wrap up now"


# the window leaves ~3k tokens after the example world's ~17k-token prompt (archipelago's
# 73 tools); the nudge comes when fewer than 4,500 are left
WINDOW = 20_256


def _stream(logs) -> tuple[str, TitoTrajectory]:
    """The exact token stream the engine saw, decoded."""
    traj = TitoTrajectory.model_validate_json((logs / "tito.json").read_text())
    ids = list(traj.prompt_ids) + [t for turn in traj.turns for t in turn.token_ids]
    return load_tokenizer("qwen3").decode(ids), traj


@pytest.mark.parametrize("mode", ["recipe", "once", "off"])
def test_nudge_modes_in_the_token_stream(tmp_path, world_zip, mode):
    script = [tool_call_text("filesystem_get_directory_tree", {}) for _ in range(5)] + ["Final."]
    env = HostEnv(tmp_path, world_zip)
    budgets = {"tool_result_max_chars": 90, "context_window": WINDOW, "nudge_ratio": 4500 / WINDOW}
    with ScriptedEngine(script, max_model_len=100_000) as eng:
        agent, _ = run_agent(
            env,
            tmp_path / "agent",
            "Explore.",
            endpoint=eng.url,
            budgets={**budgets, "nudge": mode},
        )
    rec = agent.record
    assert rec.status == "complete", rec
    text, traj = _stream(tmp_path / "agent")
    nudged = [s.step for s in rec.step_records if s.nudge]
    if mode == "off":  # the recipe's eval
        assert NUDGE not in text and not nudged and rec.nudge_step is None
        return
    assert nudged and rec.nudge_step == nudged[0]
    # the model saw exactly the nudges recorded
    assert text.count(NUDGE) == len(nudged)
    if mode == "once":
        assert len(nudged) == 1
        assert "<|im_start|>user\nNote: only about" in text  # a user turn of its own
        return
    # recipe: from the first low step on, every step's last tool result carries the note
    assert nudged == list(range(nudged[0], len(rec.step_records) - 1)) and len(nudged) >= 2
    for chunk in text.split("<tool_response>")[1:]:
        body = chunk.split("</tool_response>")[0]
        assert body.count(NUDGE) <= 1
    assert text.count("</tool_response>") >= len(nudged)
    assert "<|im_start|>user\nNote: only about" not in text  # never a user message
    tool_msgs = [m for m in traj.messages if m["role"] == "tool"]
    assert sum(NUDGE in m["content"] for m in tool_msgs) == len(nudged)
    assert all(
        m["content"].rstrip().endswith("final answer in your next message.")
        for m in tool_msgs
        if NUDGE in m["content"]
    )  # appended at the end


def test_recipe_repairs_per_trajectory_then_the_next_reply_is_final(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip)
    # repairs are counted over the trajectory: a good call in between does not reset them
    script = [BAD, tool_call_text("filesystem_list_files", {}), BAD, "Revenue was $1.2M " + BAD]
    with ScriptedEngine(script) as eng:
        agent, _ = run_agent(env, tmp_path / "agent", "Go.", endpoint=eng.url)
    rec = agent.record
    assert rec.status == "complete" and rec.error_class is None and rec.repairs_exhausted
    assert rec.repairs == 2 and rec.steps == 4
    assert rec.final_answer.startswith("Revenue was $1.2M")
    assert (tmp_path / "agent" / "answer.txt").read_text().startswith("Revenue was $1.2M")


def test_strict_repairs_in_a_row_then_error(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine([BAD, tool_call_text("filesystem_list_files", {}), BAD, BAD, BAD]) as eng:
        agent, _ = run_agent(
            env, tmp_path / "agent", "Go.", endpoint=eng.url, budgets={"outcome_policy": "strict"}
        )
    rec = agent.record
    assert rec.status == "error" and rec.error_class == "unparsed_tool_call"
    assert rec.repairs == 3 and not rec.repairs_exhausted


@pytest.mark.parametrize(("policy", "answer"), [("recipe", "Looking at files."), ("strict", None)])
def test_max_steps_keeps_an_answer_to_grade(tmp_path, world_zip, policy, answer):
    env = HostEnv(tmp_path, world_zip)
    call = "Looking at files.\n" + tool_call_text("filesystem_list_files", {})
    with ScriptedEngine([call] * 3) as eng:
        agent, _ = run_agent(
            env,
            tmp_path / "agent",
            "Go.",
            endpoint=eng.url,
            budgets={"max_steps": 2, "outcome_policy": policy},
        )
    rec = agent.record
    assert rec.status == "max_steps" and rec.trial_status == "length"
    assert (rec.final_answer or None) == answer
