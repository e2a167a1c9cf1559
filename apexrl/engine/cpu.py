"""A local CPU inference engine for small Hugging Face checkpoints.

It speaks the slice of vLLM's OpenAI-compatible HTTP contract that TITO uses:
`POST /v1/completions` with a token-id prompt, `max_tokens`, `temperature`,
`top_p`, `seed`, `stop_token_ids`, `logprobs`, `return_token_ids` and
`prompt_logprobs`; `POST /v1/chat/completions` (OpenAI chat messages rendered with
the model's own chat template, so LiteLLM's `openai/<name>` with `api_base` can use the
engine as an LLM judge); plus `GET /v1/models` and `GET /health`. The model runs with
transformers on torch (extra `local`: `pip install 'apexrl[local]'`), one request
at a time. It listens on 127.0.0.1 unless told otherwise.

Its test checkpoints come from apexrl.engine.tiny (`apexrl engine make-tiny`).
"""

from __future__ import annotations

import inspect
import json
import threading
import time
import uuid
from http import HTTPStatus
from pathlib import Path
from typing import Any

from apexrl.engine.httpserver import JsonHandler, ServedModel, ThreadedHttpEngine
from apexrl.errors import UsageError
from apexrl.tito import sampling


def _torch():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise UsageError(
            "the local engine needs torch and transformers",
            hint="pip install 'apexrl[local]'",
        ) from e
    return torch


class LocalEngine:
    """A transformers causal LM on CPU with a token-in/token-out generate()."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        served_model_name: str | None = None,
        max_model_len: int | None = None,
        threads: int | None = None,
    ) -> None:
        torch = _torch()
        from tokenizers import Tokenizer as TK
        from transformers import AutoModelForCausalLM

        self.torch = torch
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise UsageError(f"{self.model_dir}: not a model directory (no config.json)")
        if threads:
            torch.set_num_threads(threads)
        self.model = AutoModelForCausalLM.from_pretrained(
            str(self.model_dir), dtype=torch.float32
        ).eval()
        self.config = self.model.config
        self.max_model_len = max_model_len or int(
            getattr(self.config, "max_position_embeddings", 4096)
        )
        self.vocab_size = int(self.config.vocab_size)
        self.name = served_model_name or self.model_dir.name
        tj = self.model_dir / "tokenizer.json"
        self.tokenizer = TK.from_file(str(tj)) if tj.is_file() else None
        self.lock = threading.Lock()
        # transformers >= 5.x renamed past_key_values to cache (in and out).
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def chat_tokenizer(self):
        """The model's tokenizer with its chat template (for /v1/chat/completions)."""
        if getattr(self, "_chat_tok", None) is None:
            from apexrl.tito.tokenizer import load_tokenizer

            try:
                tok = load_tokenizer(str(self.model_dir))
            except UsageError as e:
                raise _BadRequest(f"chat needs the model's tokenizer: {e}") from None
            if not tok.chat_template:
                raise _BadRequest("the model directory has no chat template")
            self._chat_tok = tok
        return self._chat_tok

    def _cache(self, res):
        cache = getattr(res, "cache", None)
        return cache if cache is not None else getattr(res, "past_key_values", None)

    def _decode(self, ids: list[int]) -> str:
        if self.tokenizer is None:
            return ""
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def _piece(self, i: int) -> str:
        return self._decode([i])

    def _prompt_logprobs(self, prompt: list[int], logits, top: int) -> list:
        """vLLM's shape: None for the first token, then {id: {logprob, rank, decoded_token}}."""
        torch = self.torch
        tgt = torch.tensor(prompt[1:], dtype=torch.long)
        lse = torch.logsumexp(logits, dim=-1)
        chosen_logit = logits.gather(1, tgt[:, None])[:, 0]
        chosen = (chosen_logit - lse).tolist()
        # ranks cost a full pass over the vocabulary per position: only with top-k asked
        ranks = (
            ((logits > chosen_logit[:, None]).sum(dim=1) + 1).tolist()
            if top > 0
            else [None] * len(chosen)
        )
        tops = torch.topk(logits, top, dim=-1) if top > 0 else None
        out: list = [None]
        for k in range(len(prompt) - 1):
            tid = prompt[k + 1]
            entry = {
                str(tid): {
                    "logprob": chosen[k],
                    "rank": ranks[k],
                    "decoded_token": self._piece(tid),
                }
            }
            if tops is not None:
                for r in range(top):
                    t = int(tops.indices[k, r])
                    entry.setdefault(
                        str(t),
                        {
                            "logprob": float(tops.values[k, r] - lse[k]),
                            "rank": r + 1,
                            "decoded_token": self._piece(t),
                        },
                    )
            out.append(entry)
        return out

    def generate(
        self,
        prompt: list[int],
        *,
        max_tokens: int = 16,
        temperature: float = sampling.TEMPERATURE,
        top_p: float = sampling.TOP_P,
        seed: int | None = None,
        stop_token_ids: list[int] | None = None,
        prompt_logprobs: int | None = None,
    ) -> dict[str, Any]:
        torch = self.torch
        stops = set(stop_token_ids or [])
        eos_ids: set[int] = set()
        if getattr(self.config, "eos_token_id", None) is not None:
            eos = self.config.eos_token_id
            eos_ids.update(eos if isinstance(eos, list) else [eos])
            stops.update(eos_ids)
        gen = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        out_ids: list[int] = []
        out_lps: list[float] = []
        finish = "length"
        stop_reason = None
        plp = None
        with self.lock, torch.inference_mode():
            ids = torch.tensor([prompt], dtype=torch.long)
            keep = {} if prompt_logprobs is not None else {"logits_to_keep": 1}
            res = self.model(input_ids=ids, use_cache=True, **keep)
            logits = res.logits[0].float()
            if prompt_logprobs is not None:
                plp = self._prompt_logprobs(prompt, logits[:-1], prompt_logprobs)
            past = self._cache(res)
            nxt = logits[-1]
            for _ in range(max_tokens):
                logp = torch.log_softmax(nxt, dim=-1)
                if temperature <= 0:
                    t = int(torch.argmax(nxt))
                else:
                    probs = torch.softmax(nxt / temperature, dim=-1)
                    if top_p < 1.0:
                        sp, si = torch.sort(probs, descending=True)
                        keep = torch.cumsum(sp, 0) - sp < top_p
                        mask = torch.zeros_like(probs, dtype=torch.bool)
                        mask[si[keep]] = True
                        probs = torch.where(mask, probs, torch.zeros_like(probs))
                        probs = probs / probs.sum()
                    t = int(torch.multinomial(probs, 1, generator=gen))
                out_ids.append(t)
                out_lps.append(float(logp[t]))
                if t in stops:
                    # vLLM: stop_reason is the stop token id, None when the EOS stopped it
                    finish, stop_reason = "stop", (None if t in eos_ids else t)
                    break
                res = self.model(
                    input_ids=torch.tensor([[t]], dtype=torch.long),
                    use_cache=True,
                    **{self._cache_kw: past},
                )
                past = self._cache(res)
                nxt = res.logits[0, -1].float()
        return {
            "token_ids": out_ids,
            "logprobs": out_lps,
            "finish_reason": finish,
            "stop_reason": stop_reason,
            "prompt_logprobs": plp,
        }

    # --- LoRA adapters (the JAX trainer's policy) --------------------------------------
    def load_adapter(self, adapter: str | Path, *, served_model_name: str | None = None) -> None:
        """Serve base weights + a PEFT LoRA adapter (an `adapter.tar.gz` as SkyRL's JAX
        backend saves it, or a folder with adapter_config.json and
        adapter_model.safetensors), merged: W = W_base + (alpha / r) * B @ A. The
        previous adapter is replaced, not stacked. `served_model_name` renames the
        served model at the same moment (a request naming the old name gets 404), so a
        client naming the new version can only be answered by the new weights."""
        from apexrl.engine.lora import read_lora_deltas

        deltas = read_lora_deltas(adapter)
        params = dict(self.model.named_parameters())
        unknown = sorted(k for k in deltas if k not in params)
        if unknown:
            raise UsageError(
                f"adapter {adapter}: {len(unknown)} weight(s) the model does not have, "
                f"e.g. {unknown[0]}",
                hint="the adapter was trained on another architecture",
            )
        torch = self.torch
        with self.lock, torch.no_grad():
            if getattr(self, "_base_weights", None) is None:
                self._base_weights = {k: p.detach().clone() for k, p in params.items()}
            for k, p in params.items():
                base = self._base_weights[k]
                d = deltas.get(k)
                if d is not None and tuple(d.shape) != tuple(base.shape):
                    raise UsageError(
                        f"adapter {adapter}: {k} is {tuple(d.shape)}, "
                        f"the model's is {tuple(base.shape)}"
                    )
                p.copy_(base if d is None else base + d.to(base.dtype))
            self.adapter = str(adapter)
            if served_model_name:
                self.name = served_model_name


class _BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _window_max_tokens(max_tokens: Any, n_prompt: int, window: int) -> int:
    from apexrl.engine.contract import WindowError, window_max_tokens

    try:
        return window_max_tokens(max_tokens, n_prompt, window)  # vLLM's rules, measured
    except WindowError as e:
        raise _BadRequest(str(e)) from e


def _check_model(engine: LocalEngine, body: dict) -> None:
    """A request naming another model is refused as vLLM refuses it (404)."""
    model = body.get("model")
    if model is not None and model != engine.name:
        raise _BadRequest(f"The model `{model}` does not exist.", status=404)


def _temperature_top_p(body: dict) -> tuple[float, float]:
    try:
        temperature = float(body.get("temperature", sampling.TEMPERATURE))
        top_p = float(body.get("top_p", sampling.TOP_P))
    except (TypeError, ValueError) as e:
        raise _BadRequest("temperature and top_p must be numbers") from e
    return temperature, top_p


def _completion_request(engine: LocalEngine, body: dict) -> dict:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        if engine.tokenizer is None:
            raise _BadRequest("text prompts need a tokenizer.json in the model directory")
        prompt = engine.tokenizer.encode(prompt, add_special_tokens=False).ids
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    if (
        not isinstance(prompt, list)
        or not prompt
        or not all(isinstance(t, int) and not isinstance(t, bool) for t in prompt)
    ):
        raise _BadRequest("prompt must be a non-empty list of token ids (or a string)")
    bad = [t for t in prompt if t < 0 or t >= engine.vocab_size]
    if bad:
        raise _BadRequest(f"token id {bad[0]} is out of vocabulary (size {engine.vocab_size})")
    _check_model(engine, body)
    max_tokens = _window_max_tokens(body.get("max_tokens", 16), len(prompt), engine.max_model_len)
    temperature, top_p = _temperature_top_p(body)
    seed = body.get("seed")
    stop_ids = body.get("stop_token_ids") or []
    logprobs = body.get("logprobs")
    prompt_logprobs = body.get("prompt_logprobs")
    r = engine.generate(
        prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        stop_token_ids=stop_ids,
        prompt_logprobs=prompt_logprobs,
    )
    ids = r["token_ids"]
    text = engine._decode(ids)
    choice: dict[str, Any] = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": r["finish_reason"],
        "stop_reason": r["stop_reason"],
        "prompt_logprobs": r["prompt_logprobs"],
    }
    if logprobs is not None:
        pieces = [engine._piece(t) for t in ids]
        offsets, pos = [], 0
        for p in pieces:
            offsets.append(pos)
            pos += len(p)
        choice["logprobs"] = {
            "tokens": pieces,
            "token_logprobs": r["logprobs"],
            "top_logprobs": [{p: lp} for p, lp in zip(pieces, r["logprobs"], strict=True)],
            "text_offset": offsets,
        }
    if body.get("return_token_ids"):
        choice["token_ids"] = ids
        choice["prompt_token_ids"] = prompt
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": engine.name,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(ids),
            "total_tokens": len(prompt) + len(ids),
        },
    }


def _message_text(content: Any, where: str) -> str:
    """An OpenAI message content (a string, or a list of text parts) as text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text") or ""))
            else:
                raise _BadRequest(f"{where}: only text content parts are supported")
        return "".join(parts)
    raise _BadRequest(f"{where}: content must be a string or a list of text parts")


def _chat_request(engine: LocalEngine, body: dict) -> dict:
    """OpenAI `/v1/chat/completions`: the messages rendered with the model's chat
    template (`chat_template_kwargs` passed through), sampled like `/v1/completions`."""
    if body.get("stream"):
        raise _BadRequest("stream is not supported by the local engine")
    if int(body.get("n") or 1) != 1:
        raise _BadRequest("n must be 1")
    _check_model(engine, body)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise _BadRequest("messages must be a non-empty list")
    messages = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _BadRequest(f"messages[{i}] must be an object with a role")
        msg = dict(m)
        msg["content"] = _message_text(m.get("content"), f"messages[{i}]")
        messages.append(msg)
    tok = engine.chat_tokenizer()
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise _BadRequest("chat_template_kwargs must be an object")
    try:
        text = tok.apply_chat_template(
            messages, tools=body.get("tools") or None, add_generation_prompt=True, **kwargs
        )
    except Exception as e:  # the template refused the conversation (raise_exception)
        raise _BadRequest(f"the chat template could not render the messages: {e}") from None
    prompt = tok.encode(text)
    room = engine.max_model_len - len(prompt)
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or room
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise _BadRequest("max_tokens must be a positive integer")
    if len(prompt) + max_tokens > engine.max_model_len:
        raise _BadRequest(
            f"This model's maximum context length is {engine.max_model_len} tokens. However, "
            f"you requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the messages, "
            f"{max_tokens} in the completion). Please reduce the length of the messages or "
            "completion."
        )
    temperature, top_p = _temperature_top_p(body)
    stop_ids = [i for i in (tok.eos_token_id, tok.token_to_id("<|im_end|>")) if i is not None]
    r = engine.generate(
        prompt,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=body.get("seed"),
        stop_token_ids=stop_ids + list(body.get("stop_token_ids") or []),
    )
    ids = r["token_ids"]
    shown = ids[:-1] if r["finish_reason"] == "stop" and ids else ids  # no stop token
    content = tok.decode(shown, skip_special_tokens=True)
    stops = body.get("stop")
    finish = r["finish_reason"]
    for s in [stops] if isinstance(stops, str) else list(stops or []):
        if isinstance(s, str) and s and s in content:
            content, finish = content[: content.index(s)], "stop"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": engine.name,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": None,
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": len(prompt),
            "completion_tokens": len(ids),
            "total_tokens": len(prompt) + len(ids),
        },
    }


def _handler(engine: LocalEngine) -> type[JsonHandler]:
    class Handler(JsonHandler):
        server_version = "apexrl-local-engine"
        served = ServedModel(lambda: engine.name, lambda: engine.max_model_len)

        def _error(self, status: int, message: str) -> None:
            kind = "NotFoundError" if status == 404 else "BadRequestError"
            self._send(status, {"error": {"message": message, "type": kind, "code": status}})

        def no_route(self) -> None:
            self._error(404, f"no route {self.path}")

        def do_POST(self) -> None:
            raw = self.read_body()
            routes = {"/v1/completions": _completion_request, "/v1/chat/completions": _chat_request}
            route = routes.get(self.path)
            if route is None:
                self.no_route()
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise _BadRequest("request body must be a JSON object")
                self._send(200, route(engine, body))
            except json.JSONDecodeError as e:
                self._error(400, f"invalid JSON: {e}")
            except _BadRequest as e:
                self._error(e.status, str(e))
            except Exception as e:  # a server bug: 500, the client retries
                self._send(
                    HTTPStatus.INTERNAL_SERVER_ERROR,
                    {
                        "error": {
                            "message": f"{type(e).__name__}: {e}",
                            "type": "InternalServerError",
                        }
                    },
                )

    return Handler


class EngineServer(ThreadedHttpEngine):
    """The HTTP server around a LocalEngine (apexrl.engine.httpserver's shell); start()
    runs it in a daemon thread."""

    thread_name = "apexrl-local-engine"

    def __init__(self, engine: LocalEngine, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self._bind(_handler(engine), host, port)

    # apexrl.engine.protocol.Engine
    kind = "local"

    def capabilities(self):
        from apexrl.engine.protocol import EngineCapabilities

        return EngineCapabilities(model=self.engine.name, max_model_len=self.engine.max_model_len)


def launch(opts) -> EngineServer:
    """The local engine for `opts.model` (apexrl.engine.protocol.StartOptions), started."""
    from apexrl.engine.serve import resolve_local_model

    eng = LocalEngine(
        resolve_local_model(opts.model),
        served_model_name=opts.served_model_name,
        max_model_len=opts.max_model_len,
        threads=opts.threads,
    )
    return EngineServer(eng, host=opts.host, port=opts.port).start()
