"""`apexrl tito`: token-in/token-out consistency checks."""

from __future__ import annotations

from enum import StrEnum

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_STDOUT
from apexrl.errors import ApexError, ExitCode, UsageError
from apexrl.tito import sampling

app = typer.Typer(
    help="Token-in/token-out (TITO): check that tokenizer, chat template and engine agree.",
    no_args_is_help=True,
)


class Mode(StrEnum):
    template = "template"
    replay = "replay"
    live = "live"


@app.command()
def verify(
    tokenizer: str = typer.Option(
        ...,
        "--tokenizer",
        "-t",
        help="Tokenizer: directory, tokenizer.json, 'qwen3' (bundled) or HF id.",
    ),
    chat_template: str = typer.Option(
        None,
        "--chat-template",
        help="Chat template: a .jinja file, a tokenizer_config.json, or a built-in name "
        "(qwen3-verbatim). Default: the tokenizer's own.",
    ),
    mode: Mode = typer.Option(Mode.template, "--mode", "-m", help="template | replay | live"),
    trajectories: str = typer.Option(
        None,
        "--trajectories",
        help="replay: JSONL of apexrl trajectories or ATIF JSON ('-' = stdin).",
    ),
    endpoint: str = typer.Option(
        None, "--endpoint", help="live: engine base URL (http://host:port)."
    ),
    model: str = typer.Option(None, "--model", help="live: model name to send to the engine."),
    conversations: int = typer.Option(
        2, "--conversations", min=1, help="live: conversations to drive."
    ),
    turns: int = typer.Option(3, "--turns", min=1, help="live: turns per conversation."),
    max_tokens: int = typer.Option(32, "--max-tokens", min=1, help="live: tokens per turn."),
    temperature: float = typer.Option(
        sampling.TEMPERATURE, "--temperature", help="live: sampling temperature."
    ),
    seed: int = typer.Option(0, "--seed", help="live: base sampling seed."),
    timeout: float = typer.Option(120.0, "--timeout", help="live: seconds per engine request."),
    logprob_tol: float = typer.Option(
        0.05, "--logprob-tol", help="live: max mean |Δlogprob| (engine vs sampled) to pass."
    ),
    no_thinking: bool = typer.Option(
        False, "--no-thinking", help="Render with enable_thinking=false (replay/live prompts)."
    ),
    allow: list[str] = typer.Option(
        [],
        "--allow",
        help="Accept drift of this cause (repeatable): whitespace, stop_token_overlap, ...",
    ),
    json_out: bool = JSON_STDOUT,
) -> None:
    """Check TITO consistency; one NDJSON finding per case/trajectory; exit 1 on any mismatch."""
    from apexrl.tito import verify as V
    from apexrl.tito.template import resolve_template
    from apexrl.tito.tokenizer import load_tokenizer

    V.check_allow(allow)
    tok = load_tokenizer(tokenizer)
    tname, src = resolve_template(chat_template, tok.chat_template)
    kwargs = {"enable_thinking": False} if no_thinking else {}

    if mode is Mode.template:
        from apexrl.tito.suite import builtin_cases

        cases = builtin_cases()
        if no_thinking:
            for c in cases:  # thinking off: every turn follows an empty think block
                c.kwargs["enable_thinking"] = False
                for m in c.messages:
                    if m.get("role") == "assistant":
                        m["reasoning_content"] = ""
        findings = V.verify_template(tok, src, cases)
    elif mode is Mode.replay:
        if not trajectories:
            raise UsageError("--mode replay needs --trajectories FILE")
        findings = _replay(tok, src, trajectories)
    else:
        if not endpoint:
            raise UsageError("--mode live needs --endpoint URL (e.g. http://127.0.0.1:8000)")
        from apexrl.tito.client import EngineClient, RetryPolicy

        with EngineClient(
            endpoint,
            model=model,
            timeout_s=timeout,
            retry=RetryPolicy(max_retries=2, base_delay_s=0.5),
        ) as client:
            client.fit_to_server(timeout_s=timeout)  # max_tokens from the server's window
            findings = V.verify_live(
                tok,
                src,
                client,
                template_name=tname,
                conversations=conversations,
                turns=turns,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                logprob_tol=logprob_tol,
                template_kwargs=kwargs,
            )
    V.apply_allow(findings, allow)
    advice = V.fix_advice(findings, tname, src)
    V.add_advice(findings, advice)
    output.emit_records(
        findings,
        json_out=json_out,
        columns=[
            "mode",
            "case",
            "status",
            "causes",
            "n_tokens",
            "drift_rate",
            "max_abs_dlogprob",
            "message",
        ],
        title=f"tito verify --mode {mode.value}",
    )
    _summary(findings, mode.value, tname)
    for f in findings:
        if f.unreadable_input:  # the input's fault, not the template's: file and line
            output.error(f.message)
    if advice:
        output.err_console().print(advice)
    if not all(f.ok for f in findings):
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _replay(tok, src, path: str):
    import os
    import sys
    import tempfile

    from apexrl.tito import verify as V

    tmp = None
    name = path  # what messages call the input (never the temp copy of stdin)
    if path == "-":
        fd, tmp = tempfile.mkstemp(suffix=".jsonl")
        with os.fdopen(fd, "wb") as fh:
            fh.write(sys.stdin.buffer.read())
        path, name = tmp, "stdin"
    elif not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    try:
        items = list(V.load_trajectories(path, name=name))
        if not items:
            raise ApexError(
                f"{name}: no trajectories",
                hint="pass JSONL of apexrl trajectories (schema tito-trajectory) or ATIF JSON",
            )
        out = []
        with output.progress("replay", total=len(items)) as advance:
            for f in V.verify_replay(tok, src, items):
                out.append(f)
                advance()
        return out
    finally:
        if tmp:
            os.unlink(tmp)


def _summary(findings, mode: str, template: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    con = output.err_console()
    table = Table(title=f"tito verify --mode {mode} (template: {template})")
    for col in ("case", "result", "cause", "at token", "detail"):
        table.add_column(col)
    for f in findings:
        d = f.first_divergence
        detail = ""
        if f.mean_abs_dlogprob is not None:
            detail = f"mean|Δlp| {f.mean_abs_dlogprob:.3g} max {f.max_abs_dlogprob:.3g}"
        elif f.drift_tokens:
            detail = f"drift {f.drift_tokens}/{f.n_tokens} tokens"
        elif d is not None and d.step:
            detail = d.step
        table.add_row(
            escape(f.case),
            "[green]pass[/]" if f.ok else f"[red]{f.status}[/]",
            ",".join(f.causes),
            "" if d is None else str(d.index),
            escape(detail or f.message[:120]),
        )
    con.print(table)
    bad = sum(not f.ok for f in findings)
    con.print(
        f"{len(findings) - bad}/{len(findings)} consistent" + (f", {bad} mismatched" if bad else "")
    )
