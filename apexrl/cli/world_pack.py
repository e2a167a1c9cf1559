"""`apexrl world pack`: build reproducible OCI image archives of worlds, no daemon.

Registered on the `world` group by `apexrl.cli.world` (this module imports nothing of it)."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output
from apexrl.cli.options import JSON_STDOUT


def pack(
    srcs: list[Path] = typer.Argument(
        ..., help="World folders, world zips, or APEX dataset dirs (world_descriptions.json)."
    ),
    out: Path = typer.Option(..., "-o", "--out", help="Directory for <world_id>.oci.tar archives."),
    base: str = typer.Option(
        "scratch",
        "--base",
        help="Base image with Python >= 3.12: an OCI archive or layout path "
        "(oci-archive:PATH[:REF], oci:DIR[:REF]) or a registry reference "
        "(python:3.12-slim, HOST/REPO:TAG). 'scratch' = no base (the image cannot run alone).",
    ),
    deps: Path | None = typer.Option(
        None,
        "--deps",
        help="A `pip install --target DIR` directory of the runtime's dependencies, "
        "added as a shared layer at /opt/apexrl/deps.",
    ),
    runtime: Path | None = typer.Option(
        None,
        "--runtime",
        help="The apexrl package directory to put in the image (default: the running one).",
    ),
    port: int = typer.Option(
        None, "--port", help="Port the gateway listens on in the image (default: the profile's)."
    ),
    profile: str = typer.Option(
        "apexrl",
        "--profile",
        help="Image contract: apexrl (/world, port 8080) or mercor (Mercor's world images: "
        "/app/tools/start.sh <task_slug>, /filesystem and /.apps_data, port 8000, "
        "/mcp, /health, POST /data/snapshot).",
    ),
    level: int = typer.Option(6, "--level", min=1, max=9, help="gzip level of new layers."),
    layer_mb: int = typer.Option(
        64,
        "--layer-mb",
        min=0,
        help="Cut a world of more than this many MiB into up to 8 layers of about equal size "
        "(packed, pushed and pulled in parallel); 0 keeps every world in one layer.",
    ),
    registry_endpoint: str | None = typer.Option(
        None,
        "--registry-endpoint",
        envvar="APEXRL_REGISTRY_ENDPOINT",
        help="Base URL for registry API calls when pulling --base (the reference stays as given).",
    ),
    json_out: bool = JSON_STDOUT,
) -> None:
    """Build one OCI image archive per world: base layers + runtime layer + world layers.

    Reproducible: the same inputs give byte-identical archives; the base and
    runtime layers are shared by every world. Prints one record per world
    (world_id, archive, digest, size_bytes).
    """
    from apexrl.artifacts.models import PackedImageRecord
    from apexrl.envs.profiles import get_profile
    from apexrl.errors import ApexError, ExitCode
    from apexrl.images.pack import Packer, PackOptions
    from apexrl.worlds.sources import resolve_sources

    output.refuse_dash(out, "-o", "a folder of image archives")
    prof = get_profile(profile)
    worlds = resolve_sources(srcs)
    if base == "scratch":
        output.warn("no --base: the images hold no Python and cannot run by themselves")
    opts = PackOptions(
        out=out,
        base=base,
        deps=deps,
        runtime=runtime,
        port=prof.port if port is None else port,
        profile=prof.name,
        level=level,
        endpoint=registry_endpoint,
        layer_mb=layer_mb,
    )
    records = []
    failed = []
    as_json = json_out or not output.stdout_is_terminal()
    with Packer(opts) as packer:
        for w in worlds:
            try:
                if w.error:
                    raise w.error
                with output.progress(f"pack {w.world_id}", total=w.data_size or None) as advance:
                    packed = packer.pack(w, on_bytes=advance)
            except ApexError as e:
                output.error(f"world {w.world_id} ({w.where}): {e}")
                failed.append(e)
                continue
            rec = PackedImageRecord(
                world_id=packed.world_id,
                archive=str(Path(packed.archive).absolute()),
                digest=packed.digest,
                size_bytes=packed.size,
            )
            records.append(rec)
            if as_json:
                output.emit_records([rec], json_out=True)
    if not as_json:
        output.emit_records(records, title="world images")
    if failed:
        code = ExitCode.PARTIAL if records else failed[0].code
        raise typer.Exit(int(code))
