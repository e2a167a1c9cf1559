"""`apexrl peer ...`: Mercor's archipelago (servers, grading runner), fetched on demand."""

from __future__ import annotations

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_TOO

app = typer.Typer(
    help="Mercor's archipelago, the peer apexrl is measured against: fetch it at a pinned commit.",
    no_args_is_help=True,
)


@app.command("fetch")
def fetch(
    commit: str = typer.Option(
        None, "--commit", help="Commit to check out (default: the one apexrl is pinned to)."
    ),
    remote: str = typer.Option(
        None, "--from", help="Repository to clone: a git URL or path (default: archipelago's)."
    ),
    json_out: bool = JSON_TOO,
) -> None:
    """Clone archipelago with git at a pinned commit into apexrl's cache, verify the
    commit, and record it: commands that need archipelago (world verify, world serve
    --runtime archipelago, eval --grader archipelago) then find it there unless
    --peer/--archipelago or $APEXRL_ARCHIPELAGO names another checkout."""
    from dataclasses import asdict

    from apexrl.artifacts import archipelago_cache as cache

    rec = cache.fetch(commit or cache.PINNED_COMMIT, remote or cache.PUBLIC_REPO, say=output.info)
    output.info(f"archipelago {rec.commit[:12]} from {rec.remote} at {rec.path}")
    output.emit_records([asdict(rec)], json_out=json_out, columns=["commit", "path", "remote"])


@app.command("where")
def where(json_out: bool = JSON_TOO) -> None:
    """Print the archipelago checkout commands use ($APEXRL_ARCHIPELAGO, else the fetched
    one); exit 2 when there is none."""
    import os

    from apexrl.artifacts import archipelago_cache as cache

    env = os.environ.get(cache.CHECKOUT_ENV)
    rec = cache.fetched()
    if env:
        row = {"path": env, "from": f"${cache.CHECKOUT_ENV}", "commit": None}
    elif rec:
        row = {"path": rec.path, "from": "apexrl peer fetch", "commit": rec.commit}
    else:
        raise cache.missing_checkout()
    output.emit_records([row], json_out=json_out, columns=["path", "from", "commit"])
