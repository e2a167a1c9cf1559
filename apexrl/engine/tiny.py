"""A random-weight Qwen3-architecture checkpoint with a given tokenizer (`apexrl engine make-tiny`).

Enough to exercise the whole token-in/token-out path on CPU: the local engine
(apexrl.engine.cpu) and vLLM's CPU build serve it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from apexrl.engine.cpu import _torch
from apexrl.errors import UsageError

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "chat_template.jinja",
)


def _tokenizer_dir(spec: str) -> Path:
    from apexrl.tito.tokenizer import bundled_qwen3_dir

    if spec == "qwen3":
        return bundled_qwen3_dir()
    p = Path(spec)
    if p.is_file():
        return p.parent
    if p.is_dir():
        return p
    raise UsageError(f"tokenizer {spec!r}: pass a directory with tokenizer.json or 'qwen3'")


def make_tiny_checkpoint(
    out_dir: str | Path,
    *,
    tokenizer: str = "qwen3",
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 32768,
    head_dim: int = 32,
) -> Path:
    """Write a random-weight Qwen3 checkpoint (safetensors + config + tokenizer files).

    The defaults are servable by vLLM's CPU build (its attention needs a head size of
    at least 32) and the window (32,768) holds the example tasks' first prompt
    (~6k tokens) with room for several turns."""
    torch = _torch()
    from tokenizers import Tokenizer as TK
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from apexrl.artifacts.atomic import atomic_dir

    tdir = _tokenizer_dir(tokenizer)
    vocab = TK.from_file(str(tdir / "tokenizer.json")).get_vocab_size(with_added_tokens=True)
    cfg_json = (
        json.loads((tdir / "tokenizer_config.json").read_text())
        if (tdir / "tokenizer_config.json").is_file()
        else {}
    )
    tk = TK.from_file(str(tdir / "tokenizer.json"))
    eos = cfg_json.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    eos_id = tk.token_to_id(eos) if eos else None
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        rope_theta=1_000_000.0,
        eos_token_id=eos_id,
        bos_token_id=None,
        pad_token_id=tk.token_to_id("<|endoftext|>"),
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.float32).eval()
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        for name in TOKENIZER_FILES:
            if (tdir / name).is_file():
                shutil.copyfile(tdir / name, tmp / name)
    return out
