"""`apexrl engine`: local inference engines speaking the /v1/completions contract."""

from __future__ import annotations

import typer

from apexrl.cli import output

app = typer.Typer(
    help="Inference engines: a local CPU engine for small checkpoints (vLLM's HTTP contract).",
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
) -> None:
    """Write a random-weight Qwen3-architecture checkpoint (for tests and smoke runs)."""
    from apexrl.engine.local import make_tiny_checkpoint

    path = make_tiny_checkpoint(
        out, tokenizer=tokenizer, seed=seed, hidden_size=hidden_size, num_layers=layers
    )
    typer.echo(str(path))


@app.command()
def serve(
    model: str = typer.Option(..., "--model", "-m", help="Hugging Face checkpoint directory."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", help="Port (0 picks a free one)."),
    served_model_name: str = typer.Option(
        None, "--served-model-name", help="Name clients send as `model` (default: dir name)."
    ),
    max_model_len: int = typer.Option(None, "--max-model-len", help="Context window."),
    threads: int = typer.Option(None, "--threads", help="torch CPU threads."),
) -> None:
    """Serve a checkpoint on CPU: POST /v1/completions (token-id prompts), GET /v1/models, /health.

    Prints {"url": ..., "model": ...} on stdout once listening; stops on Ctrl-C.
    """
    from apexrl.engine.local import EngineServer, LocalEngine

    engine = LocalEngine(
        model, served_model_name=served_model_name, max_model_len=max_model_len, threads=threads
    )
    server = EngineServer(engine, host=host, port=port)
    output.emit_records([{"url": server.url, "model": engine.name}], json_out=True)
    output.info(f"serving {engine.name} on {server.url} (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
