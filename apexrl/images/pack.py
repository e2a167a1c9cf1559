"""`world pack`: world sources (`apexrl.worlds.sources`) -> reproducible OCI image archives.

Image = base image layers (unchanged blobs) + runtime layer (apexrl's own
source and an entrypoint script at /usr/local/bin/apexrl-world-entrypoint)
+ optional deps layer (a `pip install --target` directory) + world layers
(`/world/filesystem`, `/world/.apps_data`, `/world/world.json`). A world of more
than `layer_mb` MiB is cut, in path order and without splitting a file, into
up to MAX_WORLD_LAYERS layers of about equal size: they are deflated in
parallel here, and pushed and pulled in parallel (one layer per blob in flight);
a world at or under `layer_mb` keeps one layer, so its image digest does not
change. The config
starts the MCP gateway: `python -m apexrl world serve /world --host 0.0.0.0
--port 8080`, declares the port and a healthcheck, linux/amd64.

Profile `mercor` writes images to the contract of Mercor's prebuilt world images
instead (apexrl.envs.profiles.MERCOR): the world at `/filesystem` and `/.apps_data`
(world.json at /app/world.json), started by `/app/tools/start.sh <task_slug>` (also the
entrypoint), the gateway on port 8000 with MCP at `/mcp`, `/health`, and `POST
/data/snapshot` answering the world's snapshot (a tar.gz of both folders).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apexrl.artifacts.atomic import atomic_path
from apexrl.errors import BadRecordError, UsageError
from apexrl.images import oci
from apexrl.worlds.sources import SKIP_NAMES, WorldSource, walk_entries
from apexrl.worlds.store import WORLD_META
from apexrl.worlds.world import known_apps

WORLD_DIR = "world"  # -> /world in the image
RUNTIME_DIR = "opt/apexrl"
DEPS_DIR = "opt/apexrl/deps"
ENTRYPOINT = "usr/local/bin/apexrl-world-entrypoint"
DEFAULT_PORT = 8080
MERCOR_START = "app/tools/start.sh"  # profile mercor: /app/tools/start.sh <task_slug>
MERCOR_META = "app/world.json"
PROFILES = ("apexrl", "mercor")
DEFAULT_LAYER_MB = 64  # world file bytes per layer before the world is cut in several
MAX_WORLD_LAYERS = 8  # few enough for overlay filesystems and registries' per-blob costs

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

MERCOR_START_SCRIPT = """#!/bin/sh
# Start this world as Mercor's world images start: /app/tools/start.sh <task_slug>.
# The gateway (written by `apexrl world pack --profile mercor`) serves MCP at :8000/mcp,
# /health, and POST /data/snapshot; the world is at /filesystem and /.apps_data.
exec /usr/local/bin/apexrl-world-entrypoint --profile mercor ${1:+--task-slug "$1"}
"""

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
        from apexrl.images.registry_client import pull_image

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


def runtime_entries(pkg: Path | None = None, profile: str = "apexrl") -> list[oci.Entry]:
    """apexrl's package source (no bytecode) at /opt/apexrl/apexrl plus the entrypoint
    (and, for profile mercor, /app/tools/start.sh). `pkg` is an `apexrl` package
    directory (default: the one running)."""
    if pkg is None:
        import apexrl

        pkg = Path(apexrl.__file__).resolve().parent
    pkg = Path(pkg).resolve()
    if pkg.name != "apexrl" or not (pkg / "__main__.py").is_file():
        raise UsageError(f"--runtime {pkg}: not an apexrl package directory (no __main__.py)")
    out = [oci.bytes_entry(ENTRYPOINT, ENTRYPOINT_SCRIPT.encode(), executable=True)]
    if profile == "mercor":
        out.append(oci.bytes_entry(MERCOR_START, MERCOR_START_SCRIPT.encode(), executable=True))
    for dirpath, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_NAMES and not d.startswith("."))
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")) or f in SKIP_NAMES or f.startswith("."):
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
    return list(walk_entries(deps, deps, DEPS_DIR + "/"))


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
    layer_mb: int = DEFAULT_LAYER_MB  # 0: the world in one layer, however large
    profile: str = "apexrl"  # the image contract: apexrl's, or Mercor's world images'

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise UsageError.unknown("image profile", self.profile, PROFILES)


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
                    runtime_entries(opts.runtime, opts.profile),
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
        # apexrl: /world/filesystem, /world/.apps_data; mercor: /filesystem, /.apps_data
        top = "" if self.opts.profile == "mercor" else f"{WORLD_DIR}/"
        entries = [
            oci.Entry(f"{top}{e.name}", e.kind, e.mode, e.size, e.opener, e.linkname)
            for e in world.entries()
        ]
        meta = {"world_id": world.world_id, **world.meta}
        meta["world_id"] = world.world_id
        meta_at = MERCOR_META if self.opts.profile == "mercor" else f"{WORLD_DIR}/{WORLD_META}"
        entries.append(oci.bytes_entry(meta_at, oci.canonical_json(meta)))
        groups = split_world_entries(entries, self.opts.layer_mb << 20)
        paths = [self.tmp / f"world-{world.world_id}-{i}.tar.gz" for i in range(len(groups))]
        try:
            layers = self._write_layers(groups, paths, on_bytes)
            spec = self._spec(world, layers)
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
            for path in paths:
                path.unlink(missing_ok=True)

    def _write_layers(
        self,
        groups: list[list[oci.Entry]],
        paths: list[Path],
        on_bytes: Callable[[int], None] | None,
    ) -> list[oci.Layer]:
        """One layer per group; several at once (each deflates on its own thread)."""

        def write(group: list[oci.Entry], path: Path, count: Callable[[int], None] | None):
            return oci.write_layer(
                group, path, mtime=self.epoch, level=self.opts.level, on_bytes=count
            )

        if len(groups) == 1:
            return [write(groups[0], paths[0], on_bytes)]
        count = _locked(on_bytes)
        from concurrent.futures import ThreadPoolExecutor

        workers = min(len(groups), os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pack-layer") as pool:
            futures = [pool.submit(write, g, p, count) for g, p in zip(groups, paths, strict=True)]
            return [f.result() for f in futures]

    def _spec(self, world: WorldSource, layers: list[oci.Layer]) -> oci.ImageSpec:
        port = self.opts.port
        apps = known_apps(world.meta.get("apps") or [])
        pythonpath = "/" + RUNTIME_DIR + (":/" + DEPS_DIR if self.opts.deps else "")
        mercor = self.opts.profile == "mercor"
        return oci.ImageSpec(
            base_layers=self.base.layers,
            base_diff_ids=self.base.diff_ids,
            base_config=self.base.config,
            base_history=self.base.history,
            layers=[*self.shared, *_world_history(world.world_id, layers)],
            entrypoint=["/" + (MERCOR_START if mercor else ENTRYPOINT)],
            cmd=[],
            env={
                "PYTHONPATH": pythonpath,
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
                "APEXRL_WORLD": "/" if mercor else "/" + WORLD_DIR,
                "APEXRL_PORT": str(port),
                "APEXRL_WORLD_ID": world.world_id,
                **({"APEXRL_APPS": ",".join(apps)} if apps else {}),
            },
            working_dir="/filesystem" if mercor else "/" + WORLD_DIR,
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
                "io.apexrl.image.profile": self.opts.profile,
                **({"io.apexrl.gateway.snapshot": "/data/snapshot"} if mercor else {}),
            },
            annotations={
                oci.ANN_WORLD_ID: world.world_id,
                oci.ANN_CREATED: oci.iso_time(self.epoch),
            },
            created=self.epoch,
        )


def _world_history(world_id: str, layers: list[oci.Layer]) -> list[tuple[oci.Layer, str]]:
    text = f"apexrl world {world_id}: /{WORLD_DIR}"
    if len(layers) == 1:
        return [(layers[0], text)]
    return [(layer, f"{text} (part {i}/{len(layers)})") for i, layer in enumerate(layers, 1)]


def split_world_entries(
    entries: list[oci.Entry], layer_bytes: int, max_layers: int = MAX_WORLD_LAYERS
) -> list[list[oci.Entry]]:
    """The world's entries (parents added, sorted) cut into groups of about equal file
    bytes, in path order; no file is split. Every group starts with the directories
    above its first entry, the same entries (mode and all) the earlier group holds, so
    applying the layers in order gives the one-layer tree. One group when the world
    holds at most `layer_bytes` (or `layer_bytes` <= 0)."""
    ordered = oci.with_parents(entries)
    total = sum(e.size for e in ordered if e.kind == "file")
    if layer_bytes <= 0 or total <= layer_bytes:
        return [ordered]
    n = min(max_layers, -(-total // layer_bytes))
    target = -(-total // n)
    by_name = {e.name: e for e in ordered}
    groups: list[list[oci.Entry]] = []
    group: list[oci.Entry] = []
    filled = 0
    for e in ordered:
        if e.kind == "file" and filled and filled + e.size > target and len(groups) < n - 1:
            groups.append(group)
            parts = e.name.split("/")[:-1]
            group = [by_name["/".join(parts[: i + 1])] for i in range(len(parts))]
            filled = 0
        group.append(e)
        if e.kind == "file":
            filled += e.size
    groups.append(group)
    return groups


def _locked(fn: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """A progress callback several layer writers may call at once."""
    if fn is None:
        return None
    lock = threading.Lock()

    def call(n: int) -> None:
        with lock:
            fn(n)

    return call
