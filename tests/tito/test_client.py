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
