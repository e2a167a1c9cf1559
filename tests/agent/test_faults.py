"""Faults: the engine fails (500 / hangs / drops), the MCP gateway dies, the agent runs out of
time; secrets never reach the trajectory. Each ends classified and within its timeout."""

from __future__ import annotations

import time

import pytest

from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv
from tests.scripted_engine import Fault, ScriptedEngine, tool_call_text


@pytest.mark.parametrize(
    ("fault", "error_class", "budget_s"),
    [
        (Fault("status", status=500), "llm_transient", 20),
        (Fault("status", status=429), "llm_rate_limit", 20),
        (Fault("drop"), "llm_transient", 20),
        (Fault("hang", seconds=None), "llm_timeout", 20),
        (Fault("status", status=400, message="Unknown parameter"), "llm_bad_request", 20),
    ],
)
def test_engine_faults_are_classified(tmp_path, world_zip, fault, error_class, budget_s):
    env = HostEnv(tmp_path, world_zip)
    # 1 try + 2 retries, all failing; the hang is cut by the 1 s per-LLM-call timeout
    with ScriptedEngine([tool_call_text("filesystem_list_files", {}), fault, fault, fault]) as eng:
        t0 = time.monotonic()
        agent, _ = run_agent(
            env,
            tmp_path / "agent",
            "Go.",
            endpoint=eng.url,
            budgets={"llm_timeout_s": 1},
            engine_retries=2,
        )
        elapsed = time.monotonic() - t0
        n_requests = len(eng.requests)
    rec = agent.record
    assert rec.status == "error" and rec.error_class == error_class, rec.error
    assert elapsed < budget_s
    # the first step worked; the fault hit the second (retried unless deterministic)
    assert rec.tool_outcomes == {"ok": 1}
    assert n_requests == (2 if error_class == "llm_bad_request" else 4)
    # a failed trial still leaves its trajectory so far
    assert (tmp_path / "agent" / "tito.json").is_file()
    assert (env.map("/logs/agent/answer.txt")).read_text() == ""


def test_transient_engine_error_is_retried_and_recovers(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine([Fault("status", status=503), Fault("drop"), "All done."]) as eng:
        agent, _ = run_agent(env, tmp_path / "agent", "Go.", endpoint=eng.url, engine_retries=2)
    assert agent.record.status == "complete" and agent.record.final_answer == "All done."


def test_context_window_exceeded_from_the_engine(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip)
    msg = "This model's maximum context length is 100 tokens. However, you requested 9000 tokens."
    with ScriptedEngine([Fault("status", status=400, message=msg)]) as eng:
        agent, _ = run_agent(env, tmp_path / "agent", "Go.", endpoint=eng.url)
    assert agent.record.status == "context_length"
    assert agent.record.error_class == "context_window_exceeded"
    assert len(eng.requests) == 1  # not retried


@pytest.mark.parametrize(
    "msg",
    [  # vLLM 0.32's answers (measured): the prompt fills the window; max_tokens > window
        "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
        "max_tokens=40001 cannot be greater than max_model_len=40000. Please request fewer "
        "output tokens. (parameter=max_tokens, value=40001)",
    ],
)
def test_vllm_window_refusals_end_as_context_length(tmp_path, world_zip, msg):
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine([Fault("status", status=400, message=msg)]) as eng:
        agent, _ = run_agent(env, tmp_path / "agent", "Go.", endpoint=eng.url)
    assert agent.record.status == "context_length", agent.record.error
    assert agent.record.error_class == "context_window_exceeded"
    assert len(eng.requests) == 1  # not retried


def test_server_window_wins_over_a_larger_context_window(tmp_path, world_zip):
    """--context-window above the server's: vLLM would trim max_tokens silently and the
    turn would look cut by the per-turn cap; the agent budgets against the server's."""
    env = HostEnv(tmp_path / "a", world_zip)
    with ScriptedEngine(["All done."]) as eng:
        run_agent(env, tmp_path / "a" / "agent", "Go.", endpoint=eng.url)
        n_prompt = len(eng.requests[0]["prompt"])
    env = HostEnv(tmp_path / "b", world_zip)
    with ScriptedEngine(["word " * 50], max_model_len=n_prompt + 20) as eng:
        agent, _ = run_agent(
            env,
            tmp_path / "b" / "agent",
            "Go.",
            endpoint=eng.url,
            budgets={"context_window": 100_000},
        )
    rec = agent.record
    assert rec.context_window == n_prompt + 20 and eng.requests[0]["max_tokens"] == 20
    assert rec.status == "context_length" and rec.error_class == "context_window_full"
    assert rec.tokens_out == 20


def test_agent_timeout_cuts_a_hanging_engine(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine([Fault("hang", seconds=None)]) as eng:
        t0 = time.monotonic()
        agent, _ = run_agent(
            env,
            tmp_path / "agent",
            "Go.",
            endpoint=eng.url,
            budgets={"agent_timeout_s": 1.5, "llm_timeout_s": 60},
        )
        elapsed = time.monotonic() - t0
    assert agent.record.status == "agent_timeout" and agent.record.trial_status == "agent_timeout"
    assert elapsed < 15


def test_mcp_server_dies_mid_trial(tmp_path, world_zip):
    env = HostEnv(tmp_path, world_zip, gateway="process")

    def kill_then_call(body):
        env.kill_gateway()  # the world's MCP gateway process dies between two steps
        return tool_call_text("filesystem_read_text_file", {"file_path": "x"})

    script = [tool_call_text("filesystem_list_files", {}), kill_then_call, "unreachable"]
    with ScriptedEngine(script) as eng:
        t0 = time.monotonic()
        agent, _ = run_agent(
            env, tmp_path / "agent", "Go.", endpoint=eng.url, reconnect_timeout_s=2
        )
        elapsed = time.monotonic() - t0
    rec = agent.record
    assert rec.status == "error" and rec.error_class == "fatal_mcp_error"
    assert [c.status for c in rec.tool_call_records] == ["ok", "fatal_mcp_error"]
    assert rec.tool_call_records[-1].reconnected and rec.reconnects == 1
    assert elapsed < 30
    assert len(eng.requests) == 2


def test_mcp_gateway_restart_reconnects_once(tmp_path, world_zip):
    """The gateway dies and comes back on the same URL a moment later: the call fails as
    fatal, the agent reconnects once (waiting for readiness) and the retried call works."""
    import asyncio
    import threading

    from apexrl.worlds.gateway import build_gateway, serve_in_thread

    env = HostEnv(tmp_path, world_zip, gateway="process")
    state = {}

    def restart_later(port):
        cm = serve_in_thread(build_gateway(env.world), port=port)
        cm.__enter__()
        state["cm"] = cm

    def kill_then_call(body):
        from urllib.parse import urlparse

        env.kill_gateway()
        t = threading.Timer(0.5, restart_later, args=(urlparse(env.gateway_url).port,))
        t.start()
        state["timer"] = t
        return tool_call_text("filesystem_list_files", {})

    script = [tool_call_text("filesystem_list_files", {}), kill_then_call, "Done."]
    try:
        with ScriptedEngine(script) as eng:
            agent, _ = run_agent(env, tmp_path / "agent", "Go.", endpoint=eng.url)
    finally:
        if "timer" in state:
            state["timer"].join(30)
        if "cm" in state:
            asyncio.run(asyncio.to_thread(state["cm"].__exit__, None, None, None))
    rec = agent.record
    assert rec.status == "complete", rec.error
    assert [c.status for c in rec.tool_call_records] == ["ok", "ok"]
    assert rec.tool_call_records[-1].reconnected and rec.reconnects == 1


def test_gateway_never_ready_is_classified(tmp_path, world_zip):
    class DeadGateway(HostEnv):
        async def start(self, force_build=False):
            self.gateway_url = "http://127.0.0.1:9/mcp/"  # nothing listens there

    env = DeadGateway(tmp_path, world_zip)
    with ScriptedEngine([]) as eng:
        t0 = time.monotonic()
        agent, _ = run_agent(
            env, tmp_path / "agent", "Go.", endpoint=eng.url, gateway_ready_timeout_s=1
        )
        assert time.monotonic() - t0 < 10
    assert agent.record.error_class == "gateway_not_ready"


def test_secrets_never_reach_trajectories_or_logs(tmp_path, world_zip, monkeypatch):
    secret = "fmp-SECRET-0123456789abcdef"
    monkeypatch.setenv("FMP_API_KEY", secret)
    env = HostEnv(tmp_path, world_zip)

    def plant(body):  # the world holds a file with the secret; the agent reads it
        (env.world.fs_root / "keys.txt").write_text(f"api key: {secret}\n")
        return tool_call_text("filesystem_read_text_file", {"file_path": "/keys.txt"})

    with ScriptedEngine([plant, f"The key was {secret}."]) as eng:
        agent, ctx = run_agent(
            env, tmp_path / "agent", f"Use the key {secret} if needed.", endpoint=eng.url
        )
        prompts = [r["prompt"] for r in eng.requests]
    rec = agent.record
    assert rec.status == "complete" and rec.tool_outcomes == {"ok": 1}
    from apexrl.tito.tokenizer import load_tokenizer

    tok = load_tokenizer("qwen3")
    # the model never saw it: redacted before tokenization
    assert all(secret not in tok.decode(p) for p in prompts)
    assert "[REDACTED]" in tok.decode(prompts[-1])
    for p in (tmp_path / "agent").rglob("*"):
        if p.is_file():
            assert secret not in p.read_text(errors="replace"), p
    assert secret not in env.map("/logs/agent/answer.txt").read_text()
    assert secret not in repr(ctx.model_dump())


def test_cancelled_by_harbor_keeps_the_partial_run(tmp_path, world_zip):
    """Harbor cancels run() at the task's agent timeout: the record says so, files exist."""
    import asyncio

    from harbor.models.agent.context import AgentContext

    from apexrl.agent import ApexAgent

    env = HostEnv(tmp_path, world_zip)
    logs = tmp_path / "agent"
    with ScriptedEngine(
        [tool_call_text("filesystem_list_files", {}), Fault("hang", seconds=None)]
    ) as eng:
        agent = ApexAgent(logs_dir=logs, endpoint=eng.url, tokenizer="qwen3")
        ctx = AgentContext()

        async def go():
            await env.start()
            try:
                await asyncio.wait_for(agent.run("Go.", env, ctx), timeout=3)
            finally:
                await env.stop()

        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            asyncio.run(go())
        assert time.monotonic() - t0 < 15
    rec = agent.record
    assert (rec.status, rec.error_class) == ("agent_timeout", "cancelled")
    assert rec.tool_outcomes == {"ok": 1} and rec.steps == 1
    assert (logs / "tito.json").is_file() and (logs / "apexrl_agent.json").is_file()
    assert ctx.metadata["apexrl"]["trial_status"] == "agent_timeout"
