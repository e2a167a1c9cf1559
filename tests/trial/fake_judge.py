"""A scripted OpenAI-compatible chat server on 127.0.0.1 for judge tests.

Each POST to /v1/chat/completions takes the next reply from `replies` (the last one
repeats): a string is returned as the assistant message, an int as that HTTP status,
a float as a stall of that many seconds (then a valid "true" verdict).
Requests are recorded in `requests`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeJudge:
    def __init__(self, replies: list[str | int]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.url = ""

    def next_reply(self) -> str | int:
        with self.lock:
            i = len(self.requests) - 1
            return self.replies[min(i, len(self.replies) - 1)]


def _handler(judge: FakeJudge):
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a) -> None:
            return None

        def do_POST(self) -> None:
            n = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(n) or b"{}")
            with judge.lock:
                judge.requests.append(body)
            reply = judge.next_reply()
            if isinstance(reply, float):
                time.sleep(reply)
                reply = GOOD_TRUE
            if isinstance(reply, int):
                self.send_response(reply)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"error": {"message": "scripted failure"}}')
                return
            out = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "judge"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return H


@contextlib.contextmanager
def fake_judge(replies: list[str | int]) -> Iterator[FakeJudge]:
    judge = FakeJudge(replies)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(judge))
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    judge.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield judge
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=5)


GOOD_TRUE = '{"rationale": "The answer states it.", "is_criteria_true": true}'
GOOD_FALSE = '{"rationale": "Not stated.", "is_criteria_true": false}'
BAD = "Sure! The criterion is met, I think."
