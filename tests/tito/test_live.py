"""Live mode against a real HTTP engine: a tiny random-weight Qwen3 on CPU (127.0.0.1)."""

from __future__ import annotations

import httpx
import orjson
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.tito.client import EngineClient, EngineError, RetryPolicy

runner = CliRunner()


def test_engine_contract(tiny_engine, tok):
    with EngineClient(tiny_engine.url, model="tiny-qwen3", timeout_s=60) as c:
        assert c.models() == ["tiny-qwen3"]
        prompt = tok.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
        a = c.complete(prompt, max_tokens=6, temperature=1.0, seed=5, logprobs=0)
        b = c.complete(prompt, max_tokens=6, temperature=1.0, seed=5, logprobs=0)
        assert a.token_ids == b.token_ids and len(a.token_ids) == len(a.logprobs) <= 6
        assert a.prompt_token_ids == prompt
        assert a.finish_reason in ("stop", "length")
        # stop token ids are honoured: stop on whatever the model samples first
        s = c.complete(prompt, max_tokens=6, seed=5, stop_token_ids=[a.token_ids[0]], logprobs=0)
        assert s.token_ids == a.token_ids[:1] and s.finish_reason == "stop"
        # prompt logprobs of prompt + sampled ids reproduce the sampled logprobs
        full = c.complete(prompt + a.token_ids, max_tokens=1, prompt_logprobs=0, temperature=0)
        tail = full.prompt_logprobs[len(prompt) :]
        assert max(abs(x - y) for x, y in zip(tail, a.logprobs, strict=True)) < 1e-3
        try:
            c.complete(prompt, max_tokens=10**6)
        except EngineError as e:
            assert e.kind == "context_window_exceeded"
        else:
            raise AssertionError("expected a context error")
    no_retry = RetryPolicy(max_retries=0)
    with EngineClient(tiny_engine.url, model="other", retry=no_retry) as c:
        try:
            c.complete([1, 2], max_tokens=1)
        except EngineError as e:
            assert e.kind == "bad_request" and e.status == 404
    r = httpx.post(tiny_engine.url + "/v1/completions", json={"prompt": [], "max_tokens": 1})
    assert r.status_code == 400
    h = httpx.get(tiny_engine.url + "/health")
    assert h.status_code == 200 and h.content == b""  # as vLLM answers


def test_cli_live_consistent(tiny_engine):
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
            "live",
            "--endpoint",
            tiny_engine.url,
            "--model",
            "tiny-qwen3",
            "--conversations",
            "2",
            "--turns",
            "2",
            "--max-tokens",
            "8",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = [orjson.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(out) == 2 and all(x["ok"] and x["mode"] == "live" for x in out)
    assert all(x["max_abs_dlogprob"] < 1e-3 for x in out)
    assert all(x["n_tokens"] > 0 and x["n_turns"] == 2 for x in out)


def test_cli_live_unreachable_engine_exits_4():
    r = runner.invoke(
        app,
        [
            "tito",
            "verify",
            "-t",
            "qwen3",
            "--mode",
            "live",
            "--endpoint",
            "http://127.0.0.1:9",
            "--timeout",
            "2",
        ],
    )
    assert r.exit_code == 4, r.output
