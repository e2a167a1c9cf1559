"""`apexrl world ...`: serve a world's MCP tools, snapshot and diff world state, pack images."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output
from apexrl.cli.options import HOST, JSON_EVEN
from apexrl.cli.world_pack import pack

app = typer.Typer(
    help="Serve a world's MCP tool servers, snapshot and diff world state, pack world images.",
    no_args_is_help=True,
)


@app.command("serve")
def serve(
    world: Path = typer.Argument(
        ..., help="World folder or world zip (filesystem/ and .apps_data/)."
    ),
    host: str = HOST,
    port: int = typer.Option(
        None,
        "--port",
        "-p",
        help="Port to listen on (0 = any free port; default: the profile's, 8080 or 8000).",
    ),
    apps: list[str] = typer.Option(
        None,
        "--apps",
        help="Servers to mount (repeat or comma-separate): files, docs, sheets, slides, pdf, mail, "
        "chat, calendar, code. Default: the world's apps, else all.",
    ),
    workdir: Path = typer.Option(
        None, "--workdir", help="Extract a world zip here (kept) instead of a temp folder."
    ),
    world_id: str = typer.Option(None, "--world-id", help="World id (default: folder/zip name)."),
    ready_timeout: float = typer.Option(
        30.0, "--ready-timeout", help="Seconds to wait for readiness."
    ),
    profile: str = typer.Option(
        "apexrl",
        "--profile",
        help="Image contract to serve: apexrl (port 8080) or mercor (Mercor's world images: "
        "port 8000, /mcp, /health and POST /data/snapshot, the world's snapshot tar.gz).",
    ),
    task_slug: str = typer.Option(
        None, "--task-slug", help="The task this world serves (shown on /health)."
    ),
    runtime: str = typer.Option(
        "apexrl",
        "--runtime",
        help="Whose servers: apexrl (its own) or archipelago (the checkout's own servers, "
        "each in bubblewrap over the world at /filesystem and /.apps_data).",
    ),
    peer: Path = typer.Option(
        None,
        "--peer",
        help="The archipelago checkout for --runtime archipelago (default: "
        "$APEXRL_ARCHIPELAGO, else `apexrl peer fetch`'s). Its runtimes are built on first use.",
    ),
) -> None:
    """Serve the world's MCP tools over streamable HTTP at /mcp/ (with /health).

    Prints one JSON line (url, health_url, servers, n_tools) once every server answers,
    then serves until Ctrl-C or SIGTERM (a zip's extracted world is removed either way).
    A server that cannot come up fails the command (exit 1)."""
    from apexrl.envs.serve import serve_world

    def on_ready(rec) -> None:
        output.emit_records([rec], json_out=True)
        output.info(f"serving {rec.world_id} at {rec.url} ({rec.n_tools} tools); Ctrl-C to stop")

    serve_world(
        world,
        profile=profile,
        runtime=runtime,
        peer=peer,
        apps=apps or None,
        workdir=workdir,
        world_id=world_id,
        task_slug=task_slug,
        host=host,
        port=port,
        ready_timeout_s=ready_timeout,
        on_ready=on_ready,
        on_info=output.info,
    )


@app.command("tools")
def tools_cmd(
    world: Path = typer.Argument(..., help="World folder or world zip."),
    apps: list[str] = typer.Option(
        None, "--apps", help="Only these apps (as for `world serve`). Default: the world's."
    ),
    json_out: bool = JSON_EVEN,
) -> None:
    """List the tools an agent sees in a world: one record per tool (name, server,
    description, input JSON schema), in listing order. Exit 1 when a server cannot load
    its data (its tools are then missing; the failure is named on stderr)."""
    from apexrl.errors import ApexError, ExitCode
    from apexrl.worlds.tools import list_tools
    from apexrl.worlds.world import open_world

    w = open_world(world, apps=apps or None)
    try:
        records, failed = list_tools(w)
    finally:
        w.close()
    output.emit_records(
        records, json_out=json_out, columns=["name", "server", "args"], title="tools"
    )
    if failed:
        raise ApexError(
            "server(s) did not come up: " + "; ".join(f"{s.name}: {s.detail}" for s in failed),
            code=ExitCode.CHECK_FAILED,
        )


@app.command("snapshot")
def snapshot_cmd(
    world: Path = typer.Argument(..., help="World folder (or zip)."),
    out: Path = typer.Option(
        ...,
        "-o",
        "--out",
        help="Snapshot tar to write (.tar or .tar.gz); - writes the tar to stdout "
        "(the record then goes to stderr).",
    ),
    files: bool = typer.Option(False, "--files", help="Include the per-file list in the record."),
) -> None:
    """Snapshot a world's state (tar of filesystem/ and .apps_data/); prints one record."""
    import tempfile

    from apexrl.worlds.snapshot import snapshot
    from apexrl.worlds.world import open_world

    to_stdout = str(out) == "-"
    with tempfile.TemporaryDirectory(prefix="apexrl-snapshot-") as tmp:
        w = open_world(world)
        try:
            rec = snapshot(w, Path(tmp) / "snapshot.tar" if to_stdout else out)
        finally:
            w.close()
        if not files:
            rec.files = []
        if to_stdout:
            import shutil
            import sys

            with open(Path(tmp) / "snapshot.tar", "rb") as fh:
                shutil.copyfileobj(fh, sys.stdout.buffer, 1 << 20)
            sys.stdout.buffer.flush()
            rec.tar_path = "-"
            output.info(rec.model_dump_json())
            return
    output.emit_records([rec], columns=["world_id", "tar_path", "n_files", "size_bytes", "sha256"])


@app.command("diff")
def diff_cmd(
    before: Path = typer.Argument(..., help="Snapshot tar or world folder before the run."),
    after: Path = typer.Argument(..., help="Snapshot tar or world folder after the run."),
    json_out: bool = JSON_EVEN,
) -> None:
    """List files created, modified and deleted between two snapshots (one record each)."""
    from apexrl.worlds.snapshot import diff

    d = diff(before, after)
    output.emit_records(
        [c.model_dump(mode="json") for c in d.changes],
        json_out=json_out,
        columns=["change", "path", "size_before", "size_after"],
        title=f"{len(d.created)} created, {len(d.modified)} modified, {len(d.deleted)} deleted",
    )


@app.command("verify")
def verify_cmd(
    world: Path = typer.Argument(..., help="World folder or world zip (published shape)."),
    peer: Path = typer.Option(
        None,
        "--peer",
        help="An archipelago checkout (default: $APEXRL_ARCHIPELAGO, else the one "
        "`apexrl peer fetch` put in apexrl's cache). Its runtimes are built on first use.",
    ),
    servers: list[str] = typer.Option(
        None,
        "--servers",
        help="Only these servers (filesystem, word, excel, powerpoint, pdfs, mail, chat, "
        "calendar, code_execution; comma-separated or repeated). Default: all nine.",
    ),
    json_out: bool = JSON_EVEN,
) -> None:
    """Run one deterministic case set on apexrl's tool servers and on archipelago's own
    (built from the checkout, run in bubblewrap), over two copies of the world; compare
    what each returns and the files each leaves. One record per case
    ({server, tool, args, same, apexrl, peer}), then a summary record; the summary line
    (N/M identical, by server) goes to stderr. Exit 0 when every case is identical, 1
    otherwise."""
    import sys

    from apexrl.errors import UsageError
    from apexrl.peer.runtime import by_name, find_checkout, runtimes
    from apexrl.peer.verify import verify

    chosen = [x.strip() for s in servers or [] for x in s.split(",") if x.strip()]
    known = by_name()
    unknown = [x for x in chosen if x not in known]
    if unknown:
        raise UsageError(
            f"unknown server(s): {', '.join(unknown)}", hint=f"known: {', '.join(known)}"
        )
    if not world.exists():
        raise UsageError(f"world {world} does not exist", hint="pass a world folder or a .zip")
    checkout = find_checkout(peer)
    rts = runtimes(checkout, servers=chosen or None, on_progress=output.info)
    plain = json_out or not output.stdout_is_terminal()

    def emit(rec) -> None:
        if plain:
            output.emit_records([rec], json_out=True)
        else:
            mark = "same" if rec.same else "DIFF"
            sys.stdout.write(f"{mark}  {rec.server}.{rec.tool} {rec.args}\n")

    summary = verify(world, rts, emit=emit, on_progress=output.info)
    if plain:
        output.emit_records(
            [{**summary.model_dump(mode="json"), "line": summary.line()}], json_out=True
        )
    output.info(summary.line())
    if not summary.ok:
        raise typer.Exit(1)


app.command("pack")(pack)
