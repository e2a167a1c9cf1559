"""Client for OpenAI-compatible `/v1/completions` with token-id prompts (vLLM contract).

The prompt is a list of token ids; the response carries the sampled token ids
(`return_token_ids`), their logprobs and, on request, prompt logprobs.
`max_tokens` is always explicit (the endpoint's default is 16) and never more
than what is left of the context window. `fit_to_server()` takes that window
from the server itself (`/v1/models` max_model_len): a `--context-window` larger
than the server's would otherwise be trimmed silently by vLLM.

vLLM's answers at the window's edge (and how they are read here):
  prompt + max_tokens > window   200, max_tokens trimmed, finish_reason "length":
                                 `Completion.window_full` (fewer tokens than asked)
  prompt fills the window        400 "max_tokens must be at least 1..."  -> context
  max_tokens > max_model_len     400 "... cannot be greater than max_model_len" -> context
  prompt longer than the window  400 "... maximum context length ..."    -> context
Seeds: vLLM's CPU build (0.32) kills its whole engine on a seeded request whose
prefill is split into chunks, i.e. an uncached prompt longer than its batch
(`--max-num-batched-tokens`, 2,048 by default). apexrl's launcher starts vLLM CPU
so that prefills are never split (apexrl.engine.vllm). A server cannot be asked
how it was started, so for one started elsewhere set APEXRL_ENGINE_SEED_MAX_PROMPT
(e.g. 2048): `seed_max_prompt` then drops the seed of longer prompts (counted in
`seeds_dropped`) instead of sending a request that would crash the engine.

Failures are classified (docs/facts.md section 5):
  context_window_exceeded  not retried
  bad_request              deterministic 4xx, not retried
  timeout                  retried with exponential backoff
  rate_limit               429, retried with a long backoff
  transient                5xx / connection errors, exponential backoff
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from apexrl.errors import AuthError, RemoteError
from apexrl.tito import sampling

ErrorKind = Literal["context_window_exceeded", "bad_request", "timeout", "rate_limit", "transient"]
RETRYABLE: frozenset[str] = frozenset({"timeout", "rate_limit", "transient"})

_CONTEXT_MARKERS = (
    "maximum context length",
    "max_tokens must be at least 1",  # vLLM: the prompt fills the window
    "greater than max_model_len",  # vLLM: max_tokens > the window
    "maximum model length",
    "context length",
    "context window",
    "too many tokens",
    "prompt is too long",
    "exceeds the model",
)


SEED_MAX_PROMPT_ENV = "APEXRL_ENGINE_SEED_MAX_PROMPT"


def seed_limit(env: dict[str, str] | None = None) -> int | None:
    """Longest prompt (tokens) sent with a seed, from APEXRL_ENGINE_SEED_MAX_PROMPT."""
    from apexrl.errors import UsageError

    raw = (os.environ if env is None else env).get(SEED_MAX_PROMPT_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise UsageError(
            f"{SEED_MAX_PROMPT_ENV}={raw!r} is not a token count",
            hint="set it to the engine's --max-num-batched-tokens (vLLM CPU: 2048), or unset it",
        )
    return int(raw)


class EngineError(RemoteError):
    """A classified engine failure; `kind` is one of ErrorKind."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None) -> None:
        hints = {
            "context_window_exceeded": "the conversation is longer than the model's context window",
            "bad_request": "the engine rejected the request; check the model name and parameters",
            "timeout": "the engine did not answer in time; raise --timeout or check its load",
            "rate_limit": "the engine is rate limiting; lower concurrency",
            "transient": "is the engine running and reachable?",
        }
        super().__init__(message, retryable=kind in RETRYABLE, hint=hints[kind])
        self.kind: ErrorKind = kind
        self.status = status


class ContextWindowExceeded(EngineError):
    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__("context_window_exceeded", message, status=status)


def classify_http(status: int, body: str) -> ErrorKind:
    low = body.lower()
    if status == 429:
        return "rate_limit"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "transient"
    if any(m in low for m in _CONTEXT_MARKERS):
        return "context_window_exceeded"
    return "bad_request"


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[float] | None
    text: str
    finish_reason: str | None
    prompt_token_ids: list[int] | None = None
    prompt_logprobs: list[float | None] | None = None  # logprob of each prompt token
    raw: dict = field(default_factory=dict, repr=False)
    max_tokens: int | None = None  # what the request asked for

    @property
    def stopped(self) -> bool:
        return self.finish_reason == "stop"

    @property
    def window_full(self) -> bool:
        """Cut by the engine's window, not by max_tokens: vLLM trims max_tokens silently
        to what is left of its window and answers finish_reason "length"."""
        return (
            self.finish_reason == "length"
            and self.max_tokens is not None
            and len(self.token_ids) < self.max_tokens
        )


@dataclass
class RetryPolicy:
    max_retries: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    rate_limit_delay_s: float = 30.0  # long backoff for 429

    def delay(self, kind: str, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_delay_s * 5)
        base = self.rate_limit_delay_s if kind == "rate_limit" else self.base_delay_s
        cap = self.max_delay_s * (5 if kind == "rate_limit" else 1)
        return min(cap, base * (2**attempt)) * (0.5 + random.random() / 2)


def _parse_prompt_logprobs(
    entries: list | None, prompt_ids: Sequence[int]
) -> list[float | None] | None:
    """vLLM: a list aligned with the prompt, None first, then {id: {logprob,...}}."""
    if entries is None:
        return None
    out: list[float | None] = []
    for i, e in enumerate(entries):
        if e is None:
            out.append(None)
            continue
        tid = str(prompt_ids[i]) if i < len(prompt_ids) else None
        info = e.get(tid) if tid is not None else None
        if info is None and len(e) == 1:
            info = next(iter(e.values()))
        out.append(None if info is None else float(info.get("logprob", info)))
    return out


def parse_completion_response(data: dict, prompt_ids: Sequence[int]) -> Completion:
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError) as e:
        raise EngineError("bad_request", f"engine answered without choices: {data!r:.300}") from e
    token_ids = choice.get("token_ids")
    if token_ids is None:
        raise EngineError(
            "bad_request",
            "engine answered without token_ids; it must support return_token_ids (vLLM >= 0.10.2)",
        )
    lp = choice.get("logprobs")
    logprobs = None
    if isinstance(lp, dict) and lp.get("token_logprobs") is not None:
        logprobs = [float(x) if x is not None else float("nan") for x in lp["token_logprobs"]]
    elif isinstance(lp, dict) and lp.get("content") is not None:  # chat-style shape
        logprobs = [float(c["logprob"]) for c in lp["content"]]
    prompt_token_ids = choice.get("prompt_token_ids", data.get("prompt_token_ids"))
    plp = choice.get("prompt_logprobs", data.get("prompt_logprobs"))
    return Completion(
        token_ids=[int(t) for t in token_ids],
        logprobs=logprobs,
        text=choice.get("text") or "",
        finish_reason=choice.get("finish_reason"),
        prompt_token_ids=prompt_token_ids,
        prompt_logprobs=_parse_prompt_logprobs(plp, prompt_token_ids or prompt_ids),
        raw=data,
    )


@functools.lru_cache(maxsize=1)
def shared_ssl_context():
    """One TLS context (httpx's default verification) for every client of this process:
    building one loads the CA bundle (~65 ms and memory), once per trial otherwise."""
    import httpx

    return httpx.create_ssl_context()


_SSL_LOCK = threading.Lock()


def _first_ssl_context():
    """shared_ssl_context() for worker threads: built once when several ask at once."""
    with _SSL_LOCK:
        return shared_ssl_context()


def encode_body(body: dict) -> bytes:
    """The request as JSON bytes (orjson: a 100k-token prompt in ~1 ms, not ~10 ms)."""
    import orjson

    try:
        return orjson.dumps(body)
    except TypeError:  # something orjson does not serialize (in `extra`): the slow path
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


_ECHO_KEYS = (b'"prompt_token_ids":[', b'"prompt_token_ids": [')
# a JSON value holding none of these bytes is a flat list of numbers (or literals): its
# first "]" ends it, and null can stand in for it (memchr scans: ~0.05 ms for the ~600 kB
# echo, ~0.6 ms for a bytes.translate of it)
_NESTED = (b'"', b"[", b"{")


def drop_prompt_echo(content: bytes) -> bytes:
    """The response with its prompt echo (vLLM's `prompt_token_ids`, the whole prompt
    again: ~100k ids) replaced by null, before it is parsed: parsing it costs ~5 ms of
    the event loop per step at 100k tokens, for ids the agent already holds. Only a flat
    list (numbers: no string, list or object inside) is dropped (a JSON string cannot hold
    the unescaped key); any other shape is left for the parser."""
    for key in _ECHO_KEYS:
        k = content.find(key)
        if k < 0:
            continue
        start = k + len(key)
        end = content.find(b"]", start)
        if end < 0 or any(content.find(b, start, end) >= 0 for b in _NESTED):
            return content
        return content[:k] + b'"prompt_token_ids":null' + content[end + 1 :]
    return content


def decode_body(content: bytes, *, keep_prompt_echo: bool = True) -> dict:
    import orjson

    return orjson.loads(content if keep_prompt_echo else drop_prompt_echo(content))


_JSON_HEADERS = {"Content-Type": "application/json"}


class PromptJSONCache:
    """The request body for a prompt that extends the previous one, without turning the
    whole prompt into a Python list and JSON again (~2 ms of the event loop per step at
    100k tokens): the JSON of the last prompt's ids is kept, and only the new ids are
    encoded. The bytes are exactly `encode_body(body)`'s (orjson writes integers as plain
    decimals, `prompt` is the body's first key)."""

    def __init__(self) -> None:
        self.ids = b""  # the last prompt's ids as raw array('i') bytes
        self.json = b""  # their JSON: "1,2,3" (no brackets)

    def body(self, prompt_ids: array, rest: dict) -> bytes | None:
        """The body {"prompt": prompt_ids, **rest} as JSON bytes; None: not applicable."""
        import orjson

        if prompt_ids.typecode != "i" or not rest or "prompt" in rest:
            return None
        try:
            tail = orjson.dumps(rest)
        except TypeError:
            return None
        raw = memoryview(prompt_ids).cast("B")
        n = len(self.ids)
        # bytes == bytes is a memcmp; memoryview == bytes compares item by item (~1 ms of
        # the event loop at 100k tokens)
        if n and len(raw) >= n and raw[:n].tobytes() == self.ids:
            new = prompt_ids[n // prompt_ids.itemsize :]
            ids_json = self.json + b"," + orjson.dumps(new.tolist())[1:-1] if new else self.json
        else:
            ids_json = orjson.dumps(prompt_ids.tolist())[1:-1]
        if not ids_json:
            return None
        self.ids, self.json = raw.tobytes(), ids_json
        return b'{"prompt":[' + ids_json + b"]," + tail[1:]


class EngineClient:
    """Talks to one OpenAI-compatible engine. Use as a context manager or call close()."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        timeout_s: float = 1800.0,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        max_context: int | None = None,
        api_key: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.model = model
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retry = retry or RetryPolicy()
        self.max_context = max_context
        self.api_key = api_key if api_key is not None else os.environ.get("APEXRL_ENGINE_API_KEY")
        self.seed_max_prompt = seed_limit()  # longer prompts are sent without a seed
        self.seeds_dropped = 0
        self.server_window: int | None = None
        self.server_version: str | None = None
        self._client = None
        self._aclient = None
        # the last prompt sent and its JSON: a trajectory's prompts only grow, so the next
        # request encodes just the new ids (apexrl.tito.client.PromptJSONCache)
        self._prompt_json = PromptJSONCache()

    # --- request building --------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _timeout(self):
        import httpx

        return httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s)

    def build_request(self, prompt_ids: Sequence[int], **kw: Any) -> dict[str, Any]:
        """The /v1/completions body: `prompt` (the ids as a list) first, then
        `request_fields`."""
        fields = self.request_fields(len(prompt_ids), **kw)
        prompt = (
            prompt_ids.tolist() if isinstance(prompt_ids, array) else [int(t) for t in prompt_ids]
        )
        return {"prompt": prompt, **fields}

    def request_fields(
        self,
        n_prompt: int,
        *,
        max_tokens: int,
        temperature: float = sampling.TEMPERATURE,
        top_p: float | None = None,
        seed: int | None = None,
        stop_token_ids: Sequence[int] | None = None,
        logprobs: int | None = 0,
        prompt_logprobs: int | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Every field of the body but the prompt (of `n_prompt` tokens)."""
        if self.max_context is not None:
            left = self.max_context - n_prompt
            if left <= 0:
                raise ContextWindowExceeded(
                    f"prompt has {n_prompt} tokens; the context window is {self.max_context}"
                )
            max_tokens = min(max_tokens, left)
        if max_tokens < 1:
            raise EngineError("bad_request", f"max_tokens must be >= 1 (got {max_tokens})")
        limit = self.seed_max_prompt
        if seed is not None and limit is not None and n_prompt > limit:
            seed = None  # the engine build would crash on it (see the module doc)
            self.seeds_dropped += 1
        body: dict[str, Any] = {
            "max_tokens": int(max_tokens),
            "temperature": float(temperature),
            "return_token_ids": True,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
        }
        if self.model:
            body["model"] = self.model
        if top_p is not None:
            body["top_p"] = top_p
        if seed is not None:
            body["seed"] = int(seed)
        if stop_token_ids:
            body["stop_token_ids"] = [int(t) for t in stop_token_ids]
        if logprobs is not None:
            body["logprobs"] = int(logprobs)
        if prompt_logprobs is not None:
            body["prompt_logprobs"] = int(prompt_logprobs)
        if extra:
            body.update(extra)
        return body

    def _error_from_response(self, resp) -> EngineError | AuthError:
        text = resp.text[:2000]
        if resp.status_code in (401, 403):
            return AuthError(
                f"engine at {self.base_url} refused the credentials ({resp.status_code})",
                hint="set APEXRL_ENGINE_API_KEY to the engine's API key",
            )
        kind = classify_http(resp.status_code, text)
        err = EngineError(
            kind, f"engine returned HTTP {resp.status_code}: {text}", status=resp.status_code
        )
        ra = resp.headers.get("retry-after")
        err.retry_after = float(ra) if ra and ra.replace(".", "", 1).isdigit() else None
        return err

    @staticmethod
    def _error_from_exc(e: Exception) -> EngineError:
        import httpx

        if isinstance(e, httpx.TimeoutException):
            return EngineError("timeout", f"engine request timed out: {type(e).__name__}")
        return EngineError("transient", f"engine unreachable: {type(e).__name__}: {e}")

    # --- sync --------------------------------------------------------------------------
    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _sync(self):
        import httpx

        if self._client is None:
            self._client = httpx.Client(
                timeout=self._timeout(), headers=self._headers(), verify=shared_ssl_context()
            )
        return self._client

    def _backoff_or_raise(self, err: Exception, attempt: int) -> float:
        """Seconds to wait before retrying `err`; raises it when it is final."""
        if (
            not isinstance(err, EngineError)
            or not err.retryable
            or attempt >= self.retry.max_retries
        ):
            raise err
        return self.retry.delay(err.kind, attempt, getattr(err, "retry_after", None))

    def post(self, path: str, body: dict | bytes) -> dict:
        import httpx

        content = body if isinstance(body, bytes) else encode_body(body)
        attempt = 0
        while True:
            try:
                resp = self._sync().post(
                    self.base_url + path, content=content, headers=_JSON_HEADERS
                )
                if resp.status_code == 200:
                    return decode_body(resp.content)
                err = self._error_from_response(resp)
            except httpx.HTTPError as e:
                err = self._error_from_exc(e)
            except ValueError as e:  # bad JSON body
                err = EngineError("transient", f"engine sent invalid JSON: {e}")
            time.sleep(self._backoff_or_raise(err, attempt))
            attempt += 1

    def complete(self, prompt_ids: Sequence[int], **kw: Any) -> Completion:
        body = self.build_request(prompt_ids, **kw)
        max_tokens, content = body["max_tokens"], encode_body(body)
        del body  # the prompt as a Python list is not kept while the request runs
        c = parse_completion_response(self.post("/v1/completions", content), prompt_ids)
        c.max_tokens = max_tokens
        return c

    def fit_to_server(self, timeout_s: float = 30.0) -> int | None:
        """Learn the server's window and build; clamp `max_context` to the window.

        Returns the window (None when the server does not report one)."""
        import httpx

        try:
            c = self._sync()
            models = c.get(self.base_url + "/v1/models", timeout=timeout_s)
            version = c.get(self.base_url + "/version", timeout=timeout_s)
        except httpx.HTTPError as e:
            raise self._error_from_exc(e) from e
        if models.status_code != 200:
            raise self._error_from_response(models)
        try:
            data = models.json().get("data") or []
            self.server_version = (
                str(version.json().get("version")) if version.status_code == 200 else None
            )
        except (ValueError, AttributeError) as e:
            raise EngineError("transient", f"engine sent invalid JSON: {e}") from e
        entry = next((m for m in data if m.get("id") == self.model), data[0] if data else {})
        mml = entry.get("max_model_len")
        self.server_window = mml if isinstance(mml, int) and mml > 0 else None
        if self.server_window is not None:
            self.max_context = min(self.max_context or self.server_window, self.server_window)
        return self.server_window

    def models(self) -> list[str]:
        import httpx

        try:
            resp = self._sync().get(self.base_url + "/v1/models")
        except httpx.HTTPError as e:
            raise self._error_from_exc(e) from e
        if resp.status_code != 200:
            raise self._error_from_response(resp)
        return [m.get("id") for m in resp.json().get("data", [])]

    # --- async -------------------------------------------------------------------------
    async def apost(self, path: str, body: dict | bytes, *, keep_prompt_echo: bool = True) -> dict:
        import httpx

        if self._aclient is None:
            if shared_ssl_context.cache_info().currsize:
                ssl_context = shared_ssl_context()
            else:  # the first client of the process: the CA bundle loads off the loop
                ssl_context = await asyncio.to_thread(_first_ssl_context)
            if self._aclient is None:
                self._aclient = httpx.AsyncClient(
                    timeout=self._timeout(), headers=self._headers(), verify=ssl_context
                )
        content = body if isinstance(body, bytes) else encode_body(body)
        attempt = 0
        while True:
            try:
                resp = await self._aclient.post(
                    self.base_url + path, content=content, headers=_JSON_HEADERS
                )
                if resp.status_code == 200:
                    return decode_body(resp.content, keep_prompt_echo=keep_prompt_echo)
                err = self._error_from_response(resp)
            except httpx.HTTPError as e:
                err = self._error_from_exc(e)
            except ValueError as e:
                err = EngineError("transient", f"engine sent invalid JSON: {e}")
            await asyncio.sleep(self._backoff_or_raise(err, attempt))
            attempt += 1

    async def acomplete(
        self, prompt_ids: Sequence[int], *, keep_prompt_echo: bool = True, **kw: Any
    ) -> Completion:
        """keep_prompt_echo=False: the engine's echo of the prompt is dropped unparsed
        (`prompt_token_ids` is None; the agent loop holds the prompt ids already)."""
        content = None
        if isinstance(prompt_ids, array):  # the agent's token state: only the new ids
            rest = self.request_fields(len(prompt_ids), **kw)
            max_tokens = rest["max_tokens"]
            content = self._prompt_json.body(prompt_ids, rest)
        if content is None:
            body = self.build_request(prompt_ids, **kw)
            max_tokens, content = body["max_tokens"], encode_body(body)
            del body  # the prompt as a Python list is not kept while the request runs
        data = await self.apost("/v1/completions", content, keep_prompt_echo=keep_prompt_echo)
        c = parse_completion_response(data, prompt_ids)
        c.max_tokens = max_tokens
        return c

    async def aclose(self) -> None:
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
        self.close()
