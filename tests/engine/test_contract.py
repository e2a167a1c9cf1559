"""The engine contract TITO relies on, held against both engines with the same assertions:
apexrl's local CPU engine and a real vLLM (its CPU build from `make vllm`, started by
apexrl's own launcher). Each engine serves the same tiny Qwen3 checkpoint with a
4,096-token window; one server of each kind per module, stopped at its end.

What vLLM 0.32 answers (measured) and what the client makes of it:
  prompt + max_tokens > window   200, trimmed, finish "length"  -> Completion.window_full
  prompt fills the window        400 "max_tokens must be at least 1" -> context_window_exceeded
  max_tokens > window            400 "cannot be greater than max_model_len" -> context
  prompt longer than the window  400 "maximum context length"    -> context
  seeded uncached prompt > 2,048 tokens: kills vLLM CPU's engine unless prefills are
  never split (the launcher's CPU flags): the seed crash case below
"""

from __future__ import annotations

import random

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.tito.client import ContextWindowExceeded, EngineClient, EngineError, RetryPolicy
from tests.engine.vllm_tier import WINDOW, local_engine, vllm_engine

runner = CliRunner()
NO_RETRY = RetryPolicy(max_retries=0)

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module", params=["local", pytest.param("vllm", marks=pytest.mark.vllm)])
def engine(request, tmp_path_factory):
    """(kind, RunningEngine) serving the tiny checkpoint as `tiny` with a WINDOW window."""
    start = local_engine if request.param == "local" else vllm_engine
    running = start(tmp_path_factory.mktemp(f"{request.param}-engine"))
    try:
        yield request.param, running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def tok():
    from apexrl.tito.tokenizer import load_tokenizer

    return load_tokenizer("qwen3")


def _ids(n: int, seed: int) -> list[int]:
    """n token ids never sent before (an uncached prompt for vLLM's prefix cache)."""
    rng = random.Random(seed)
    return [rng.randrange(300, 150000) for _ in range(n)]


def _client(url: str, **kw) -> EngineClient:
    return EngineClient(url, model="tiny", timeout_s=300, retry=NO_RETRY, **kw)


def test_models_health_and_sampling(engine, tok):
    kind, running = engine
    assert running.model == "tiny" and running.max_model_len == WINDOW
    data = httpx.get(running.url + "/v1/models", timeout=30).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in data] == [("tiny", WINDOW)]
    assert httpx.get(running.url + "/health", timeout=30).status_code == 200
    prompt = tok.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    with _client(running.url) as c:
        a = c.complete(prompt, max_tokens=6, temperature=1.0, seed=5, logprobs=0)
        b = c.complete(prompt, max_tokens=6, temperature=1.0, seed=5, logprobs=0)
        assert a.token_ids == b.token_ids and len(a.token_ids) == len(a.logprobs) <= 6
        assert a.prompt_token_ids == prompt and a.finish_reason in ("stop", "length")
        # stop_token_ids: stop on whatever was sampled first; stop_reason is that id
        s = c.complete(prompt, max_tokens=6, seed=5, stop_token_ids=[a.token_ids[0]])
        assert s.token_ids == a.token_ids[:1] and s.finish_reason == "stop"
        assert s.raw["choices"][0]["stop_reason"] == a.token_ids[0]
        # prompt logprobs of prompt + sampled ids reproduce the sampled logprobs
        full = c.complete(prompt + a.token_ids, max_tokens=1, prompt_logprobs=0, temperature=0)
        tail = full.prompt_logprobs[len(prompt) :]
        assert max(abs(x - y) for x, y in zip(tail, a.logprobs, strict=True)) < 1e-3
    # no max_tokens: the endpoint's default of 16 (why the client always sends one)
    r = httpx.post(running.url + "/v1/completions", json={"prompt": prompt}, timeout=60)
    assert r.status_code == 200 and len(r.json()["choices"][0]["text"]) > 0


def test_window_edges_are_classified(engine):
    """The same requests, the same classification, whichever engine answers."""
    kind, running = engine
    with _client(running.url) as c:  # no client-side window: the engine decides
        # max_tokens past the window's end: trimmed silently, not refused
        cut = c.complete(_ids(WINDOW - 3, 1), max_tokens=10, temperature=1.0)
        assert len(cut.token_ids) == 3 and cut.finish_reason == "length"
        assert cut.window_full and cut.max_tokens == 10
        plain = c.complete(_ids(20, 2), max_tokens=3)
        assert plain.finish_reason == "length" and not plain.window_full
        expected = {
            "fills": (_ids(WINDOW, 3), 5, "max_tokens must be at least 1"),
            "max_tokens>window": (_ids(10, 4), WINDOW + 1, "cannot be greater than max_model_len"),
            "prompt>window": (_ids(WINDOW + 10, 5), 5, "maximum context length"),
        }
        for case, (prompt, max_tokens, text) in expected.items():
            with pytest.raises(EngineError) as e:
                c.complete(prompt, max_tokens=max_tokens)
            assert e.value.kind == "context_window_exceeded", (kind, case, str(e.value))
            assert e.value.status == 400 and text in str(e.value), (kind, case)
    # the window the server reports wins over a larger one the caller believes in
    with _client(running.url, max_context=4 * WINDOW) as c:
        assert c.fit_to_server() == WINDOW and c.max_context == WINDOW
        assert c.build_request(_ids(WINDOW - 3, 6), max_tokens=10)["max_tokens"] == 3
        with pytest.raises(ContextWindowExceeded):  # refused before any request is sent
            c.build_request(_ids(WINDOW, 7), max_tokens=5)
        assert c.fit_to_server() == WINDOW and c.max_context == WINDOW  # idempotent


def test_refusals(engine):
    kind, running = engine
    with _client(running.url) as c:
        with pytest.raises(EngineError) as e:
            c.complete(_ids(10, 8), max_tokens=2, extra={"model": "other"})
        assert e.value.kind == "bad_request" and e.value.status == 404
        with pytest.raises(EngineError) as e:
            c.complete([10**7], max_tokens=2)  # out of the vocabulary
        assert e.value.kind == "bad_request" and e.value.status == 400
    r = httpx.post(running.url + "/v1/completions", json={"prompt": [], "max_tokens": 1})
    assert r.status_code == 400
    r = httpx.post(running.url + "/v1/completions", json={"prompt": [1, 2], "max_tokens": 0})
    assert r.status_code == 400 and "max_tokens must be at least 1" in r.text


def test_seeded_uncached_prompt_longer_than_the_cpu_batch(engine):
    """The seed crash case: vLLM CPU's engine died on this request when started with its
    default flags (batch 2,048, chunked prefill); apexrl's launcher must prevent it."""
    kind, running = engine
    prompts = [_ids(3000, 100 + i) for i in range(2)]
    with _client(running.url) as c:
        for p in prompts:
            a = c.complete(p, max_tokens=4, seed=11, temperature=1.0)
            assert len(a.token_ids) == 4 and len(a.logprobs) == 4
        again = c.complete(prompts[-1], max_tokens=4, seed=11, temperature=1.0)
        assert again.token_ids == a.token_ids  # the seed still means something
    assert httpx.get(running.url + "/health", timeout=30).status_code == 200


def test_tito_verify_live(engine):
    kind, running = engine
    r = runner.invoke(
        app,
        ["tito", "verify", "-t", "qwen3", "--chat-template", "qwen3-verbatim"]
        + ["--mode", "live", "--endpoint", running.url, "--model", "tiny"]
        + ["--conversations", "2", "--turns", "3", "--max-tokens", "8", "--json"],
    )
    assert r.exit_code == 0, r.output
    out = [orjson.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(out) == 2 and all(x["ok"] and x["mode"] == "live" for x in out), out
    assert all(x["max_abs_dlogprob"] < 1e-3 for x in out)
    assert all(x["n_tokens"] > 0 and x["n_turns"] == 3 for x in out)
