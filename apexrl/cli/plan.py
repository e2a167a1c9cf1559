"""`apexrl plan concurrency`: the KV-cache concurrency planner (apexrl/train/concurrency.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output

app = typer.Typer(help="Capacity planning: KV-cache rollout concurrency.", no_args_is_help=True)


@app.command("concurrency")
def concurrency(
    model_config: Path = typer.Option(
        ..., "--model-config", help="The model's config.json (or its folder)."
    ),
    gpu_memory: float = typer.Option(..., "--gpu-memory", help="GB per GPU (H200: 141)."),
    engines: int = typer.Option(1, "--engines", help="Inference engines."),
    tp: int = typer.Option(1, "--tp", help="Tensor parallel size (GPUs per engine)."),
    gpu_mem_util: float = typer.Option(0.9, "--gpu-mem-util", help="vLLM gpu_memory_utilization."),
    max_model_len: int | None = typer.Option(
        None, "--max-model-len", help="Cap on one sequence's tokens."
    ),
    avg_tokens: int = typer.Option(
        32768, "--avg-tokens", help="Average trajectory length in tokens."
    ),
    overhead_gb: float = typer.Option(
        0.0, "--overhead-gb", help="Reserve per GPU (activations, graphs)."
    ),
    kv_cache_tokens: int | None = typer.Option(
        None,
        "--kv-cache-tokens",
        help="Measured KV cache per engine (vLLM's 'GPU KV cache size: N tokens'); replaces "
        "the memory arithmetic.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """KV-cache bytes per token, memory left after weights, tokens and trajectories that fit."""
    from apexrl.errors import UsageError
    from apexrl.train.concurrency import load_shape, plan_concurrency

    if not model_config.exists():
        raise UsageError(f"model config not found: {model_config}")
    shape = load_shape(model_config)
    plan = plan_concurrency(
        shape,
        gpu_memory_gb=gpu_memory,
        engines=engines,
        tp=tp,
        gpu_mem_util=gpu_mem_util,
        max_model_len=max_model_len,
        avg_tokens=avg_tokens,
        overhead_gb_per_gpu=overhead_gb,
        kv_cache_tokens=kv_cache_tokens,
    )
    for line in plan.lines():
        output.info(line)
    if json_out or not output.stdout_is_terminal():
        output.emit_records([plan], json_out=True)
    else:
        typer.echo(plan.concurrency)
