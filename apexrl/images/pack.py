"""`world pack`: world folders, zips or APEX datasets -> reproducible OCI image archives.

Image = base image layers (unchanged blobs) + runtime layer (apexrl's own
source and an entrypoint script at /usr/local/bin/apexrl-world-entrypoint)
+ optional deps layer (a `pip install --target` directory) + world layer
(`/world/filesystem`, `/world/.apps_data`, `/world/world.json`). The config
starts the MCP gateway: `python -m apexrl world serve /world --host 0.0.0.0
--port 8080`, declares the port and a healthcheck, linux/amd64.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from apexrl.artifacts.atomic import atomic_path
from apexrl.errors import ApexError, BadRecordError, UsageError
from apexrl.worlds import oci

WORLD_DIR = "world"  # -> /world in the image
WORLD_TOPS = ("filesystem", ".apps_data")
WORLD_META = "world.json"
RUNTIME_DIR = "opt/apexrl"
DEPS_DIR = "opt/apexrl/deps"
ENTRYPOINT = "usr/local/bin/apexrl-world-entrypoint"
DEFAULT_PORT = 8080

ENTRYPOINT_SCRIPT = """#!/bin/sh
# apexrl world image entrypoint: serve the world's MCP gateway (written by `apexrl world pack`).
# `apexrl-world-entrypoint healthcheck` probes /health (used by the image's Healthcheck).
set -e
PY="${APEXRL_PYTHON:-}"
if [ -z "$PY" ]; then
  for c in python3 python; do
    if command -v "$c" >/dev/null 2>&1; then PY="$c"; break; fi
  done
fi
PORT="${APEXRL_PORT:-8080}"
case "${1:-}" in
  ""|-*|healthcheck) ;;
  *)  # a command (Harbor's docker/podman environments run `sh -c "sleep infinity"`):
      # serve the gateway in the background, then run the command
      if [ -n "$PY" ]; then
        "$PY" -m apexrl world serve "${APEXRL_WORLD:-/world}" \\
          --host "${APEXRL_HOST:-0.0.0.0}" --port "$PORT" \\
          ${APEXRL_WORLD_ID:+--world-id "$APEXRL_WORLD_ID"} \\
          ${APEXRL_APPS:+--apps "$APEXRL_APPS"} >/tmp/apexrl-gateway.log 2>&1 &
      fi
      # run it as a child so SIGTERM (docker/podman stop) ends the container at once
      "$@" &
      child=$!
      trap 'kill -TERM "$child" 2>/dev/null; exit 143' TERM INT
      wait "$child"
      exit $? ;;
esac
if [ -z "$PY" ]; then
  echo "apexrl: no python in this image; pack with a base that has Python >= 3.12" \\
       "(e.g. --base python:3.12-slim) and the dependencies (--deps DIR)" >&2
  exit 127
fi
if [ "${1:-}" = "healthcheck" ]; then
  exec "$PY" -c "import sys, urllib.request; \\
urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=4); sys.exit(0)"
fi
exec "$PY" -m apexrl world serve "${APEXRL_WORLD:-/world}" \\
  --host "${APEXRL_HOST:-0.0.0.0}" --port "$PORT" \\
  ${APEXRL_WORLD_ID:+--world-id "$APEXRL_WORLD_ID"} ${APEXRL_APPS:+--apps "$APEXRL_APPS"} "$@"
"""

_SKIP_NAMES = {"__pycache__", ".DS_Store", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


# --- worlds ------------------------------------------------------------------------


@dataclass
class WorldSource:
    world_id: str
    where: str  # folder, zip, or dataset entry (for messages)
    entries: Callable[[], list[oci.Entry]]  # names relative to the world root
    meta: dict[str, Any] = field(default_factory=dict)  # world.json content to add
    data_size: int = 0
    error: ApexError | None = None  # a world of a dataset that cannot be packed


def _failed(world_id: str, where: str, error: ApexError) -> WorldSource:
    def entries() -> list[oci.Entry]:
        raise error

    return WorldSource(world_id, where, entries, error=error)


def _safe_world_id(value: str, where: str) -> str:
    from apexrl.artifacts.models import check_safe_id

    try:
        return check_safe_id(value, "world_id")
    except ValueError as e:
        raise BadRecordError(
            where, str(e), hint="rename it, or set world_id in world.json"
        ) from None


def resolve_sources(srcs: list[Path]) -> list[WorldSource]:
    """Each SRC: a world folder, a world zip, or an APEX-layout dataset directory."""
    out: list[WorldSource] = []
    for src in srcs:
        src = Path(src)
        if not src.exists():
            raise UsageError(f"{src}: no such file or directory")
        if src.is_dir() and (src / "world_descriptions.json").is_file():
            out.extend(_dataset_worlds(src))
        elif src.is_dir():
            out.append(_folder_world(src))
        elif zipfile.is_zipfile(src):
            out.append(_zip_world(src, _safe_world_id(src.name.removesuffix(".zip"), str(src))))
        else:
            raise UsageError(
                f"{src}: not a world folder, world zip, or dataset directory",
                hint="pass a folder with filesystem/ and .apps_data/, a .zip of one, or a dir "
                "with world_descriptions.json",
            )
    seen: dict[str, str] = {}
    for w in out:
        if w.world_id in seen:
            raise UsageError(
                f"world {w.world_id!r} is given twice ({seen[w.world_id]} and {w.where})"
            )
        seen[w.world_id] = w.where
    return out


def _dataset_worlds(root: Path) -> list[WorldSource]:
    from pydantic import ValidationError

    from apexrl.artifacts.jsonl import read_json_file
    from apexrl.artifacts.models import ApexWorld

    where = str(root / "world_descriptions.json")
    data = read_json_file(root / "world_descriptions.json")
    if isinstance(data, dict) and isinstance(data.get("worlds"), list):
        data = data["worlds"]
    elif isinstance(data, dict):  # {world_id: {...}} is accepted too
        data = [{"world_id": k, **v} for k, v in data.items() if isinstance(v, dict)]
    if not isinstance(data, list):
        raise BadRecordError(where, "expected a JSON list of worlds")
    worlds = []
    for i, obj in enumerate(data):
        try:
            w = ApexWorld.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            raise BadRecordError(
                f"{where}[{i}]", f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
            ) from None
        z = root / "world_files_zipped" / f"{w.world_id}.zip"
        d = root / "world_files" / w.world_id
        meta = w.model_dump(mode="json")
        try:
            if z.is_file():
                worlds.append(_zip_world(z, w.world_id, meta))
            elif d.is_dir():
                ws = _folder_world(d, w.world_id)
                ws.meta = meta
                worlds.append(ws)
            else:
                raise BadRecordError(
                    f"{where}[{i}]",
                    f"world {w.world_id!r} has no {z.relative_to(root)}",
                    hint="add the world's zip or remove the world from world_descriptions.json",
                )
        except ApexError as e:  # one bad world does not stop the others
            worlds.append(_failed(w.world_id, str(z), e))
    return worlds


def _folder_world(root: Path, world_id: str | None = None) -> WorldSource:
    tops = [t for t in WORLD_TOPS if (root / t).is_dir()]
    if not tops:
        raise UsageError(
            f"{root}: not a world folder (no filesystem/ or .apps_data/)",
            hint="a world folder holds filesystem/ and .apps_data/",
        )
    meta: dict[str, Any] = {}
    if (root / WORLD_META).is_file():
        from apexrl.artifacts.jsonl import read_json_file

        m = read_json_file(root / WORLD_META)
        if isinstance(m, dict):
            meta = m
    wid = world_id or str(meta.get("world_id") or root.resolve().name)
    wid = _safe_world_id(wid, str(root))
    size = 0
    for top in tops:
        for _dirpath, _dirs, files in os.walk(root / top):
            for f in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(_dirpath, f)).st_size

    def entries() -> list[oci.Entry]:
        out: list[oci.Entry] = []
        base = root.resolve()
        for top in tops:
            out.extend(_walk(base, base / top))
        return out

    return WorldSource(wid, str(root), entries, meta, size)


def _walk(base: Path, top: Path, prefix: str = "") -> Iterator[oci.Entry]:
    """Entries under `top`, named `prefix` + path relative to `base`; refuses links
    that leave `base` and anything that is not a file, directory or symlink."""
    rel = top.relative_to(base).as_posix()
    rel = "" if rel == "." else rel
    name = f"{prefix}{rel}".rstrip("/")
    if name:
        yield oci.Entry(name, "dir", 0o755)
    with os.scandir(top) as it:
        items = sorted(it, key=lambda d: d.name)
    for de in items:
        if de.name in _SKIP_NAMES:
            continue
        p = Path(de.path)
        child = f"{name}/{de.name}" if name else de.name
        if de.is_symlink():
            target = os.readlink(p)
            resolved = (p.parent / target).resolve()
            if os.path.isabs(target) or not resolved.is_relative_to(base):
                raise BadRecordError(
                    str(p),
                    f"symlink points outside the world ({target})",
                    hint="replace the link with the file it points to",
                )
            yield oci.Entry(child, "symlink", 0o777, linkname=target)
        elif de.is_dir(follow_symlinks=False):
            yield from _walk(base, p, prefix)
        elif de.is_file(follow_symlinks=False):
            st = de.stat(follow_symlinks=False)
            yield oci.file_entry(child, p, size=st.st_size, executable=bool(st.st_mode & 0o111))
        else:
            raise BadRecordError(str(p), "not a regular file, directory or symlink")


def safe_member_name(name: str, where: str) -> str:
    """A zip member name as a safe relative POSIX path; refuses traversal."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise BadRecordError(
            where, f"zip entry {name!r} has an absolute path", hint="refusing to pack it"
        )
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise BadRecordError(
            where, f"zip entry {name!r} escapes the world (..)", hint="refusing to pack it"
        )
    if any("\x00" in p for p in parts):
        raise BadRecordError(where, f"zip entry {name!r} has a NUL byte")
    return str(PurePosixPath(*parts)) if parts else ""


def _zip_world(path: Path, world_id: str, meta: dict[str, Any] | None = None) -> WorldSource:
    where = str(path)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadRecordError(where, f"not a readable zip: {e}") from None
    with zf:
        infos = zf.infolist()
    members: list[tuple[str, zipfile.ZipInfo]] = []
    for info in infos:
        name = safe_member_name(info.filename, where)
        mode = (info.external_attr >> 16) & 0xFFFF
        if stat.S_ISLNK(mode):
            raise BadRecordError(
                where, f"zip entry {info.filename!r} is a symlink", hint="refusing to pack it"
            )
        if name:
            members.append((name, info))
    # Accept worlds zipped with one enclosing folder (<id>/filesystem/...).
    names = [n for n, _ in members]
    prefix = ""
    if not any(n.split("/")[0] in WORLD_TOPS for n in names):
        firsts = {n.split("/")[0] for n in names}
        if len(firsts) == 1:
            prefix = firsts.pop() + "/"
    kept = []
    zmeta: dict[str, Any] = {}
    for n, info in members:
        if prefix:
            if not n.startswith(prefix):
                continue
            n = n[len(prefix) :]
        top = n.split("/")[0]
        if top in WORLD_TOPS:
            kept.append((n, info))
        elif n == WORLD_META and not info.is_dir():
            with zipfile.ZipFile(path) as z2:
                try:
                    zmeta = json.loads(z2.read(info))
                except ValueError:
                    raise BadRecordError(f"{where}:{info.filename}", "invalid JSON") from None
    if not kept:
        raise BadRecordError(where, "no filesystem/ or .apps_data/ folder in the zip")
    size = sum(i.file_size for _, i in kept if not i.is_dir())

    def entries() -> list[oci.Entry]:
        out: list[oci.Entry] = []
        shared: dict[str, zipfile.ZipFile] = {}

        def opener(info: zipfile.ZipInfo) -> Callable[[], Any]:
            def _open():
                if "zf" not in shared:
                    shared["zf"] = zipfile.ZipFile(path)
                return shared["zf"].open(info)

            return _open

        for n, info in kept:
            if info.is_dir():
                out.append(oci.Entry(n, "dir", 0o755))
            else:
                mode = (info.external_attr >> 16) & 0o111
                out.append(
                    oci.Entry(n, "file", 0o755 if mode else 0o644, info.file_size, opener(info))
                )
        return out

    merged = {**zmeta, **(meta or {})}
    return WorldSource(world_id, where, entries, merged, size)


# --- base image --------------------------------------------------------------------


@dataclass
class Base:
    desc: str
    layers: list[oci.BlobRef]
    diff_ids: list[str]
    config: dict[str, Any]
    history: list[dict[str, Any]]

    @property
    def size(self) -> int:
        return sum(b.size for b in self.layers)


def load_base(spec: str | None, *, endpoint: str | None = None) -> Base:
    """--base: `scratch`/none, an OCI archive path, an OCI layout dir (`[oci:]DIR[:REF]`),
    `oci-archive:PATH[:REF]`, or a registry reference pulled with apexrl's client."""
    if not spec or spec == "scratch":
        return Base("scratch", [], [], {}, [])
    src = _local_image(spec)
    if src is None:
        from apexrl.registry.client import pull_image

        src = pull_image(spec, endpoint=endpoint)
    cfg = src.config()
    if cfg.get("os", "linux") != "linux" or cfg.get("architecture", "amd64") != "amd64":
        raise UsageError(
            f"--base {spec}: image is {cfg.get('os')}/{cfg.get('architecture')}, need linux/amd64",
        )
    layers = src.blob_refs()[1:]
    diff_ids = list((cfg.get("rootfs") or {}).get("diff_ids") or [])
    if len(diff_ids) != len(layers):
        raise BadRecordError(f"--base {spec}", "config diff_ids do not match the manifest's layers")
    for b in layers:
        if b.media_type not in oci.LAYER_TYPE_TO_OCI:
            raise UsageError(f"--base {spec}: unsupported layer type {b.media_type}")
    return Base(spec, layers, diff_ids, cfg, list(cfg.get("history") or []))


def _local_image(spec: str) -> oci.ImageSource | None:
    for prefix in ("oci-archive:", "oci:"):
        if spec.startswith(prefix):
            rest = spec[len(prefix) :]
            path, ref = (rest, None) if Path(rest).exists() else (rest.rsplit(":", 1) + [None])[:2]
            if not Path(path).exists():
                raise UsageError(f"--base {spec}: {path} does not exist")
            return oci.open_image(Path(path), ref)
    if Path(spec).exists():
        return oci.open_image(Path(spec))
    if ":" in spec:  # PATH:REF, only for what is clearly an OCI archive or layout
        path, ref = spec.rsplit(":", 1)
        p = Path(path)
        if (p.is_dir() and (p / "index.json").is_file()) or (p.is_file() and p.suffix == ".tar"):
            return oci.open_image(p, ref)
    if spec.startswith((".", "/")):
        raise UsageError(f"--base {spec}: no such OCI archive or layout")
    return None


# --- runtime and deps layers --------------------------------------------------------


def runtime_entries(pkg: Path | None = None) -> list[oci.Entry]:
    """apexrl's package source (no bytecode) at /opt/apexrl/apexrl plus the entrypoint.
    `pkg` is an `apexrl` package directory (default: the one running)."""
    if pkg is None:
        import apexrl

        pkg = Path(apexrl.__file__).resolve().parent
    pkg = Path(pkg).resolve()
    if pkg.name != "apexrl" or not (pkg / "__main__.py").is_file():
        raise UsageError(f"--runtime {pkg}: not an apexrl package directory (no __main__.py)")
    out = [oci.bytes_entry(ENTRYPOINT, ENTRYPOINT_SCRIPT.encode(), executable=True)]
    for dirpath, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_NAMES and not d.startswith("."))
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")) or f in _SKIP_NAMES or f.startswith("."):
                continue
            p = Path(dirpath) / f
            if p.is_symlink() or not p.is_file():
                continue
            rel = p.relative_to(pkg.parent).as_posix()
            out.append(oci.file_entry(f"{RUNTIME_DIR}/{rel}", p))
    return out


def deps_entries(deps: Path) -> list[oci.Entry]:
    deps = deps.resolve()
    if not deps.is_dir():
        raise UsageError(
            f"--deps {deps}: not a directory", hint="create it with pip install --target"
        )
    return list(_walk(deps, deps, DEPS_DIR + "/"))


# --- pack ----------------------------------------------------------------------------


@dataclass
class PackOptions:
    out: Path
    base: str | None = None
    deps: Path | None = None
    runtime: Path | None = None
    port: int = DEFAULT_PORT
    level: int = oci.GZIP_LEVEL
    endpoint: str | None = None


@dataclass
class Packed:
    world_id: str
    archive: Path
    digest: str
    size: int
    layers: list[str]


class Packer:
    """Builds the shared layers once, then one archive per world."""

    def __init__(self, opts: PackOptions) -> None:
        self.opts = opts
        self.epoch = oci.build_epoch()
        opts.out.mkdir(parents=True, exist_ok=True)
        self._tmp = tempfile.TemporaryDirectory(prefix=".apexrl-pack-", dir=opts.out)
        self.tmp = Path(self._tmp.name)
        self.base = load_base(opts.base, endpoint=opts.endpoint)
        self.shared: list[tuple[oci.Layer, str]] = [
            (
                oci.write_layer(
                    runtime_entries(opts.runtime),
                    self.tmp / "runtime.tar.gz",
                    mtime=self.epoch,
                    level=opts.level,
                ),
                "apexrl runtime: /opt/apexrl + /" + ENTRYPOINT,
            )
        ]
        if opts.deps:
            self.shared.append(
                (
                    oci.write_layer(
                        deps_entries(opts.deps),
                        self.tmp / "deps.tar.gz",
                        mtime=self.epoch,
                        level=opts.level,
                    ),
                    "apexrl deps: /" + DEPS_DIR,
                )
            )

    def close(self) -> None:
        self._tmp.cleanup()

    def __enter__(self) -> Packer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pack(self, world: WorldSource, on_bytes: Callable[[int], None] | None = None) -> Packed:
        entries = [
            oci.Entry(f"{WORLD_DIR}/{e.name}", e.kind, e.mode, e.size, e.opener, e.linkname)
            for e in world.entries()
        ]
        meta = {"world_id": world.world_id, **world.meta}
        meta["world_id"] = world.world_id
        entries.append(oci.bytes_entry(f"{WORLD_DIR}/{WORLD_META}", oci.canonical_json(meta)))
        layer_path = self.tmp / f"world-{world.world_id}.tar.gz"
        try:
            layer = oci.write_layer(
                entries, layer_path, mtime=self.epoch, level=self.opts.level, on_bytes=on_bytes
            )
            spec = self._spec(world, layer)
            target = self.opts.out / f"{world.world_id}.oci.tar"
            with atomic_path(target) as tmp:
                built = oci.write_image_archive(spec, tmp, ref_name=world.world_id)
                os.chmod(tmp, 0o644)
            return Packed(
                world.world_id,
                target,
                built.manifest_digest,
                built.archive_size,
                built.layer_digests,
            )
        finally:
            layer_path.unlink(missing_ok=True)

    def _spec(self, world: WorldSource, layer: oci.Layer) -> oci.ImageSpec:
        port = self.opts.port
        apps = _known_apps(world.meta.get("apps") or [])
        pythonpath = "/" + RUNTIME_DIR + (":/" + DEPS_DIR if self.opts.deps else "")
        return oci.ImageSpec(
            base_layers=self.base.layers,
            base_diff_ids=self.base.diff_ids,
            base_config=self.base.config,
            base_history=self.base.history,
            layers=[*self.shared, (layer, f"apexrl world {world.world_id}: /{WORLD_DIR}")],
            entrypoint=["/" + ENTRYPOINT],
            cmd=[],
            env={
                "PYTHONPATH": pythonpath,
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
                "APEXRL_WORLD": "/" + WORLD_DIR,
                "APEXRL_PORT": str(port),
                "APEXRL_WORLD_ID": world.world_id,
                **({"APEXRL_APPS": ",".join(apps)} if apps else {}),
            },
            working_dir="/" + WORLD_DIR,
            exposed_ports=[f"{port}/tcp"],
            healthcheck={
                "Test": ["CMD", "/" + ENTRYPOINT, "healthcheck"],
                "Interval": 10_000_000_000,
                "Timeout": 5_000_000_000,
                "StartPeriod": 30_000_000_000,
                "Retries": 3,
            },
            labels={
                oci.ANN_WORLD_ID: world.world_id,
                "io.apexrl.gateway.port": str(port),
                "io.apexrl.gateway.path": "/mcp/",
            },
            annotations={
                oci.ANN_WORLD_ID: world.world_id,
                oci.ANN_CREATED: oci.iso_time(self.epoch),
            },
            created=self.epoch,
        )


def _known_apps(names: list[str]) -> list[str]:
    """The world's apps as gateway server names (unknown names are left out)."""
    from apexrl.worlds.world import SERVERS, normalize_app

    known = {normalize_app(str(n)) for n in names}
    return [s for s in SERVERS if s in known]
