"""`apexrl engine`: inference engines behind the /v1/completions token-id contract."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output
from apexrl.cli.options import HOST
from apexrl.engine.registry import engine_choices
from apexrl.errors import UsageError

app = typer.Typer(
    help="Inference engines: vLLM (GPU, or its CPU build from `make vllm`), a local CPU "
    "engine for small checkpoints (same /v1/completions contract).",
    no_args_is_help=True,
)


@app.command("make-tiny")
def make_tiny(
    out: str = typer.Argument(..., help="Directory to write the checkpoint to."),
    tokenizer: str = typer.Option(
        "qwen3", "--tokenizer", "-t", help="Tokenizer directory, or 'qwen3' (bundled)."
    ),
    seed: int = typer.Option(0, "--seed", help="Weight initialisation seed."),
    hidden_size: int = typer.Option(64, "--hidden-size"),
    layers: int = typer.Option(2, "--layers"),
    window: int = typer.Option(
        32768, "--window", min=16, help="Context window (max_position_embeddings), tokens."
    ),
    heads: int = typer.Option(4, "--heads", min=1, help="Attention heads."),
    kv_heads: int = typer.Option(2, "--kv-heads", min=1, help="Key/value heads (divides --heads)."),
    head_dim: int = typer.Option(
        32, "--head-dim", min=32, help="Size of one head (vLLM's CPU build needs 32 or more)."
    ),
    intermediate_size: int = typer.Option(128, "--intermediate-size", min=1, help="MLP width."),
    embed_std: float = typer.Option(
        None,
        "--embed-std",
        min=0.0,
        help="Standard deviation of the (input) embeddings' random init (default: the "
        "architecture's 0.02). Tied embeddings need a larger one for sharp logits.",
    ),
    arch: str = typer.Option(
        "qwen3",
        "--arch",
        help="qwen3, or llama (no norm on queries and keys: heads a LoRA adapter can sharpen).",
    ),
    untied: bool = typer.Option(
        False,
        "--untied",
        help="Separate input and output embeddings (a LoRA adapter may then train the "
        "output layer: [jax] train_unembed).",
    ),
) -> None:
    """Write a random-weight Qwen3- or Llama-architecture checkpoint (for tests and smoke runs).

    The defaults are servable by both the local engine and vLLM's CPU build (head size
    32), with a window that holds the example tasks' prompts for several turns."""
    from apexrl.engine.tiny import make_tiny_checkpoint

    output.refuse_dash(out, "OUT", "a checkpoint folder")
    if heads % kv_heads:
        raise UsageError(
            f"--kv-heads {kv_heads} does not divide --heads {heads}",
            hint="each key/value head serves a whole group of heads: e.g. --heads 8 --kv-heads 4",
        )
    path = make_tiny_checkpoint(
        out,
        tokenizer=tokenizer,
        seed=seed,
        hidden_size=hidden_size,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        embed_std=embed_std,
        arch=arch,
        max_position_embeddings=window,
        tie_word_embeddings=not untied,
    )
    output.emit_path(path)


@app.command()
def serve(
    model_arg: str = typer.Argument(
        None, metavar="MODEL", help="Hugging Face model id or local checkpoint directory."
    ),
    model_opt: str = typer.Option(None, "--model", "-m", help="Same as MODEL."),
    engine: str = typer.Option(
        "auto",
        "--engine",
        help="auto (vLLM with CUDA + the serve extra, else local), "
        + ", ".join(engine_choices()[1:])
        + ".",
    ),
    host: str = HOST,
    port: int = typer.Option(8000, "--port", "-p", help="Port (0 picks a free one)."),
    served_model_name: str = typer.Option(
        None, "--served-model-name", help="Name clients send as `model` (default: dir name / id)."
    ),
    max_model_len: int = typer.Option(None, "--max-model-len", help="Context window (tokens)."),
    tensor_parallel_size: int = typer.Option(
        None, "--tensor-parallel-size", "--tp", help="vLLM: default from the visible GPUs."
    ),
    threads: int = typer.Option(None, "--threads", help="Local engine: torch CPU threads."),
    vllm_python: str = typer.Option(
        None,
        "--vllm-python",
        help="vLLM: interpreter with vLLM (`make vllm`: .venv-vllm/bin/python); "
        "default: APEXRL_VLLM_PYTHON, else this one.",
    ),
    log_file: Path = typer.Option(
        Path("vllm.log"), "--log-file", help="vLLM: where its log is streamed."
    ),
    ready_timeout: float = typer.Option(
        1800.0, "--ready-timeout", help="vLLM: seconds to wait for /health."
    ),
) -> None:
    """Serve MODEL: POST /v1/completions (token-id prompts), GET /v1/models, /health.

    Prints one JSON line (engine, url, model, max_model_len, log) on stdout once it
    answers; stops cleanly on Ctrl-C or SIGTERM.
    """
    import signal
    import threading

    from apexrl.engine.serve import start_engine

    model = model_arg or model_opt
    if not model:
        raise UsageError("pass MODEL (an HF id or a checkpoint directory)")
    if engine not in engine_choices():
        raise UsageError(f"--engine {engine!r}: choose {', '.join(engine_choices())}")
    running = start_engine(
        model,
        engine=engine,  # type: ignore[arg-type]
        host=host,
        port=port,
        served_model_name=served_model_name,
        max_model_len=max_model_len,
        tensor_parallel_size=tensor_parallel_size,
        threads=threads,
        log_path=log_file,
        ready_timeout_s=ready_timeout,
        vllm_python=vllm_python,
    )
    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        rec = running.record()
        output.emit_records([rec], json_out=True)
        output.info(f"serving {running.model} ({running.kind}) on {running.url} (Ctrl-C to stop)")
        while not stop.wait(0.5):
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        running.stop()


@app.command()
def check(
    endpoint: str = typer.Option(..., "--endpoint", "-e", help="Engine base URL."),
    model: str = typer.Option(None, "--model", "-m", help="Served model name (default: first)."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds per request."),
) -> None:
    """Check a running engine: /v1/models, then one token-id completion with token ids back.

    Prints one JSON line: url, model, max_model_len, and the sampled ids. Exit 4 when
    unreachable, 1 when it does not honour the TITO contract (return_token_ids, logprobs).
    """
    from apexrl.engine.probe import probe_endpoint
    from apexrl.errors import ApexError
    from apexrl.tito.client import EngineClient, RetryPolicy

    info = probe_endpoint(endpoint, model=model, timeout_s=timeout)
    with EngineClient(
        info.url, model=info.model, timeout_s=timeout, retry=RetryPolicy(max_retries=1)
    ) as c:
        comp = c.complete([0, 1, 2], max_tokens=2, temperature=0.0)
    if comp.logprobs is None or len(comp.logprobs) != len(comp.token_ids):
        raise ApexError(
            f"engine at {info.url} returned no logprobs aligned with its token ids",
            hint="TITO needs logprobs for every sampled token",
        )
    output.emit_records(
        [
            {
                "url": info.url,
                "model": info.model,
                "max_model_len": info.max_model_len,
                "models": info.models,
                "sampled_ids": comp.token_ids,
                "finish_reason": comp.finish_reason,
            }
        ],
        json_out=True,
    )
