"""KV-cache concurrency planner: how many trajectories fit in the engines at once.

Arithmetic (every step is shown in `ConcurrencyPlan.lines()`):

- KV bytes per token, per engine = 2 (K and V) x full-attention layers x KV heads
  held per engine x head_dim x dtype bytes. Under tensor parallelism each rank
  holds max(1, kv_heads / tp) heads: when tp > kv_heads the heads are replicated,
  so an engine holds max(kv_heads, tp) heads in all (vLLM's behaviour).
- Hybrid models (linear attention / Gated DeltaNet layers) keep no per-token cache
  in those layers but a fixed state per sequence: layers x (value heads x
  key_head_dim x value_head_dim + (conv_kernel - 1) x conv channels) x dtype bytes.
- Memory for the cache per engine = tp x (GPU GB x gpu_mem_util) - weights
  (params x dtype bytes) - overhead per GPU x tp.
- Tokens that fit = cache bytes / KV bytes per token (a trajectory at max_model_len
  caps what one sequence may take).
- Concurrency per engine = floor(cache bytes / (avg_tokens x KV bytes per token +
  per-sequence state)); the cluster's = engines x that.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apexrl.errors import BadRecordError

GB = 1e9  # GPU memory as vendors quote it (H200: 141 GB)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "float8_e4m3fn": 1, "auto": 2}


class ModelShape(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = ""
    num_hidden_layers: int
    num_key_value_heads: int
    head_dim: int
    full_attention_layers: int  # layers with a per-token KV cache
    linear_layers: int = 0
    linear_num_value_heads: int = 0
    linear_num_key_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel_dim: int = 0
    params: float  # total parameters
    dtype_bytes: int = 2
    kv_dtype_bytes: int = 2


def _text_config(cfg: dict) -> dict:
    # multimodal checkpoints nest the language model's config
    return cfg.get("text_config") or cfg.get("language_config") or cfg


def estimate_params(c: dict) -> float:
    """Parameters from a config.json (embeddings, attention, MLP or experts)."""
    h = c["hidden_size"]
    v = c.get("vocab_size", 0)
    n = c["num_hidden_layers"]
    heads = c.get("num_attention_heads", 0)
    kv = c.get("num_key_value_heads", heads)
    hd = c.get("head_dim") or (h // heads if heads else 0)
    attn = h * hd * (heads + 2 * kv) + heads * hd * h
    n_exp = c.get("num_experts") or c.get("n_routed_experts") or 0
    if n_exp:
        inter = c.get("moe_intermediate_size") or c["intermediate_size"]
        shared = c.get("shared_expert_intermediate_size") or 0
        mlp = 3 * h * inter * n_exp + 3 * h * shared + h * n_exp
    else:
        mlp = 3 * h * c["intermediate_size"]
    emb = v * h * (1 if c.get("tie_word_embeddings") else 2)
    return float(n * (attn + mlp) + emb)


def shape_from_config(cfg: dict, name: str = "") -> ModelShape:
    """A ModelShape from a Hugging Face config.json (dense or hybrid)."""
    c = _text_config(cfg)
    try:
        n = int(c["num_hidden_layers"])
        heads = int(c.get("num_attention_heads", 0))
        kv = int(c.get("num_key_value_heads") or heads)
        hd = int(c.get("head_dim") or c["hidden_size"] // heads)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        raise BadRecordError(name or "model config", f"missing or bad field: {e}") from None
    layer_types = c.get("layer_types")
    if layer_types:
        full = sum(
            1 for t in layer_types if t in ("full_attention", "attention", "sliding_attention")
        )
        linear = sum(1 for t in layer_types if "linear" in t or t in ("mamba", "deltanet"))
    elif c.get("full_attention_interval"):
        full = n // int(c["full_attention_interval"])
        linear = n - full
    else:
        full, linear = n, 0
    dtype = str(c.get("torch_dtype") or cfg.get("torch_dtype") or c.get("dtype") or "bfloat16")
    params = float(cfg.get("num_parameters") or c.get("num_parameters") or estimate_params(c))
    return ModelShape(
        name=name,
        num_hidden_layers=n,
        num_key_value_heads=kv,
        head_dim=hd,
        full_attention_layers=full,
        linear_layers=linear,
        linear_num_value_heads=int(c.get("linear_num_value_heads") or 0),
        linear_num_key_heads=int(c.get("linear_num_key_heads") or 0),
        linear_key_head_dim=int(c.get("linear_key_head_dim") or 0),
        linear_value_head_dim=int(c.get("linear_value_head_dim") or 0),
        linear_conv_kernel_dim=int(c.get("linear_conv_kernel_dim") or 0),
        params=params,
        dtype_bytes=DTYPE_BYTES.get(dtype, 2),
        kv_dtype_bytes=DTYPE_BYTES.get(dtype, 2),
    )


def load_shape(path: str | Path) -> ModelShape:
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        cfg = json.loads(p.read_text("utf-8"))
    except json.JSONDecodeError as e:
        raise BadRecordError(str(p), f"not valid JSON: {e}") from None
    return shape_from_config(cfg, name=str(p))


class ConcurrencyPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    gpu_memory_gb: float
    gpu_mem_util: float
    engines: int
    tp: int
    overhead_gb_per_gpu: float
    kv_heads_per_engine: int
    kv_bytes_per_token: int  # per engine (all ranks)
    state_bytes_per_seq: int  # linear-attention state, per engine
    weights_bytes: float
    budget_bytes: float  # tp x GPU x util
    cache_bytes: float  # per engine, after weights and overhead
    tokens_per_engine: int
    max_model_len: int | None
    avg_tokens: int
    per_engine: int
    concurrency: int  # cluster-wide

    def lines(self) -> list[str]:
        g = 1 / GB
        out = [
            f"model {self.model}",
            f"KV heads per engine = max(kv_heads, tp) = {self.kv_heads_per_engine}",
            f"KV bytes/token/engine = 2 x layers_with_kv x {self.kv_heads_per_engine} heads x "
            f"head_dim x dtype = {self.kv_bytes_per_token:,} B",
        ]
        if self.state_bytes_per_seq:
            out.append(f"linear-attention state per sequence = {self.state_bytes_per_seq:,} B")
        out += [
            f"budget per engine = {self.tp} GPU x {self.gpu_memory_gb:g} GB x "
            f"{self.gpu_mem_util:g} = {self.budget_bytes * g:,.2f} GB",
            f"weights per engine = {self.weights_bytes * g:,.2f} GB; overhead = "
            f"{self.tp} x {self.overhead_gb_per_gpu:g} GB",
            f"KV cache per engine = {self.cache_bytes * g:,.2f} GB -> "
            f"{self.tokens_per_engine:,} tokens",
            f"per trajectory at {self.avg_tokens:,} tokens = "
            f"{(self.avg_tokens * self.kv_bytes_per_token + self.state_bytes_per_seq) * g:,.3f} GB",
            f"concurrency = {self.engines} engines x {self.per_engine} = {self.concurrency}",
        ]
        return out


def plan_concurrency(
    shape: ModelShape,
    *,
    gpu_memory_gb: float,
    engines: int,
    tp: int,
    gpu_mem_util: float = 0.9,
    max_model_len: int | None = None,
    avg_tokens: int = 32_768,
    overhead_gb_per_gpu: float = 0.0,
    kv_cache_tokens: int | None = None,
) -> ConcurrencyPlan:
    """kv_cache_tokens: the engine's measured KV cache ("GPU KV cache size: N tokens" in a
    vLLM log); when given it replaces the memory arithmetic for the cache."""
    if engines < 1 or tp < 1:
        raise BadRecordError("plan", "engines and tp must be >= 1")
    if not 0 < gpu_mem_util <= 1:
        raise BadRecordError("plan", f"gpu_mem_util {gpu_mem_util} must be in (0, 1]")
    kv_heads = max(shape.num_key_value_heads, tp)
    kv_per_tok = 2 * shape.full_attention_layers * kv_heads * shape.head_dim * shape.kv_dtype_bytes
    conv_channels = (
        shape.linear_num_key_heads * shape.linear_key_head_dim * 2
        + shape.linear_num_value_heads * shape.linear_value_head_dim
    )
    state = shape.linear_layers * (
        shape.linear_num_value_heads * shape.linear_key_head_dim * shape.linear_value_head_dim
        + max(shape.linear_conv_kernel_dim - 1, 0) * conv_channels
    )
    state_bytes = state * shape.kv_dtype_bytes
    budget = tp * gpu_memory_gb * GB * gpu_mem_util
    weights = shape.params * shape.dtype_bytes
    cache = budget - weights - tp * overhead_gb_per_gpu * GB
    if kv_cache_tokens:
        cache = float(kv_cache_tokens * kv_per_tok)
    if cache <= 0:
        raise BadRecordError(
            "plan",
            f"weights ({weights / GB:,.1f} GB) do not fit in {tp} x {gpu_memory_gb:g} GB x "
            f"{gpu_mem_util:g} per engine",
            hint="raise --tp or --gpu-mem-util",
        )
    tokens = kv_cache_tokens or (int(cache // kv_per_tok) if kv_per_tok else 0)
    seq_tokens = min(avg_tokens, max_model_len) if max_model_len else avg_tokens
    per_seq = seq_tokens * kv_per_tok + state_bytes
    per_engine = int(cache // per_seq) if per_seq else 0
    return ConcurrencyPlan(
        model=shape.name,
        gpu_memory_gb=gpu_memory_gb,
        gpu_mem_util=gpu_mem_util,
        engines=engines,
        tp=tp,
        overhead_gb_per_gpu=overhead_gb_per_gpu,
        kv_heads_per_engine=kv_heads,
        kv_bytes_per_token=kv_per_tok,
        state_bytes_per_seq=state_bytes,
        weights_bytes=weights,
        budget_bytes=budget,
        cache_bytes=cache,
        tokens_per_engine=tokens,
        max_model_len=max_model_len,
        avg_tokens=seq_tokens,
        per_engine=per_engine,
        concurrency=per_engine * engines,
    )


def shape_from_arch(arch, name: str) -> ModelShape:
    """A ModelShape from a recipe's [model.arch] table."""
    full = arch.full_attention_layers or arch.num_hidden_layers
    return ModelShape(
        name=name,
        num_hidden_layers=arch.num_hidden_layers,
        num_key_value_heads=arch.num_key_value_heads,
        head_dim=arch.head_dim,
        full_attention_layers=full,
        linear_layers=arch.num_hidden_layers - full,
        linear_num_value_heads=arch.linear_num_value_heads or 0,
        linear_num_key_heads=arch.linear_num_key_heads or 0,
        linear_key_head_dim=arch.linear_key_head_dim or 0,
        linear_value_head_dim=arch.linear_value_head_dim or 0,
        linear_conv_kernel_dim=arch.linear_conv_kernel_dim or 0,
        params=arch.params_b * 1e9,
        dtype_bytes=arch.dtype_bytes,
        kv_dtype_bytes=arch.dtype_bytes,
    )


def ceil_div(a: int, b: int) -> int:
    return math.ceil(a / b)
