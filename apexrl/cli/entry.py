"""The `apexrl` program's entry point: one fast path, then the Typer app.

`image push` runs before Typer and pydantic are loaded (and an unchanged re-push before
httpx and Rich too): loading them costs more than a no-op push and a good part of a big
one. Only a plain command line takes this path (`image push ARCHIVE... --to R` with
--tag, -n/--concurrency, --retries, --timeout, --registry-endpoint, --json); anything
else (--help, --dry-run, --debug, an option it does not know, a record file) and any
input it cannot open goes to the Typer app, which parses and reports as always. The
push itself is the same code (cli/image_push.py), its failures reported as the app
reports them (output.report_failure).
"""

from __future__ import annotations

import os
import re
import sys

_VALUE_OPTIONS = {
    "--to": "to",
    "--tag": "tag",
    "-n": "concurrency",
    "--concurrency": "concurrency",
    "--retries": "retries",
    "--timeout": "timeout",
    "--registry-endpoint": "registry_endpoint",
}
# Numbers as the fast path takes them: ASCII digits only, no sign, no leading zero, no
# spaces or underscores. Any other spelling goes to the Typer command, which decides.
_INT = re.compile(r"[1-9][0-9]{0,8}")
_SECONDS = re.compile(r"(?:0|[1-9][0-9]{0,8})(?:\.[0-9]{1,9})?")


def parse_image_push(argv: list[str]) -> dict | None:
    """The options of a plain `image push` command line, or None for anything else.

    Never more permissive than the Typer command: what this takes, Typer takes with the
    same values (tests/images/test_push_grammar.py enumerates the grammar); a value it
    is unsure of (a short option spelled `-n=4` or `-n4`, a number in any but the plain
    ASCII spelling, a value that looks like an option) sends the line to Typer."""
    if len(argv) < 2 or argv[0] != "image" or argv[1] != "push":
        return None
    opts: dict = {"archives": [], "json_out": False}
    i = 2
    while i < len(argv):
        a = argv[i]
        if a == "--json":
            if opts["json_out"]:
                return None
            opts["json_out"] = True
        elif a.startswith("-"):
            name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
            key = _VALUE_OPTIONS.get(name)
            if key is None or key in opts:
                return None
            if not eq:
                i += 1
                if i >= len(argv):
                    return None
                value = argv[i]
            if not value or value.startswith("-"):  # Typer refuses (or names) it
                return None
            opts[key] = value
        else:
            if a.endswith((".jsonl", ".ndjson")):
                return None
            opts["archives"].append(a)
        i += 1
    if not opts["archives"] or not opts.get("to"):
        return None
    from apexrl.cli.image_push import (
        DEFAULT_CONCURRENCY,
        DEFAULT_TAG,
        DEFAULT_TIMEOUT_S,
        MAX_CONCURRENCY,
    )

    for key in ("concurrency", "retries"):
        if key in opts and not _INT.fullmatch(opts[key]):
            return None
    if "timeout" in opts and not _SECONDS.fullmatch(opts["timeout"]):
        return None
    opts["concurrency"] = int(opts.get("concurrency", DEFAULT_CONCURRENCY))
    opts["retries"] = int(opts["retries"]) if "retries" in opts else None
    opts["timeout"] = float(opts.get("timeout", DEFAULT_TIMEOUT_S))
    if not 1 <= opts["concurrency"] <= MAX_CONCURRENCY or opts["timeout"] <= 0:
        return None
    opts.setdefault("tag", DEFAULT_TAG)
    if "registry_endpoint" not in opts:
        env = os.environ.get("APEXRL_REGISTRY_ENDPOINT")
        if env == "" or (env and env.startswith("-")):
            return None
        opts["registry_endpoint"] = env
    return opts


def fast_image_push(argv: list[str]) -> int | None:
    """Run a plain `image push` without Typer: its exit code, or None when the command
    line or its inputs need the Typer app (nothing has been printed then)."""
    opts = parse_image_push(argv)
    if opts is None:
        return None
    try:
        from pathlib import Path

        from apexrl.cli import output
        from apexrl.cli.image_push import plan_pushes, run_push
        from apexrl.images.refs import parse_reference

        dest = parse_reference(opts["to"], require_repo_only=True)
        paths = [Path(item) for item in opts["archives"]]
        if not all(p.exists() for p in paths):
            return None
        plans = plan_pushes([(p, None) for p in paths], opts["tag"])
        as_json = opts["json_out"] or not output.stdout_is_terminal()
    except Exception:  # bad input: the Typer app says what is wrong, as always
        return None
    try:
        return run_push(
            dest,
            plans,
            endpoint=opts["registry_endpoint"],
            concurrency=opts["concurrency"],
            retries=opts["retries"],
            timeout=opts["timeout"],
            as_json=as_json,
        )
    except BaseException as e:  # reported as the Typer app reports it
        code = output.report_failure(e, debug=bool(os.environ.get("APEXRL_DEBUG")))
        if code is None:
            raise
        return code


def main() -> None:
    code = fast_image_push(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from apexrl.cli.app import main as app_main

    app_main()
