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


ARCHS = ("qwen3", "llama")


def make_tiny_checkpoint(
    out_dir: str | Path,
    *,
    tokenizer: str = "qwen3",
    seed: int = 0,
    **shape: int | float | bool | str | None,
) -> Path:
    """Write a random-weight Qwen3 checkpoint (safetensors + config + tokenizer files);
    `shape` as random_qwen3 takes it (hidden_size, num_layers, max_position_embeddings...)."""
    from tokenizers import Tokenizer as TK

    arch = shape.get("arch", "qwen3")
    if arch not in ARCHS:
        raise UsageError(f"--arch {arch}: not one of {', '.join(ARCHS)}", hint="--arch llama")

    tdir = _tokenizer_dir(tokenizer)
    cfg_json = (
        json.loads((tdir / "tokenizer_config.json").read_text())
        if (tdir / "tokenizer_config.json").is_file()
        else {}
    )
    eos = cfg_json.get("eos_token")
    eos = eos.get("content") if isinstance(eos, dict) else eos
    eos_id = TK.from_file(str(tdir / "tokenizer.json")).token_to_id(eos) if eos else None
    model = random_qwen3(tdir, seed=seed, eos_token_id=eos_id, **shape)
    return save_checkpoint(model, tdir, Path(out_dir))


def random_qwen3(
    tokenizer_dir: Path,
    *,
    seed: int,
    eos_token_id: int | None,
    tie_word_embeddings: bool = True,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 32768,
    head_dim: int = 32,
    embed_std: float | None = None,
    arch: str = "qwen3",
):
    """A random-weight Qwen3ForCausalLM, or LlamaForCausalLM with `arch="llama"` (float32,
    eval mode), over the tokenizer's vocabulary; the same arguments give the same weights.
    The defaults are servable by vLLM's CPU build (its attention needs a head size of at
    least 32) and the window (32,768) holds the example tasks' first prompt (~6k tokens)
    with room for several turns."""
    torch = _torch()
    from tokenizers import Tokenizer as TK
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    # Llama is Qwen3 without the per-head RMSNorm on queries and keys. That norm fixes
    # |q| and |k| (its gains are not trained by a LoRA adapter), which bounds how sharply a
    # head can attend: a random-init model then has to learn to copy without sharp heads.
    config_cls, model_cls = {
        "qwen3": (Qwen3Config, Qwen3ForCausalLM),
        "llama": (LlamaConfig, LlamaForCausalLM),
    }[arch]
    tk = TK.from_file(str(tokenizer_dir / "tokenizer.json"))
    config = config_cls(
        vocab_size=tk.get_vocab_size(with_added_tokens=True),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        rms_norm_eps=1e-6,
        rope_theta=1_000_000.0,
        eos_token_id=eos_token_id,
        bos_token_id=None,
        pad_token_id=tk.token_to_id("<|endoftext|>"),
    )
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32).eval()
    if embed_std is not None:
        # Tied embeddings at the default scale (0.02) cap the logit a final-normed hidden
        # state can give one token at ~|h|*|e| (a few nats over a 151k vocabulary); a larger
        # scale lifts that cap. Drawn from a stream of its own so the rest is unchanged.
        g = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            model.model.embed_tokens.weight.normal_(0.0, embed_std, generator=g)
    return model


def save_checkpoint(
    model, tokenizer_dir: Path, out: Path, *, force: bool = False, files: dict | None = None
) -> Path:
    """The model (safetensors + config), the tokenizer's files and `files` (name -> bytes)
    written to `out` at once."""
    from apexrl.artifacts.atomic import atomic_dir

    with atomic_dir(out, force=force) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        for name in TOKENIZER_FILES:
            if (tokenizer_dir / name).is_file():
                shutil.copyfile(tokenizer_dir / name, tmp / name)
        for name, data in (files or {}).items():
            (tmp / name).write_bytes(data)
    return out
