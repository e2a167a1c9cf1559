"""An unchanged `image push`, answered without the full registry client.

When every tag already names its image (one light HEAD each, standard library only),
the push has nothing to do: report exactly what it would have reported (progress on a
terminal, the per-image line, the records) without loading httpx or pydantic. Used by
`image push` and by the entry point's fast path (before Typer loads); no Typer here.
"""

from __future__ import annotations

from typing import Any

from apexrl.cli import output


def image_record(world_id: str, ref: str, digest: str, size_bytes: int) -> dict[str, Any]:
    """ImageRecord(...).model_dump(mode="json") without loading pydantic (the same keys
    in the same order; a test keeps the two equal)."""
    return {
        "schema_version": "1",
        "world_id": world_id,
        "ref": ref,
        "digest": digest,
        "size_bytes": size_bytes,
        "platform": "linux/amd64",
        "profile": "apexrl",
    }


def unchanged(dest: Any, plans: list, endpoint: str | None, timeout: float) -> list | None:
    """Each plan's distinct blobs when every tag already names its image, else None
    (nothing printed: the normal push then runs). `plans`: (path, source, world_id, tag)."""
    from apexrl.errors import ApexError
    from apexrl.registry.client import archive_blobs, probe_manifest_digests

    try:
        blobs = [archive_blobs(src) for _p, src, _w, _t in plans]
    except ApexError:  # a torn archive: the normal push reports it
        return None
    got = probe_manifest_digests(
        dest,
        [(t, src.manifest_media_type) for _p, src, _w, t in plans],
        endpoint=endpoint,
        timeout=timeout,
    )
    if got is None or any(g != p[1].manifest_digest for g, p in zip(got, plans, strict=True)):
        return None
    return blobs


def report_unchanged(dest: Any, plans: list, blobs: list, as_json: bool) -> None:
    """What `image push` prints for images that were all already there."""
    records = []
    for (_path, src, world_id, t), bl in zip(plans, blobs, strict=True):
        there = sum(b.size for b in bl.values())
        if not output.stderr_is_plain():  # the bar a terminal shows
            total = sum(b.size for b in src.blob_refs())
            with output.progress(f"push {world_id}", total=total) as advance:
                advance(there)
        ref = dest.with_tag(t)
        output.info(f"{ref}: 0 blobs uploaded (0 bytes), {len(bl)} already there")
        rec = image_record(world_id, str(ref), src.manifest_digest, there + len(src.manifest_bytes))
        records.append(rec)
        if as_json:
            output.emit_records([rec], json_out=True)
    if not as_json:
        output.emit_records(records, title="pushed images")
