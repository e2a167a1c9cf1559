"""Judge verdicts cached by (the judge, sha256 of the exact request), and a counting,
caching pass-through for graders that call the judge themselves.

The judge half of the key is `judge_identity`: the model, the server (api_base) and the
sampling settings sent, so a verdict from another server or other settings is never
reused (issue 42, finding 5). apexrl's judge looks replies up itself
(apexrl.grading.judge) by the sha256 of its exact prompt. archipelago's grading runner
runs in its own interpreter and calls an OpenAI-compatible URL: `CachingProxy` listens
on 127.0.0.1, answers requests it has seen from the cache and forwards the rest
unchanged (body, response schema, no settings added) to the judge's api_base, adding
the judge's key. It answers only a client holding its per-run secret (a bearer token:
a sandbox that reaches host loopback cannot use the key, nor plant a verdict), and
keys its cache on the whole request body (issue 42, finding 2). Only replies that are a
valid verdict are cached, so a bad reply is asked again. A rerun over the same
requests therefore makes no judge call; `calls` counts the ones made.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

from apexrl.artifacts.atomic import write_bytes_atomic


class JudgeCache:
    """A folder of cached replies, one file per (model, prompt sha256)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.calls = 0  # judge calls made through this cache (misses)
        self.hits = 0
        self._lock = threading.Lock()

    def _path(self, model: str, prompt_sha256: str) -> Path:
        key = hashlib.sha256(f"{model}\0{prompt_sha256}".encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.json"

    def get(self, model: str, prompt_sha256: str) -> str | None:
        p = self._path(model, prompt_sha256)
        try:
            rec = orjson.loads(p.read_bytes())
        except (OSError, ValueError):
            return None
        if rec.get("model") != model or rec.get("prompt_sha256") != prompt_sha256:
            return None
        with self._lock:
            self.hits += 1
        return rec.get("reply")

    def put(self, model: str, prompt_sha256: str, reply: str) -> None:
        p = self._path(model, prompt_sha256)
        p.parent.mkdir(parents=True, exist_ok=True)
        rec = {"model": model, "prompt_sha256": prompt_sha256, "reply": reply}
        write_bytes_atomic(p, orjson.dumps(rec))

    def count_call(self) -> None:
        with self._lock:
            self.calls += 1


def request_sha256(body: dict) -> str:
    """sha256 of a chat request's whole body (messages, response format, sampling and
    every other parameter: any of them may change the reply)."""
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def is_verdict(text: str) -> bool:
    from apexrl.grading.judge import parse_verdict

    try:
        parse_verdict(text)
    except ValueError:
        return False
    return True


class CachingProxy:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1 in front of `upstream`."""

    def __init__(
        self,
        upstream: str,
        model: str,
        cache: JudgeCache | None,
        *,
        api_key: str | None = None,
        timeout_s: float = 3600.0,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.model = model  # the judge's LiteLLM name
        from apexrl.grading.judge import judge_identity

        self.identity = judge_identity(model, self.upstream)  # half of the cache key
        self.token = secrets.token_urlsafe(24)  # clients send it as their api key
        self.cache = cache
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.calls = 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> CachingProxy:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def authorized(self, header: str | None) -> bool:
        """Whether an Authorization header carries this run's secret."""
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self.token.encode()
        )

    def answer(self, body: dict) -> tuple[int, bytes]:
        digest = request_sha256(body)
        if self.cache is not None:
            reply = self.cache.get(self.identity, digest)
            if reply is not None:
                return 200, _completion(body, reply)
        import httpx

        headers = {"authorization": f"Bearer {self.api_key or 'none'}"}
        with self._lock:
            self.calls += 1
        if self.cache is not None:
            self.cache.count_call()
        try:
            r = httpx.post(
                f"{self.upstream}/chat/completions",
                json=body,
                headers=headers,
                timeout=self.timeout_s,
            )
        except httpx.HTTPError as e:
            return 502, orjson.dumps({"error": {"message": f"judge unreachable: {e}"}})
        if r.status_code == 200 and self.cache is not None:
            try:
                text = r.json()["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                text = ""
            if is_verdict(text):
                self.cache.put(self.identity, digest, text)
        return r.status_code, r.content

    def _handler(self):
        proxy = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                return None

            def do_POST(self) -> None:
                if not proxy.authorized(self.headers.get("authorization")):
                    self._send(401, b'{"error": {"message": "unauthorized"}}')
                    return
                try:
                    n = int(self.headers.get("content-length") or 0)
                    body = json.loads(self.rfile.read(n) or b"{}")
                except ValueError:
                    body = None
                if not self.path.rstrip("/").endswith("/chat/completions") or not isinstance(
                    body, dict
                ):
                    status, data = 404, b'{"error": {"message": "not found"}}'
                else:
                    status, data = proxy.answer(body)
                self._send(status, data)

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return H


def _completion(body: dict, reply: str) -> bytes:
    return orjson.dumps(
        {
            "id": "chatcmpl-cached",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "judge"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
    )
