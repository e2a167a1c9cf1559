"""Engine client: request shape, response parsing, error classes and retries."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apexrl.errors import AuthError
from apexrl.tito.client import (
    ContextWindowExceeded,
    EngineClient,
    EngineError,
    RetryPolicy,
    classify_http,
)

OK = {
    "choices": [
        {
            "text": "hi",
            "token_ids": [5, 6],
            "prompt_token_ids": [1, 2],
            "logprobs": {"tokens": ["h", "i"], "token_logprobs": [-0.5, -0.25]},
            "finish_reason": "stop",
            "prompt_logprobs": [None, {"2": {"logprob": -1.5, "rank": 1}}],
        }
    ]
}


class Scripted:
    """A 127.0.0.1 server answering from a script of (status, body, delay)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        owner = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                owner.requests.append(json.loads(body))
                status, payload, delay = owner.script.pop(0) if owner.script else (200, OK, 0)
                time.sleep(delay)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


FAST = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.05, rate_limit_delay_s=0.02)


@pytest.fixture
def scripted():
    servers = []

    def make(script):
        s = Scripted(script)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def test_request_shape_and_parse(scripted):
    srv = scripted([])
    with EngineClient(srv.url, model="m", retry=FAST, max_context=100) as c:
        r = c.complete([1, 2], max_tokens=500, seed=3, stop_token_ids=[9], prompt_logprobs=0)
    body = srv.requests[0]
    assert body["prompt"] == [1, 2] and body["return_token_ids"] is True
    assert body["max_tokens"] == 98  # capped by what is left of the context
    assert body["model"] == "m" and body["seed"] == 3 and body["stop_token_ids"] == [9]
    assert r.token_ids == [5, 6] and r.logprobs == [-0.5, -0.25] and r.stopped
    assert r.prompt_logprobs == [None, -1.5]


def test_context_exceeded_locally_and_remotely(scripted):
    srv = scripted([(400, {"error": {"message": "maximum context length is 10"}}, 0)])
    with (
        EngineClient(srv.url, retry=FAST, max_context=2) as c,
        pytest.raises(ContextWindowExceeded),
    ):
        c.complete([1, 2], max_tokens=4)
    with EngineClient(srv.url, retry=FAST) as c, pytest.raises(EngineError) as e:
        c.complete([1, 2], max_tokens=4)
    assert e.value.kind == "context_window_exceeded" and not e.value.retryable
    assert len(srv.requests) == 1  # not retried


def test_bad_request_not_retried_and_auth(scripted):
    srv = scripted([(422, {"error": "bad"}, 0), (401, {"error": "no"}, 0)])
    with EngineClient(srv.url, retry=FAST) as c:
        with pytest.raises(EngineError) as e:
            c.complete([1], max_tokens=1)
        assert e.value.kind == "bad_request"
        with pytest.raises(AuthError):
            c.complete([1], max_tokens=1)
    assert len(srv.requests) == 2


def test_transient_and_rate_limit_retry_then_succeed(scripted):
    srv = scripted([(503, {}, 0), (429, {}, 0)])
    with EngineClient(srv.url, retry=FAST) as c:
        assert c.complete([1], max_tokens=1).token_ids == [5, 6]
    assert len(srv.requests) == 3


def test_retries_exhausted_and_timeout(scripted):
    srv = scripted([(500, {}, 0)] * 3)
    with EngineClient(srv.url, retry=FAST) as c, pytest.raises(EngineError) as e:
        c.complete([1], max_tokens=1)
    assert e.value.kind == "transient" and e.value.code == 4
    srv2 = scripted([(200, OK, 1.0)] * 3)
    with EngineClient(srv2.url, retry=FAST, timeout_s=0.2) as c, pytest.raises(EngineError) as e:
        c.complete([1], max_tokens=1)
    assert e.value.kind == "timeout"


def test_unreachable_is_transient():
    c = EngineClient("http://127.0.0.1:9", retry=FAST, connect_timeout_s=1)
    with c, pytest.raises(EngineError) as e:
        c.complete([1], max_tokens=1)
    assert e.value.kind == "transient"


def test_async_client(scripted):
    import asyncio

    srv = scripted([(502, {}, 0)])

    async def go():
        c = EngineClient(srv.url, retry=FAST)
        try:
            return await c.acomplete([1], max_tokens=2)
        finally:
            await c.aclose()

    assert asyncio.run(go()).token_ids == [5, 6]


def test_classify_http():
    assert classify_http(429, "") == "rate_limit"
    assert classify_http(504, "") == "timeout"
    assert classify_http(500, "") == "transient"
    assert (
        classify_http(400, "This model's maximum context length is 4096")
        == "context_window_exceeded"
    )
    assert classify_http(404, "The model `x` does not exist.") == "bad_request"


VLLM_WINDOW_ANSWERS = [  # vLLM 0.32, measured against the CPU build
    "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
    "max_tokens=8193 cannot be greater than max_model_len=8192. Please request fewer output "
    "tokens. (parameter=max_tokens, value=8193)",
    "This model's maximum context length is 8192 tokens. However, your prompt contains 8202 "
    "input tokens, which exceeds this limit even without any output tokens. Please reduce "
    "the length of the input prompt. (parameter=input_tokens, value=8202)",
]


@pytest.mark.parametrize("message", VLLM_WINDOW_ANSWERS)
def test_vllm_window_answers_are_context_errors(message):
    body = json.dumps({"error": {"message": message, "type": "BadRequestError", "code": 400}})
    assert classify_http(400, body) == "context_window_exceeded"


def test_other_400s_stay_bad_requests():
    for msg in ("Token id 10000000 is out of vocabulary", "You must pass at least one prompt"):
        assert classify_http(400, msg) == "bad_request"


def test_window_full_is_a_trim_not_the_per_turn_cap():
    from apexrl.tito.client import Completion

    def c(n, finish, asked):
        return Completion(list(range(n)), [0.0] * n, "", finish, max_tokens=asked)

    assert c(3, "length", 10).window_full  # vLLM trimmed max_tokens to the window
    assert not c(10, "length", 10).window_full  # the per-turn cap
    assert not c(3, "stop", 10).window_full
    assert not Completion([1], [0.0], "", "length").window_full  # unknown request


def test_seed_limit_drops_seeds_of_long_prompts(monkeypatch):
    from apexrl.errors import UsageError
    from apexrl.tito.client import SEED_MAX_PROMPT_ENV, seed_limit

    assert seed_limit({}) is None and seed_limit({SEED_MAX_PROMPT_ENV: "2048"}) == 2048
    with pytest.raises(UsageError, match="not a token count"):
        seed_limit({SEED_MAX_PROMPT_ENV: "lots"})
    monkeypatch.setenv(SEED_MAX_PROMPT_ENV, "4")
    c = EngineClient("http://127.0.0.1:9")
    assert c.build_request([1, 2, 3, 4], max_tokens=2, seed=7)["seed"] == 7
    assert "seed" not in c.build_request([1, 2, 3, 4, 5], max_tokens=2, seed=7)
    assert c.seeds_dropped == 1
    monkeypatch.delenv(SEED_MAX_PROMPT_ENV)
    assert EngineClient("http://x").build_request(list(range(5000)), max_tokens=1, seed=1)["seed"]


def test_fit_to_server_takes_the_servers_window():
    from tests.scripted_engine import ScriptedEngine

    with ScriptedEngine(["hello there"], model="m", max_model_len=64) as eng:
        with EngineClient(eng.url, model="m", max_context=100_000) as c:
            assert c.fit_to_server() == 64 and c.max_context == 64
            out = c.complete(list(range(60)), max_tokens=50)
            assert eng.requests[-1]["max_tokens"] == 4 and len(out.token_ids) <= 4
            with pytest.raises(ContextWindowExceeded):
                c.complete(list(range(64)), max_tokens=1)
        with EngineClient(eng.url, model="m", max_context=32) as c:
            assert c.fit_to_server() == 64 and c.max_context == 32  # a smaller one is kept
    with pytest.raises(EngineError) as e, EngineClient("http://127.0.0.1:9") as c:
        c.fit_to_server(timeout_s=2)
    assert e.value.kind == "transient"


def test_the_prompt_echo_is_dropped_unparsed_and_nothing_else_changes():
    import orjson

    from apexrl.tito.client import decode_body, drop_prompt_echo, parse_completion_response

    prompt = list(range(100, 5100))
    choice = {
        "index": 0,
        # a text that quotes the key cannot fool it: inside a JSON string the quotes are escaped
        "text": 'see "prompt_token_ids":[1,2] and "prompt_token_ids": [3]',
        "finish_reason": "stop",
        "token_ids": [7, 8, 9],
        "prompt_token_ids": prompt,
        "logprobs": {"token_logprobs": [-0.1, -0.2, -0.3]},
    }
    for dumps in (orjson.dumps, lambda d: json.dumps(d).encode()):  # compact and spaced
        raw = dumps({"id": "c", "choices": [choice]})
        full, lean = decode_body(raw), decode_body(raw, keep_prompt_echo=False)
        assert full["choices"][0]["prompt_token_ids"] == prompt
        assert lean["choices"][0]["prompt_token_ids"] is None
        full["choices"][0]["prompt_token_ids"] = None
        assert lean == full
        c = parse_completion_response(lean, prompt)
        assert (c.token_ids, c.logprobs, c.text) == ([7, 8, 9], [-0.1, -0.2, -0.3], choice["text"])
        assert c.prompt_token_ids is None
    # anything but a plain list of ints is left to the parser
    for odd in (b'{"prompt_token_ids":[1,"x"]}', b'{"prompt_token_ids":[[1]]}', b'{"a":1}'):
        assert drop_prompt_echo(odd) == odd
    assert drop_prompt_echo(b'{"prompt_token_ids":[]}') == b'{"prompt_token_ids":null}'


def test_growing_prompts_encode_only_their_new_ids_to_the_same_bytes():
    from array import array

    from apexrl.tito.client import EngineClient, encode_body

    c = EngineClient("http://127.0.0.1:9", model="m", max_context=10_000)
    kw = {"max_tokens": 50, "temperature": 0.7, "stop_token_ids": [5, 6], "seed": 3}
    ids = array("i", range(100, 2100))
    seen = []
    for step in range(6):
        if step == 3:  # a prompt that does not extend the last one (another trajectory)
            ids = array("i", [9, *ids[1:]])
        else:
            ids.extend(array("i", range(step * 7 + 1)))
        got = c._prompt_json.body(ids, c.request_fields(len(ids), **kw))
        want = encode_body(c.build_request(ids, **kw))
        assert got == want
        seen.append(json.loads(got)["prompt"] == ids.tolist())
    assert all(seen)
    # a field the cache cannot place (extra overriding the prompt) takes the plain path
    rest = c.request_fields(len(ids), **kw, extra={"prompt": [1]})
    assert c._prompt_json.body(ids, rest) is None
    # an empty prompt is refused before any body is built
    with pytest.raises(Exception, match="max_tokens|context|prompt"):
        c.request_fields(10_000, **kw)
