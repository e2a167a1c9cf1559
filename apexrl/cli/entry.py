"""The `apexrl` program's entry point: one fast path, then the Typer app.

An unchanged `image push` (the tag already names the image) is answered before Typer,
pydantic, Rich and httpx are loaded: with them start-up alone costs several times the
work. Only a plain command line takes this path (`image push ARCHIVE... --to R` with
--tag, -n/--concurrency, --retries, --timeout, --registry-endpoint, --json); anything
else, and any doubt along the way (a flag it does not know, a record file, an error,
a registry that does not answer a plain 200 with the same digest), goes to the Typer
app, which parses and reports as always. The path prints nothing until it is sure.
"""

from __future__ import annotations

import os
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


def parse_image_push(argv: list[str]) -> dict | None:
    """The options of a plain `image push` command line, or None for anything else."""
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
            name, eq, value = a.partition("=")
            key = _VALUE_OPTIONS.get(name)
            if key is None or key in opts:
                return None
            if not eq:
                i += 1
                if i >= len(argv):
                    return None
                value = argv[i]
            opts[key] = value
        else:
            if a.endswith((".jsonl", ".ndjson")):
                return None
            opts["archives"].append(a)
        i += 1
    if not opts["archives"] or not opts.get("to"):
        return None
    try:
        concurrency = int(opts.get("concurrency", "4"))
        if "retries" in opts and int(opts["retries"]) < 1:
            return None
        opts["timeout"] = float(opts.get("timeout", "30"))
    except ValueError:
        return None
    if not 1 <= concurrency <= 64:
        return None
    opts.setdefault("tag", "{world_id}")
    if "registry_endpoint" not in opts:
        env = os.environ.get("APEXRL_REGISTRY_ENDPOINT")
        if env == "":
            return None
        opts["registry_endpoint"] = env
    return opts


def unchanged_push(argv: list[str]) -> bool:
    """Answer an unchanged re-push; False when it did nothing (the Typer app runs)."""
    opts = parse_image_push(argv)
    if opts is None:
        return False
    try:
        from pathlib import Path

        from apexrl.cli import output
        from apexrl.cli.image_noop import report_unchanged, unchanged
        from apexrl.registry.refs import check_tag, parse_reference
        from apexrl.worlds import oci

        dest = parse_reference(opts["to"], require_repo_only=True)
        tag = opts["tag"]
        if len(opts["archives"]) > 1 and "{" not in tag:
            return False
        plans = []
        for item in opts["archives"]:
            path = Path(item)
            if not path.exists():
                return False
            src = oci.open_image(path)
            world_id = src.world_id or src.ref_name or path.name.split(".")[0]
            t = check_tag(tag.format(world_id=world_id, digest12=src.manifest_digest[7:19]))
            plans.append((path, src, world_id, t))
        done = unchanged(dest, plans, opts["registry_endpoint"], opts["timeout"])
    except Exception:  # any doubt: the Typer app does it and reports
        return False
    if done is None:
        return False
    report_unchanged(dest, plans, done, opts["json_out"] or not output.stdout_is_terminal())
    return True


def main() -> None:
    if unchanged_push(sys.argv[1:]):
        sys.exit(0)
    from apexrl.cli.app import main as app_main

    app_main()
