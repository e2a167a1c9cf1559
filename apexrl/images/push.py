"""The body of `image push` once its command line is parsed.

An unchanged re-push is answered by one light HEAD per image (standard library only):
when every tag already names its image, it reports exactly what the push would have
(progress on a terminal, the per-image line, the records) without loading httpx.
Records are written as `image_record` dicts: ImageRecord's dump, without pydantic.
"""

from __future__ import annotations

from typing import Any

from apexrl.cli import output

# `image push` defaults
DEFAULT_TAG = "{world_id}"
DEFAULT_CONCURRENCY = 4
MAX_CONCURRENCY = 64
DEFAULT_TIMEOUT_S = 30.0


def option_value_problem(option: str, value: object) -> str | None:
    """Why a value given to one of `image push`'s options is refused, or None. A value
    that looks like an option (`--tag --dry-run`) is refused rather than taken as a tag."""
    if isinstance(value, str) and value.startswith("-"):
        return f"{option} got {value!r}, which looks like an option: give {option} a value"
    if option == "--timeout" and isinstance(value, float) and not 0 < value < float("inf"):
        return f"--timeout must be a positive number of seconds, not {value!r}"
    return None


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
    (nothing printed: the normal push then runs). `plans`: (path, source, world_id, tag)."""
    from apexrl.errors import ApexError
    from apexrl.images.registry_client import archive_blobs, probe_manifest_digests

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
        total = sum(b.size for b in src.blob_refs())
        with output.progress(f"push {world_id}", total=total) as advance:
            advance(there)
        ref = dest.with_tag(t)
        output.info(f"{ref}: 0 blobs uploaded (0 bytes), {len(bl)} already there")
        size = there + len(src.manifest_bytes)
        rec = image_record(world_id, str(ref), src.manifest_digest, size, image_profile(src))
        records.append(rec)
        if as_json:
            output.emit_records([rec], json_out=True)
    if not as_json:
        output.emit_records(records, title="pushed images")


def run_push(
    dest: Any,
    plans: list,
    *,
    endpoint: str | None,
    concurrency: int,
    retries: int | None,
    timeout: float,
    as_json: bool,
) -> int:
    """Push every plan (path, source, world_id, tag); print the records; the exit code."""
    done = unchanged(dest, plans, endpoint, timeout)
    if done is not None:
        report_unchanged(dest, plans, done, as_json)
        return 0
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
                with output.progress(f"push {world_id}", total=total) as advance:
                    res = push_image(client, src, t, concurrency=concurrency, on_bytes=advance)
            except ApexError as e:
                output.error(f"{path}: {e}")
                errors.append(e)
                continue
            output.info(
                f"{res.ref}: {res.uploaded_blobs} blobs uploaded ({res.uploaded_bytes} bytes), "
                f"{res.skipped_blobs} already there"
            )
            rec = image_record(world_id, str(res.ref), res.digest, res.size, image_profile(src))
            records.append(rec)
            if as_json:
                output.emit_records([rec], json_out=True)
    if not as_json:
        output.emit_records(records, title="pushed images")
    return int(push_error_code(errors, len(records)))
