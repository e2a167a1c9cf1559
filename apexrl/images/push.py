"""Pushing world image archives to a registry: the plan (one tag per archive), the
unchanged re-push, the push itself, and one ImageRecord per image pushed.

An unchanged re-push is answered by one light HEAD per image (standard library only):
when every tag already names its image, it reports exactly what the push would have
(progress, the per-image line, the records) without loading httpx. Records are
`image_record` dicts: ImageRecord's dump, without pydantic.

What a push tells is handed to the caller's callbacks (`apexrl image push` draws
progress bars, prints lines and writes records), so the library prints nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

# `image push` defaults
DEFAULT_TAG = "{world_id}"
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64
DEFAULT_TIMEOUT_S = 30.0

Advance = Callable[..., None]
# progress(label, total) -> a context manager yielding advance(n=1)
Progress = Callable[[str, int], contextlib.AbstractContextManager[Advance]]


@contextlib.contextmanager
def no_progress(_label: str, _total: int) -> Iterator[Advance]:
    yield lambda n=1: None


def _ignore(_item: Any) -> None:
    pass


def plan_pushes(items: list[tuple[Any, str | None]], tag: str) -> list[tuple]:
    """(path, source, world_id, tag) per archive; `items` are (path, world_id or None).
    Raises UsageError when one fixed tag would name several images."""
    from apexrl.errors import UsageError
    from apexrl.images import oci
    from apexrl.images.refs import check_tag

    if len(items) > 1 and "{" not in tag:
        raise UsageError(
            f"--tag {tag!r} would give every image the same tag", hint="use {world_id}"
        )
    plans = []
    for path, wid in items:
        src = oci.open_image(path)
        world_id = wid or src.world_id or src.ref_name or path.name.split(".")[0]
        t = check_tag(tag.format(world_id=world_id, digest12=src.manifest_digest[7:19]))
        plans.append((path, src, world_id, t))
    return plans


def image_profile(src: Any) -> str:
    """The image contract an archive was packed for (its io.apexrl.image.profile label;
    images packed before the label existed are apexrl's)."""
    try:
        labels = (src.config().get("config") or {}).get("Labels") or {}
    except Exception:  # an unreadable config: the push itself reports it
        return "apexrl"
    value = labels.get("io.apexrl.image.profile")
    return value if value in ("apexrl", "mercor") else "apexrl"


def image_record(
    world_id: str, ref: str, digest: str, size_bytes: int, profile: str = "apexrl"
) -> dict[str, Any]:
    """ImageRecord(...).model_dump(mode="json") without loading pydantic (the same keys
    in the same order; a test keeps the two equal)."""
    return {
        "schema_version": "1",
        "world_id": world_id,
        "ref": ref,
        "digest": digest,
        "size_bytes": size_bytes,
        "platform": "linux/amd64",
        "profile": profile,
    }


def unchanged(dest: Any, plans: list, endpoint: str | None, timeout: float) -> list | None:
    """Each plan's distinct blobs when every tag already names its image, else None
    (nothing told: the normal push then runs). `plans`: (path, source, world_id, tag)."""
    from apexrl.errors import ApexError
    from apexrl.images.registry_client import archive_blobs
    from apexrl.images.registry_probe import probe_manifest_digests

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


def push_images(
    dest: Any,
    plans: list,
    *,
    endpoint: str | None,
    concurrency: int,
    retries: int | None,
    timeout: float,
    progress: Progress = no_progress,
    on_info: Callable[[str], None] = _ignore,
    on_error: Callable[[str], None] = _ignore,
    on_record: Callable[[dict[str, Any]], None] = _ignore,
) -> tuple[list[dict[str, Any]], int]:
    """Push every plan (path, source, world_id, tag): the records of the images pushed
    (each also told to `on_record` as it lands) and the exit code (0, 5 when some
    failed, each told to `on_error`, or the code of the only failure)."""
    blobs = unchanged(dest, plans, endpoint, timeout)
    if blobs is not None:
        return _report_unchanged(dest, plans, blobs, progress, on_info, on_record), 0
    from apexrl.errors import ApexError
    from apexrl.images.registry_client import client_for, push_error_code, push_image

    records: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    client = client_for(
        dest, endpoint=endpoint, concurrency=concurrency, retries=retries, timeout=timeout
    )
    with client:
        for path, src, world_id, t in plans:
            total = sum(b.size for b in src.blob_refs())
            try:
                with progress(f"push {world_id}", total) as advance:
                    res = push_image(client, src, t, concurrency=concurrency, on_bytes=advance)
            except ApexError as e:
                on_error(f"{path}: {e}")
                errors.append(e)
                continue
            on_info(
                f"{res.ref}: {res.uploaded_blobs} blobs uploaded ({res.uploaded_bytes} bytes), "
                f"{res.skipped_blobs} already there"
            )
            rec = image_record(world_id, str(res.ref), res.digest, res.size, image_profile(src))
            records.append(rec)
            on_record(rec)
    return records, int(push_error_code(errors, len(records)))


def _report_unchanged(
    dest: Any, plans: list, blobs: list, progress: Progress, on_info, on_record
) -> list[dict[str, Any]]:
    """What a push tells for images that were all already there."""
    records = []
    for (_path, src, world_id, t), bl in zip(plans, blobs, strict=True):
        there = sum(b.size for b in bl.values())
        total = sum(b.size for b in src.blob_refs())
        with progress(f"push {world_id}", total) as advance:
            advance(there)
        ref = dest.with_tag(t)
        on_info(f"{ref}: 0 blobs uploaded (0 bytes), {len(bl)} already there")
        size = there + len(src.manifest_bytes)
        rec = image_record(world_id, str(ref), src.manifest_digest, size, image_profile(src))
        records.append(rec)
        on_record(rec)
    return records
