"""ApexAgent against a scripted engine (real Qwen3 tokenizer) and a real world gateway."""

from __future__ import annotations

import json
import time

from apexrl.agent.records import AgentRunRecord
from apexrl.tito.tokenizer import load_tokenizer
from apexrl.tito.trajectory import TitoTrajectory
from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv
from tests.scripted_engine import ScriptedEngine, tool_call_text


def _files(logs):
    return {p.name: p.read_text() for p in logs.iterdir() if p.is_file()}


def test_tool_calls_ok_error_timeout_and_final_answer(tmp_path, world_zip):
    script = [
        tool_call_text("filesystem_list_files", {"path": "/"}, think="Look at the files first."),
        tool_call_text("filesystem_read_text_file", {"file_path": "no-such-file.txt"}),
        tool_call_text("code_execution_code_exec", {"code": "sleep 5"}),
        tool_call_text("no_such_tool", {}),
        "<think>\nDone.\n</think>\n\nThe answer is 42.",
    ]
    env = HostEnv(tmp_path, world_zip)
    logs = tmp_path / "agent"
    with ScriptedEngine(script) as eng:
        t0 = time.monotonic()
        agent, ctx = run_agent(
            env, logs, "What is the answer?", endpoint=eng.url, budgets={"tool_timeout_s": 1}
        )
        elapsed = time.monotonic() - t0
        requests = list(eng.requests)
    rec = agent.record
    assert rec.status == "complete" and rec.error_class is None
    assert rec.final_answer == "The answer is 42."
    assert rec.tool_outcomes == {"ok": 1, "mcp_error": 2, "timeout": 1}
    assert [c.status for c in rec.tool_call_records] == ["ok", "mcp_error", "timeout", "mcp_error"]
    assert rec.tool_call_records[2].duration_s < 3
    assert elapsed < 30
    assert rec.steps == 5 and len(rec.step_records) == 5 and rec.gateway_ready_s is not None

    # the verifier's answer file, in the environment
    assert (env.map("/logs/agent/answer.txt")).read_text() == "The answer is 42."

    # TITO: every request's prompt extends the previous prompt + its completion
    tok = load_tokenizer("qwen3")
    stream = None
    for body in requests:
        assert isinstance(body["prompt"], list) and body["return_token_ids"] is True
        assert body["max_tokens"] >= 1 and body["logprobs"] == 0
        assert body["top_k"] == -1 and body["min_p"] == 0.0  # the recipe's, on every request
        if stream is not None:
            assert body["prompt"][: len(stream)] == stream
        stream = body["prompt"]
        # what the scripted engine sampled for this request
        step = len([r for r in requests if len(r["prompt"]) < len(stream)])
        script_text = script[step]
        stream = stream + tok.encode(script_text) + [tok.token_to_id("<|im_end|>")]

    files = _files(logs)
    assert set(files) >= {"trajectory.json", "tito.json", "apexrl_agent.json", "answer.txt"}
    AgentRunRecord.model_validate_json(files["apexrl_agent.json"])
    traj = TitoTrajectory.model_validate_json(files["tito.json"])
    st = traj.to_state()
    assert len(st.ids) == len(st.mask) == len(st.logprobs) == rec.stream_tokens
    assert sum(st.mask) == rec.tokens_out
    assert traj.ids[: len(requests[-1]["prompt"])] == requests[-1]["prompt"]

    from harbor.models.trajectories import Trajectory

    atif = json.loads(files["trajectory.json"])
    Trajectory.model_validate(atif)
    agent_steps = [s for s in atif["steps"] if s["source"] == "agent"]
    assert len(agent_steps) == 5
    assert agent_steps[2]["extra"]["apexrl"]["tool_calls"][0]["status"] == "timeout"
    assert agent_steps[0]["metrics"]["prompt_token_ids"] == requests[0]["prompt"]
    assert all(
        len(s["metrics"]["logprobs"]) == s["metrics"]["completion_tokens"] for s in agent_steps
    )

    # Harbor's AgentContext
    assert ctx.n_output_tokens == rec.tokens_out and ctx.n_input_tokens == rec.tokens_in
    rd = ctx.rollout_details[0]
    assert rd["prompt_token_ids"] == [r["prompt"] for r in requests]
    assert [len(x) for x in rd["completion_token_ids"]] == [len(x) for x in rd["logprobs"]]
    assert ctx.metadata["apexrl"]["status"] == "complete"
    assert ctx.metadata["apexrl"]["trial_status"] == "complete"


WINDOW = 20_256  # the example world's prompt (17,265 tokens) + 2,991 left, as before


def test_truncation_and_single_nudge(tmp_path, world_zip):
    # the window leaves ~3k tokens after the ~17k-token prompt (archipelago's 73 tools)
    script = [tool_call_text("filesystem_get_directory_tree", {}) for _ in range(4)] + ["Final."]
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine(script, max_model_len=100_000) as eng:
        agent, _ = run_agent(
            env,
            tmp_path / "agent",
            "Explore.",
            endpoint=eng.url,
            budgets={
                "tool_result_max_chars": 90,
                "context_window": WINDOW,
                "nudge_ratio": 2700 / WINDOW,
                "nudge": "once",
            },
        )
    rec = agent.record
    assert rec.status == "complete", rec
    assert all(c.truncated for c in rec.tool_call_records)
    traj = TitoTrajectory.model_validate_json((tmp_path / "agent" / "tito.json").read_text())
    tool_msgs = [m for m in traj.messages if m["role"] == "tool"]
    assert all("characters omitted" in m["content"] for m in tool_msgs)
    assert all(len(m["content"]) < 90 + 100 for m in tool_msgs)
    nudges = [m for m in traj.messages if m["role"] == "user" and "Wrap up now" in m["content"]]
    assert len(nudges) == 1  # injected once, never repeated
    assert rec.nudge_step is not None and rec.nudge_step < 4
    assert sum(s.nudge for s in rec.step_records) == 1
    # the nudge came with the first observation that left less than 2,700 tokens
    k = rec.nudge_step
    after = sum(s.completion_tokens + s.observation_tokens for s in rec.step_records[: k + 1])
    left = WINDOW - rec.step_records[0].prompt_tokens - after
    assert left < 2700


def test_repairs_then_give_up(tmp_path, world_zip):
    bad = '<tool_call>\n{"name": "filesystem_list_files", "arguments": {"path": \n</tool_call>'
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine(
        [bad, bad, tool_call_text("filesystem_list_files", {}), bad, bad, bad]
    ) as eng:
        agent, _ = run_agent(
            env, tmp_path / "agent", "Go.", endpoint=eng.url, budgets={"outcome_policy": "strict"}
        )
    rec = agent.record
    # two repairs, a good call resets the count, then two more repairs and a third failure
    assert rec.status == "error" and rec.error_class == "unparsed_tool_call"
    assert rec.repairs == 4 and rec.tool_outcomes == {"ok": 1}
    traj = TitoTrajectory.model_validate_json((tmp_path / "agent" / "tito.json").read_text())
    assert sum("could not be parsed" in str(m.get("content")) for m in traj.messages) == 4


def test_budgets_max_steps_and_length(tmp_path, world_zip):
    env = HostEnv(tmp_path / "a", world_zip)
    with ScriptedEngine([tool_call_text("filesystem_list_files", {})] * 3) as eng:
        agent, _ = run_agent(
            env, tmp_path / "a" / "agent", "Go.", endpoint=eng.url, budgets={"max_steps": 2}
        )
    assert agent.record.status == "max_steps" and agent.record.trial_status == "length"

    env = HostEnv(tmp_path / "b", world_zip)
    with ScriptedEngine(["word " * 50]) as eng:
        agent, _ = run_agent(
            env, tmp_path / "b" / "agent", "Go.", endpoint=eng.url, sampling={"max_tokens": 8}
        )
    assert agent.record.status == "length" and agent.record.tokens_out == 8
    assert eng.requests[0]["max_tokens"] == 8


def test_context_window_from_the_engine(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine(["x"], max_model_len=500) as eng:
        agent, _ = run_agent(env, tmp_path / "agent", "Go.", endpoint=eng.url)
    # the prompt (system + tools) is longer than the model's window: no request is sent
    assert agent.record.context_window == 500
    assert agent.record.status == "context_length"
    assert eng.requests == []


def test_no_endpoint_and_no_gateway_are_classified(tmp_path, world_zip):
    env = HostEnv(tmp_path / "a", world_zip)
    agent, _ = run_agent(env, tmp_path / "a" / "agent", "Go.", endpoint=None)
    assert agent.record.error_class == "no_endpoint"
    assert (tmp_path / "a" / "agent" / "apexrl_agent.json").is_file()

    class NoGateway(HostEnv):
        async def start(self, force_build=False):
            self.gateway_url = None

    env = NoGateway(tmp_path / "b", world_zip)
    with ScriptedEngine([]) as eng:
        agent, _ = run_agent(env, tmp_path / "b" / "agent", "Go.", endpoint=eng.url)
    assert agent.record.status == "error" and agent.record.error_class == "no_gateway"
