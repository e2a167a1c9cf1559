"""KV-cache planner against hand-computed values (a dense and a hybrid config)."""

from __future__ import annotations

import json

import pytest

from apexrl.errors import BadRecordError
from apexrl.train.concurrency import estimate_params, load_shape, plan_concurrency

DENSE = {  # Llama-3-8B shape
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "torch_dtype": "bfloat16",
    "num_parameters": 8.0e9,
}

HYBRID = {  # a small Qwen3-Next-style model: 3 linear-attention layers per full one
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "layer_types": ["linear_attention"] * 3
    + ["full_attention"]
    + ["linear_attention"] * 3
    + ["full_attention"],
    "linear_num_value_heads": 8,
    "linear_num_key_heads": 4,
    "linear_key_head_dim": 64,
    "linear_value_head_dim": 64,
    "linear_conv_kernel_dim": 4,
    "torch_dtype": "bfloat16",
    "num_parameters": 2.0e9,
}


def write(tmp_path, cfg):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


def test_dense(tmp_path):
    shape = load_shape(write(tmp_path, DENSE))
    assert (shape.full_attention_layers, shape.head_dim, shape.linear_layers) == (32, 128, 0)
    p = plan_concurrency(
        shape, gpu_memory_gb=80, engines=4, tp=2, gpu_mem_util=0.9, avg_tokens=32768
    )
    # 2 (K,V) x 32 layers x 8 heads (8 >= tp: sharded, not replicated) x 128 x 2 bytes
    assert p.kv_bytes_per_token == 131_072
    assert p.budget_bytes == pytest.approx(144e9)  # 2 x 80 GB x 0.9
    assert p.weights_bytes == 16e9  # 8e9 params x 2 bytes
    assert p.cache_bytes == pytest.approx(128e9)
    assert p.tokens_per_engine == 976_562  # 128e9 / 131072
    assert p.per_engine == 29  # 128e9 / (32768 x 131072) = 29.8
    assert p.concurrency == 116
    assert p.state_bytes_per_seq == 0


def test_hybrid(tmp_path):
    shape = load_shape(write(tmp_path, HYBRID))
    assert (shape.full_attention_layers, shape.linear_layers) == (2, 6)
    p = plan_concurrency(
        shape,
        gpu_memory_gb=24,
        engines=2,
        tp=4,
        gpu_mem_util=0.5,
        max_model_len=65536,
        avg_tokens=100_000,
    )
    # 2 KV heads < tp 4: replicated, 4 heads per engine: 2 x 2 layers x 4 x 256 x 2 bytes
    assert p.kv_heads_per_engine == 4
    assert p.kv_bytes_per_token == 8192
    # 6 layers x (8 x 64 x 64 recurrent + 3 x (4x64x2 + 8x64) conv) x 2 bytes
    assert p.state_bytes_per_seq == 430_080
    assert p.cache_bytes == pytest.approx(44e9)  # 4 x 24 GB x 0.5 - 2e9 x 2
    assert p.tokens_per_engine == 5_371_093
    assert p.avg_tokens == 65536  # capped by max_model_len
    assert p.per_engine == 81  # 44e9 / (65536 x 8192 + 430080) = 81.9
    assert p.concurrency == 162


def test_param_estimate_without_num_parameters():
    cfg = {k: v for k, v in DENSE.items() if k != "num_parameters"}
    assert estimate_params(cfg) == pytest.approx(8.03e9, rel=0.01)


def test_weights_that_do_not_fit(tmp_path):
    shape = load_shape(write(tmp_path, DENSE))
    with pytest.raises(BadRecordError, match="do not fit"):
        plan_concurrency(shape, gpu_memory_gb=16, engines=1, tp=1, gpu_mem_util=0.9)


def test_cli(runner, tmp_path):
    from apexrl.cli.app import app

    cfg = write(tmp_path, DENSE)
    res = runner.invoke(
        app,
        [
            "plan",
            "concurrency",
            "--model-config",
            str(cfg),
            "--gpu-memory",
            "80",
            "--engines",
            "4",
            "--tp",
            "2",
            "--avg-tokens",
            "32768",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["concurrency"] == 116
    assert "KV bytes/token/engine" in res.stderr and "4 engines x 29 = 116" in res.stderr
    res = runner.invoke(
        app,
        [
            "plan",
            "concurrency",
            "--model-config",
            str(tmp_path / "nope.json"),
            "--gpu-memory",
            "80",
        ],
    )
    assert res.exit_code == 2


def test_measured_kv_cache_replaces_the_memory_arithmetic(runner, tmp_path):
    from apexrl.cli.app import app

    cfg = write(tmp_path, DENSE)
    args = ["plan", "concurrency", "--model-config", str(cfg), "--gpu-memory", "80"]
    args += ["--engines", "10", "--tp", "8", "--avg-tokens", "160000", "--json"]
    res = runner.invoke(app, [*args, "--kv-cache-tokens", "8800000"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["tokens_per_engine"] == 8_800_000
    assert plan["per_engine"] == 55 and plan["concurrency"] == 550
