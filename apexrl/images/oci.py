"""Reproducible OCI image pieces: layers, configs, manifests and image archives.

Everything here is deterministic: tar entries are sorted, owned by 0:0 with
empty user/group names and one fixed mtime, modes are normalised (0755 for
directories and executables, 0644 otherwise), and gzip is pinned (mtime 0, no
file name, fixed level; the bytes then depend only on the zlib build, so pin
the machine image for byte-identical output across hosts). JSON is written with
sorted keys and no whitespace. The same inputs therefore give the same digests,
and layers shared by many images (base, runtime) are byte-identical.

An image archive is an OCI image layout in a tar (what `skopeo` calls
`oci-archive:`): `oci-layout`, `index.json` and `blobs/sha256/<hex>`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from apexrl.artifacts.archive_write import (
    COPY_BUFSIZE,
    GZIP_LEVEL,
    Entry,
    PipelinedGzip,
    bytes_entry,
    file_entry,
    write_tar,
)
from apexrl.errors import ApexError, BadRecordError

__all__ = ["COPY_BUFSIZE", "GZIP_LEVEL", "Entry", "bytes_entry", "file_entry"]

# --- media types and annotations ------------------------------------------------

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"

MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
# Docker layer types map to their OCI twin (same bytes, same digest).
LAYER_TYPE_TO_OCI = {
    DOCKER_LAYER_GZIP: OCI_LAYER_GZIP,
    OCI_LAYER_GZIP: OCI_LAYER_GZIP,
    OCI_LAYER_TAR: OCI_LAYER_TAR,
    "application/vnd.docker.image.rootfs.diff.tar": OCI_LAYER_TAR,
}

ANN_REF_NAME = "org.opencontainers.image.ref.name"
ANN_CREATED = "org.opencontainers.image.created"
ANN_WORLD_ID = "io.apexrl.world.id"
ANN_TITLE = "org.opencontainers.image.title"

# 2000-01-01T00:00:00Z: fixed, and late enough for zip tools (which reject < 1980).
DEFAULT_EPOCH = 946684800


def build_epoch() -> int:
    """The fixed timestamp of every entry: SOURCE_DATE_EPOCH when set, else 2000-01-01."""
    raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if raw:
        try:
            return int(raw)
        except ValueError:
            raise ApexError(
                f"SOURCE_DATE_EPOCH={raw!r} is not an integer",
                hint="unset it or set it to seconds since 1970",
            ) from None
    return DEFAULT_EPOCH


def iso_time(epoch: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_bytes(data: bytes) -> str:
    return "sha256:" + sha256_hex(data)


# --- layers ----------------------------------------------------------------------


def with_parents(entries: Iterable[Entry]) -> list[Entry]:
    """Add the missing parent directories (mode 0755) and sort by name."""
    by_name: dict[str, Entry] = {}
    for e in entries:
        name = e.name.strip("/")
        if name in by_name:
            raise ApexError(f"duplicate layer entry {name!r}")
        by_name[name] = (
            e if name == e.name else Entry(name, e.kind, e.mode, e.size, e.opener, e.linkname)
        )
    for name in list(by_name):
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/".join(parts[:i])
            if parent not in by_name:
                by_name[parent] = Entry(parent, "dir", 0o755)
    return [by_name[k] for k in sorted(by_name)]


class _HashingWriter:
    """A write-only stream that hashes and counts what passes through to `sink`."""

    def __init__(self, sink: IO[bytes] | Any) -> None:
        self.sink = sink
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        self.sink.write(data)
        self.size += len(data)
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        flush = getattr(self.sink, "flush", None)
        if flush:
            flush()

    @property
    def digest(self) -> str:
        return "sha256:" + self.hash.hexdigest()


@dataclass(frozen=True)
class Layer:
    digest: str  # of the gzip bytes
    diff_id: str  # of the uncompressed tar
    size: int  # gzip bytes
    path: Path  # where the gzip bytes are
    media_type: str = OCI_LAYER_GZIP


def _write_tar(
    fileobj: IO[bytes] | Any,
    entries: Iterable[Entry],
    mtime: int,
    on_bytes: Callable[[int], None] | None,
) -> None:
    """Layers and image archives go through the project's one tar writer."""
    write_tar(fileobj.write, entries, mtime=mtime, on_bytes=on_bytes)


def write_layer(
    entries: Iterable[Entry],
    dest: Path,
    *,
    mtime: int | None = None,
    level: int = GZIP_LEVEL,
    on_bytes: Callable[[int], None] | None = None,
) -> Layer:
    """Write a gzip layer of `entries` (sorted, parents added) to `dest`.

    The tar stream is built (and hashed) on this thread while another thread
    deflates it: zlib and hashlib release the GIL, so both cores work, like
    `tar | gzip`."""
    mtime = build_epoch() if mtime is None else mtime
    ordered = with_parents(entries)
    with open(dest, "wb") as raw:
        comp = _HashingWriter(raw)
        gz = PipelinedGzip(comp, level)
        plain = _HashingWriter(gz)
        try:
            _write_tar(plain, ordered, mtime, on_bytes)
        except BaseException:
            gz.abort()
            raise
        gz.close()
    return Layer(comp.digest, plain.digest, comp.size, dest)


# --- image config and manifest ----------------------------------------------------


@dataclass
class ImageSpec:
    """The image to assemble: base layers (already compressed blobs) + new layers."""

    base_layers: list[BlobRef] = field(default_factory=list)
    base_diff_ids: list[str] = field(default_factory=list)
    base_config: dict[str, Any] = field(default_factory=dict)
    base_history: list[dict[str, Any]] = field(default_factory=list)
    layers: list[tuple[Layer, str]] = field(default_factory=list)  # (layer, history text)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = ""
    exposed_ports: list[str] = field(default_factory=list)
    healthcheck: dict[str, Any] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    created: int = DEFAULT_EPOCH


@dataclass(frozen=True)
class BlobRef:
    """A blob to place in an archive: digest, size, media type and how to read it."""

    digest: str
    size: int
    media_type: str
    opener: Callable[[], IO[bytes]]


def _merge_env(base: list[str], extra: dict[str, str]) -> list[str]:
    out: dict[str, str] = {}
    for item in base:
        k, _, v = item.partition("=")
        out[k] = v
    out.update(extra)
    return [f"{k}={v}" for k, v in out.items()]


def build_config(spec: ImageSpec) -> dict[str, Any]:
    created = iso_time(spec.created)
    base_cfg = dict(spec.base_config.get("config") or {})
    cfg: dict[str, Any] = dict(base_cfg)
    cfg["Env"] = _merge_env(list(base_cfg.get("Env") or []), spec.env)
    cfg["Entrypoint"] = spec.entrypoint
    cfg["Cmd"] = spec.cmd
    if spec.working_dir:
        cfg["WorkingDir"] = spec.working_dir
    if spec.exposed_ports:
        ports = dict(base_cfg.get("ExposedPorts") or {})
        ports.update({p: {} for p in spec.exposed_ports})
        cfg["ExposedPorts"] = ports
    if spec.healthcheck:
        cfg["Healthcheck"] = spec.healthcheck
    labels = dict(base_cfg.get("Labels") or {})
    labels.update(spec.labels)
    if labels:
        cfg["Labels"] = labels
    history = list(spec.base_history) + [
        {"created": created, "created_by": text, "comment": "apexrl world pack"}
        for _, text in spec.layers
    ]
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": cfg,
        "rootfs": {
            "type": "layers",
            "diff_ids": list(spec.base_diff_ids) + [layer.diff_id for layer, _ in spec.layers],
        },
        "history": history,
    }


def build_manifest(config_bytes: bytes, layers: list[BlobRef], annotations: dict[str, str]) -> dict:
    m: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {
            "mediaType": OCI_CONFIG,
            "digest": digest_bytes(config_bytes),
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": LAYER_TYPE_TO_OCI.get(b.media_type, b.media_type),
                "digest": b.digest,
                "size": b.size,
            }
            for b in layers
        ],
    }
    if annotations:
        m["annotations"] = annotations
    return m


@dataclass(frozen=True)
class BuiltImage:
    manifest_digest: str
    manifest_size: int
    config_digest: str
    archive: Path
    archive_size: int
    layer_digests: list[str]


def write_image_archive(
    spec: ImageSpec,
    dest: Path,
    *,
    ref_name: str | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> BuiltImage:
    """Assemble config + manifest and write the OCI archive to `dest` (not atomic:
    the caller writes to a temp path and renames)."""
    config = build_config(spec)
    config_bytes = canonical_json(config)
    layer_refs = list(spec.base_layers) + [
        BlobRef(layer.digest, layer.size, layer.media_type, lambda p=layer.path: open(p, "rb"))  # noqa: SIM115
        for layer, _ in spec.layers
    ]
    manifest = build_manifest(config_bytes, layer_refs, spec.annotations)
    manifest_bytes = canonical_json(manifest)
    manifest_digest = digest_bytes(manifest_bytes)
    desc: dict[str, Any] = {
        "mediaType": OCI_MANIFEST,
        "digest": manifest_digest,
        "size": len(manifest_bytes),
        "platform": {"architecture": "amd64", "os": "linux"},
    }
    ann = dict(spec.annotations)
    if ref_name:
        ann[ANN_REF_NAME] = ref_name
    if ann:
        desc["annotations"] = ann
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [desc]}
    blobs: dict[str, BlobRef] = {}
    for b in [
        BlobRef(
            digest_bytes(config_bytes),
            len(config_bytes),
            OCI_CONFIG,
            lambda: io.BytesIO(config_bytes),
        ),
        BlobRef(
            manifest_digest, len(manifest_bytes), OCI_MANIFEST, lambda: io.BytesIO(manifest_bytes)
        ),
        *layer_refs,
    ]:
        blobs.setdefault(b.digest, b)
    files: list[tuple[str, int, Callable[[], IO[bytes]]]] = [
        ("index.json", *_bytes_src(canonical_json(index))),
        ("oci-layout", *_bytes_src(canonical_json({"imageLayoutVersion": "1.0.0"}))),
    ]
    for d, b in blobs.items():
        files.append((f"blobs/sha256/{d.split(':', 1)[1]}", b.size, b.opener))
    entries = [Entry(name, "file", 0o644, size, opener) for name, size, opener in files]
    mtime = spec.created
    with open(dest, "wb") as raw:
        w = _HashingWriter(raw)
        _write_tar(w, with_parents(entries), mtime, on_bytes)
    return BuiltImage(
        manifest_digest,
        len(manifest_bytes),
        digest_bytes(config_bytes),
        dest,
        w.size,
        [b.digest for b in layer_refs],
    )


def _bytes_src(data: bytes) -> tuple[int, Callable[[], IO[bytes]]]:
    return len(data), lambda: io.BytesIO(data)


# --- reading archives and layouts -------------------------------------------------


class _Slice(io.RawIOBase):
    """A read-only window [offset, offset+size) of a file."""

    def __init__(self, path: Path, offset: int, size: int) -> None:
        self._fh = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._fh.seek(offset)
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._left <= 0:
            return 0
        n = self._fh.readinto(memoryview(b)[: min(len(b), self._left)])
        n = n or 0
        self._left -= n
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


@dataclass
class ImageSource:
    """One image read from an OCI archive or layout: manifest, config and blobs."""

    where: str
    manifest_bytes: bytes
    manifest: dict[str, Any]
    manifest_media_type: str
    annotations: dict[str, str]
    _open: Callable[[str], IO[bytes]]
    _size: Callable[[str], int | None]

    @property
    def manifest_digest(self) -> str:
        return digest_bytes(self.manifest_bytes)

    def blob_refs(self) -> list[BlobRef]:
        """Config first, then layers, as the manifest lists them."""
        out = []
        for d in [self.manifest["config"], *self.manifest.get("layers", [])]:
            out.append(
                BlobRef(
                    d["digest"],
                    int(d["size"]),
                    d.get("mediaType", ""),
                    lambda dg=d["digest"]: self._open(dg),
                )
            )
        return out

    def read_blob(self, digest: str) -> bytes:
        return _read_verified(self._open, digest, self.where)

    def config(self) -> dict[str, Any]:
        return json.loads(self.read_blob(self.manifest["config"]["digest"]))

    def has_blob(self, digest: str) -> bool:
        return self._size(digest) is not None

    @property
    def world_id(self) -> str | None:
        return self.annotations.get(ANN_WORLD_ID) or (self.manifest.get("annotations") or {}).get(
            ANN_WORLD_ID
        )

    @property
    def ref_name(self) -> str | None:
        return self.annotations.get(ANN_REF_NAME)


def open_image(path: Path, ref_name: str | None = None) -> ImageSource:
    """Open an image from an OCI archive (tar) or OCI layout directory.

    With several manifests in the index, `ref_name` selects one by its
    `org.opencontainers.image.ref.name`; otherwise the linux/amd64 one is taken.
    """
    path = Path(path)
    if path.is_dir():
        return _open_layout(path, ref_name)
    if not path.is_file():
        raise BadRecordError(str(path), "no such OCI archive or layout directory")
    return _open_archive(path, ref_name)


def _open_archive(path: Path, ref_name: str | None) -> ImageSource:
    members: dict[str, tuple[int, int]] = {}
    try:
        with tarfile.open(path, "r:") as tar:
            for m in tar:
                if m.isfile():
                    members[m.name.lstrip("./")] = (m.offset_data, m.size)
    except (tarfile.TarError, OSError) as e:
        raise BadRecordError(str(path), f"not an OCI image archive (tar): {e}") from None

    def size_of(digest: str) -> int | None:
        hit = members.get(_blob_name(digest))
        return hit[1] if hit else None

    def open_member(name: str) -> IO[bytes]:
        hit = members.get(name)
        if hit is None:
            raise BadRecordError(
                str(path), f"missing {name}", hint="the archive is incomplete; rebuild it"
            )
        return io.BufferedReader(_Slice(path, hit[0], hit[1]), buffer_size=COPY_BUFSIZE)

    def read_member(name: str) -> bytes:
        with open_member(name) as fh:
            return fh.read()

    return _resolve(str(path), read_member, lambda d: open_member(_blob_name(d)), size_of, ref_name)


def _open_layout(root: Path, ref_name: str | None) -> ImageSource:
    def size_of(digest: str) -> int | None:
        p = root / _blob_name(digest)
        return p.stat().st_size if p.is_file() else None

    def open_blob(digest: str) -> IO[bytes]:
        p = root / _blob_name(digest)
        if not p.is_file():
            raise BadRecordError(
                str(root), f"missing blob {digest}", hint="the layout is incomplete"
            )
        return open(p, "rb")  # noqa: SIM115

    def read_member(name: str) -> bytes:
        p = root / name
        if not p.is_file():
            raise BadRecordError(str(root), f"missing {name}: not an OCI image layout")
        return p.read_bytes()

    return _resolve(str(root), read_member, open_blob, size_of, ref_name)


def _blob_name(digest: str) -> str:
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64 or not all(c in "0123456789abcdef" for c in hexpart):
        raise BadRecordError("manifest", f"unsupported or malformed digest {digest!r}")
    return f"blobs/sha256/{hexpart}"


def _resolve(
    where: str,
    read_member: Callable[[str], bytes],
    open_blob: Callable[[str], IO[bytes]],
    size_of: Callable[[str], int | None],
    ref_name: str | None,
) -> ImageSource:
    try:
        index = json.loads(read_member("index.json"))
    except json.JSONDecodeError as e:
        raise BadRecordError(f"{where}: index.json", f"invalid JSON: {e}") from None
    descs = list(index.get("manifests") or [])
    seen = 0
    while True:
        seen += 1
        if seen > 4:
            raise BadRecordError(where, "nested indexes are too deep")
        if ref_name is not None:
            descs = [d for d in descs if (d.get("annotations") or {}).get(ANN_REF_NAME) == ref_name]
            if not descs:
                raise BadRecordError(where, f"no image named {ref_name!r} in index.json")
        desc = _pick_platform(descs, where)
        data = _read_verified(open_blob, desc["digest"], where)
        doc = json.loads(data)
        mt = doc.get("mediaType") or desc.get("mediaType") or ""
        if mt in INDEX_TYPES or "manifests" in doc:
            descs, ref_name = list(doc.get("manifests") or []), None
            continue
        return ImageSource(
            where,
            data,
            doc,
            mt or OCI_MANIFEST,
            dict(desc.get("annotations") or {}),
            open_blob,
            size_of,
        )


def _read_verified(open_blob: Callable[[str], IO[bytes]], digest: str, where: str) -> bytes:
    with open_blob(digest) as fh:
        data = fh.read()
    if digest_bytes(data) != digest:
        raise BadRecordError(
            f"{where}: blob {digest}",
            f"content hashes to {digest_bytes(data)}",
            hint="the archive is corrupted; rebuild it",
        )
    return data


def _pick_platform(descs: list[dict[str, Any]], where: str) -> dict[str, Any]:
    if not descs:
        raise BadRecordError(where, "index.json lists no image")
    if len(descs) == 1:
        return descs[0]
    for d in descs:
        p = d.get("platform") or {}
        if p.get("os") == "linux" and p.get("architecture") == "amd64":
            return d
    raise BadRecordError(
        where, "several images and none is linux/amd64", hint="name one with ARCHIVE:REF"
    )


def iter_chunks(fh: IO[bytes], size: int = COPY_BUFSIZE) -> Iterator[bytes]:
    while True:
        data = fh.read(size)
        if not data:
            return
        yield data
