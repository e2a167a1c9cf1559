"""A scripted engine for tests: fixed completions behind the TITO `/v1/completions` contract.

Each POST /v1/completions takes the next step of the script:
  str            a completion text, tokenized with the real tokenizer; the stop token
                 (`<|im_end|>`) is appended as the model would emit it
  Fault(...)     "status" (answer HTTP `status`), "hang" (answer after `seconds`, or
                 never while the server runs), "drop" (close the connection unanswered)
  callable       called with the request body; returns a str or a Fault (lets a test
                 act mid-trial, e.g. kill a tool server)
When the script is exhausted the engine answers 400 "script exhausted" (not retried).

The server checks the request the way vLLM would (token-id prompt, explicit
max_tokens, return_token_ids), cuts completions at `max_tokens` (finish_reason
"length"), trims max_tokens at the window's edge and refuses what vLLM refuses
(apexrl.engine.contract), returns one logprob per sampled token, and records every request.
It listens on 127.0.0.1; use it as a context manager.

Test support, not part of the package: tests/conftest.py registers it as the engine
"scripted" (ENGINE below, not a `--engine` choice), the way an outside package adds one.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from apexrl.engine.httpserver import JsonHandler, ServedModel, ThreadedHttpEngine
from apexrl.engine.registry import EngineEntry

FIXED_LOGPROB = -0.25


@dataclass
class Fault:
    kind: Literal["status", "hang", "drop"]
    status: int = 500
    message: str = "scripted fault"
    seconds: float | None = None  # hang: None = until the server stops


Step = str | Fault | Callable[[dict], "str | Fault"]


class ScriptedEngine(ThreadedHttpEngine):
    thread_name = "apexrl-scripted-engine"

    def __init__(
        self,
        script: Sequence[Step],
        *,
        tokenizer: str = "qwen3",
        model: str = "scripted",
        max_model_len: int = 32768,
        stop_token: str | None = "<|im_end|>",
        host: str = "127.0.0.1",
        port: int = 0,
        chat: Callable[[dict], str | dict] | None = None,
    ) -> None:
        from apexrl.tito.tokenizer import load_tokenizer

        self.tok = load_tokenizer(tokenizer)
        self.model = model
        self.max_model_len = max_model_len
        self.stop_id = self.tok.token_to_id(stop_token) if stop_token else None
        self.script: list[Step] = list(script)
        self.requests: list[dict] = []
        # answers /v1/chat/completions (a judge, or a chat agent's model): the reply's text,
        # or an assistant message (dict: content and/or tool_calls); None: no such route
        self.chat = chat
        self.chat_requests: list[dict] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._bind(self._handler(), host, port)

    def push(self, *steps: Step) -> None:
        with self._lock:
            self.script.extend(steps)

    def _next(self) -> Step | None:
        with self._lock:
            return self.script.pop(0) if self.script else None

    def completion(self, text: str, body: dict) -> dict:
        ids = self.tok.encode(text)
        if self.stop_id is not None:
            ids = [*ids, self.stop_id]
        max_tokens = min(body["max_tokens"], self.max_model_len - len(body["prompt"]))
        finish = "stop"
        if len(ids) > max_tokens:
            ids, finish = ids[:max_tokens], "length"
        choice: dict[str, Any] = {
            "index": 0,
            "text": self.tok.decode(ids),
            "finish_reason": finish,
            "stop_reason": self.stop_id if finish == "stop" else None,
            "token_ids": ids,
            "prompt_token_ids": body["prompt"],
            "logprobs": None,
        }
        if body.get("logprobs") is not None:
            pieces = [self.tok.decode([i]) for i in ids]
            choice["logprobs"] = {
                "tokens": pieces,
                "token_logprobs": [FIXED_LOGPROB] * len(ids),
                "top_logprobs": [{p: FIXED_LOGPROB} for p in pieces],
                "text_offset": [0] * len(ids),
            }
        n = len(body["prompt"])
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": n,
                "completion_tokens": len(ids),
                "total_tokens": n + len(ids),
            },
        }

    def check(self, body: dict) -> str | None:
        prompt = body.get("prompt")
        if (
            not isinstance(prompt, list)
            or not prompt
            or not all(isinstance(t, int) for t in prompt)
        ):
            return "prompt must be a non-empty list of token ids"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens must be explicit"
        if not body.get("return_token_ids"):
            return "return_token_ids must be true"
        if body.get("model") not in (None, self.model):
            return f"The model `{body.get('model')}` does not exist."
        from apexrl.engine.contract import WindowError, window_max_tokens

        try:  # vLLM's rules at the window's edge: refusals here, trimming in completion()
            window_max_tokens(body["max_tokens"], len(prompt), self.max_model_len)
        except WindowError as e:
            return str(e)
        return None

    def _handler(self):
        eng = self

        class Handler(JsonHandler):
            served = ServedModel(lambda: eng.model, lambda: eng.max_model_len)

            def do_POST(self) -> None:
                raw = self.read_body()
                if self.path == "/v1/chat/completions" and eng.chat is not None:
                    self._chat(raw)
                    return
                if self.path != "/v1/completions":
                    self.no_route()
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                eng.requests.append(body)
                bad = eng.check(body)
                if bad:
                    self._send(400, {"error": {"message": bad, "type": "BadRequestError"}})
                    return
                step = eng._next()
                if callable(step) and not isinstance(step, Fault):
                    step = step(body)
                if step is None:
                    self._send(400, {"error": {"message": "script exhausted"}})
                elif isinstance(step, str):
                    self._send(200, eng.completion(step, body))
                elif step.kind == "status":
                    self._send(step.status, {"error": {"message": step.message}})
                elif step.kind == "hang":
                    eng._stopping.wait(step.seconds)
                    if step.seconds is not None and not eng._stopping.is_set():
                        self._send(500, {"error": {"message": "hung, then failed"}})
                    self.close_connection = True
                else:  # drop
                    self.close_connection = True
                    self.connection.shutdown(2)

            def _chat(self, raw: bytes) -> None:
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                with eng._lock:
                    eng.chat_requests.append(body)
                text = eng.chat(body)  # type: ignore[misc]
                self._send(200, chat_completion(body, text, eng.model))

        return Handler

    def _before_stop(self) -> None:
        self._stopping.set()  # a hanging step returns

    # apexrl.engine.protocol.Engine
    kind = "scripted"

    def capabilities(self):
        from apexrl.engine.protocol import EngineCapabilities

        return EngineCapabilities(model=self.model, max_model_len=self.max_model_len)


def chat_completion(body: dict, text: str | dict, model: str) -> dict:
    """An OpenAI chat completion answering `body` with `text` (the assistant's content)
    or an assistant message (a dict: `content`, `tool_calls` as `chat_tool_call` makes)."""
    message = {"role": "assistant", "content": text}
    if isinstance(text, dict):
        message = {"role": "assistant", "content": None, **text}
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def chat_tool_call(name: str, arguments: dict, *, content: str | None = None) -> dict:
    """An assistant message calling one tool, as an OpenAI-compatible server returns it
    (for `chat=` scripts that drive a chat-completions agent)."""
    call = {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"content": content, "tool_calls": [call]}


def chat_script(steps: Sequence[str | dict]) -> Callable[[dict], str | dict]:
    """A `chat=` answer that replies with the next step per request (text or an assistant
    message), then with a 'script exhausted' text; every request is kept by the engine."""
    left = list(steps)
    lock = threading.Lock()

    def answer(body: dict) -> str | dict:
        with lock:
            return left.pop(0) if left else "script exhausted"

    return answer


def prompt_text(body: dict) -> str:
    """Every message's text in a chat request, joined (content parts included)."""
    parts = []
    for m in body.get("messages") or []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            parts.append(c)
        elif isinstance(c, list):
            parts += [str(p.get("text", "")) for p in c if isinstance(p, dict)]
    return "\n".join(parts)


def marker_judge(markers: dict[str, str], db_table: str = "deals") -> Callable[[dict], str | dict]:
    """A deterministic judge for `chat=`: `markers` maps a tag written in a criterion's
    text to a marker string. The criterion being judged is the one whose tag is in the
    prompt; the verdict is true exactly when its marker reached the prompt too. The
    reply is the verdict JSON every grader asks for ({rationale, is_criteria_true}).

    It also plays the two other parts a grader may give its judge: the selection step
    (asked for `selected_artifact_indices`: it keeps every item) and the database tool
    loop (offered `submit_verdict`: it reads the added rows of `db_table` with get_rows,
    then submits 1 exactly when the criterion's marker is in what the tools returned)."""

    def answer(body: dict) -> str | dict:
        text = prompt_text(body)
        tags = [t for t in markers if t in text]
        if "selected_artifact_indices" in json.dumps(body.get("response_format") or {}) + text:
            return json.dumps(
                {"rationale": "every item", "selected_artifact_indices": list(range(1, 100))}
            )
        tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if "submit_verdict" in tools:
            seen = "\n".join(
                str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "tool"
            )
            if not seen:
                return chat_tool_call("get_rows", {"table_name": db_table, "change_type": "added"})
            met = len(tags) == 1 and markers[tags[0]] in seen
            return chat_tool_call("submit_verdict", {"result": int(met), "reason": f"seen: {met}"})
        met = len(tags) == 1 and markers[tags[0]] in text
        why = f"tag {tags[0] if tags else 'none'}: marker {'seen' if met else 'not seen'}"
        return json.dumps({"rationale": why, "is_criteria_true": met})

    return answer


def launcher(cls: type[ScriptedEngine] = ScriptedEngine, model: str = "scripted"):
    """The engine entry's launch for `cls`: an instance with an empty script (push() steps
    before use, or a `_next` of its own), started on the options' host and port."""

    def launch(opts) -> ScriptedEngine:
        return cls(
            [],
            model=opts.served_model_name or model,
            max_model_len=opts.max_model_len or 32768,
            host=opts.host,
            port=opts.port,
        ).start()

    return launch


launch = launcher()


ENGINE = EngineEntry(
    "scripted",
    "fixed completions from a script, with faults (tests)",
    launch="tests.scripted_engine:launch",
    selectable=False,
)


def tool_call_text(name: str, arguments: dict, *, think: str | None = None) -> str:
    """A Qwen3 (Hermes JSON) tool call as the model would write it."""
    head = f"<think>\n{think}\n</think>\n\n" if think is not None else ""
    return (
        head
        + "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments})
        + "\n</tool_call>"
    )


def tool_call_xml(name: str, arguments: dict, *, think: str | None = None) -> str:
    """A Qwen3.5/3.6 (qwen3_xml) tool call as the model would write it."""
    head = f"<think>\n{think}\n</think>\n\n" if think is not None else ""
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
        for k, v in arguments.items()
    )
    return f"{head}<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
