"""Image profiles: how a world image starts its world and where it keeps it.

Two kinds of world images exist:
  apexrl  built by `apexrl world pack`: entrypoint /usr/local/bin/apexrl-world-entrypoint,
          gateway on APEXRL_PORT (8080), world at /world/filesystem and /world/.apps_data;
          snapshots are taken from the files.
  mercor  Mercor's prebuilt world images (the recipe's ECR images): started with
          `/app/tools/start.sh <task_slug>`, gateway on port 8000, world at /filesystem and
          /.apps_data, snapshot as a tar from `POST /data/snapshot`.

A task's profile comes from its metadata (`image_profile`, recorded from images.jsonl's
`profile`; tasks known only by archipelago.json use Mercor's images), or from a flag
(`--image-profile`). Environments ask the profile for the start command, the port, the
data roots and the snapshot endpoint; nothing else depends on the image kind.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from apexrl.errors import UsageError
from apexrl.worlds.store import TOPS

WORLD_ROOT = "/world"  # where apexrl's agents, oracle and verifier address the world


@dataclass(frozen=True)
class ImageProfile:
    name: str
    command: tuple[str, ...]  # argv; "{task_slug}" is replaced by the task's slug
    port: int  # the gateway's port inside the sandbox
    filesystem: str  # the world's filesystem/ inside the image
    apps_data: str  # the world's .apps_data/ inside the image
    snapshot_endpoint: str | None = None  # POST -> tar (gzip or not) of both roots
    health_path: str = "/health"
    mcp_path: str = "/mcp/"
    env: dict[str, str] = field(default_factory=dict)  # "{port}" is replaced by the port

    def start_argv(self, task_slug: str | None) -> list[str]:
        if any("{task_slug}" in a for a in self.command) and not task_slug:
            raise UsageError(
                f"image profile {self.name!r} starts the world with the task's slug, "
                "and this task names none",
                hint="add task_slug to archipelago.json (or [metadata])",
            )
        return [a.replace("{task_slug}", task_slug or "") for a in self.command]

    def start_env(self) -> dict[str, str]:
        return {k: v.replace("{port}", str(self.port)) for k, v in self.env.items()}

    def roots(self) -> dict[str, str]:
        """{'filesystem': path in the image, '.apps_data': path in the image}."""
        return {"filesystem": self.filesystem, ".apps_data": self.apps_data}

    def world_path(self, path: str) -> str:
        """An apexrl world path (/world/filesystem/x) as this image stores it."""
        for top, real in self.roots().items():
            prefix = f"{WORLD_ROOT}/{top}"
            if path == prefix or path.startswith(prefix + "/"):
                return real + path[len(prefix) :]
        return path

    @property
    def world_is_split(self) -> bool:
        """The image keeps filesystem/ and .apps_data/ somewhere else than /world."""
        return self.roots() != {t: f"{WORLD_ROOT}/{t}" for t in TOPS}

    def link_world_command(self) -> list[str] | None:
        """A command making /world/filesystem and /world/.apps_data point at this image's
        roots, so agents, oracles and graders that address /world find the world."""
        if not self.world_is_split:
            return None
        script = 'mkdir -p "$1" && ln -sfn "$2" "$1/filesystem" && ln -sfn "$3" "$1/.apps_data"'
        return ["sh", "-c", script, "sh", WORLD_ROOT, self.filesystem, self.apps_data]


APEXRL = ImageProfile(
    name="apexrl",
    command=("/usr/local/bin/apexrl-world-entrypoint",),
    port=8080,
    filesystem=f"{WORLD_ROOT}/filesystem",
    apps_data=f"{WORLD_ROOT}/.apps_data",
    env={"APEXRL_PORT": "{port}", "APEXRL_HOST": "0.0.0.0"},
)
MERCOR = ImageProfile(
    name="mercor",
    command=("/app/tools/start.sh", "{task_slug}"),
    port=8000,
    filesystem="/filesystem",
    apps_data="/.apps_data",
    snapshot_endpoint="/data/snapshot",
)
PROFILES: dict[str, ImageProfile] = {p.name: p for p in (APEXRL, MERCOR)}


def get_profile(name: str | None, *, default: str = "apexrl") -> ImageProfile:
    key = (name or default).strip().lower()
    if key not in PROFILES:
        raise UsageError.unknown("image profile", name, PROFILES)
    return PROFILES[key]


def profile_for_task(override: str | None, recorded: str | None) -> ImageProfile:
    """The flag wins, then what the task's metadata records, then apexrl's own images."""
    return get_profile(override or recorded)


# --- talking to a started world ------------------------------------------------------


async def wait_ready(
    base_url: str, profile: ImageProfile, *, timeout_s: float = 300.0, client=None
) -> None:
    """Until the gateway answers health (200) and its MCP endpoint exists (not 404).

    Raises TimeoutError naming the last answer."""
    import httpx

    deadline = time.monotonic() + timeout_s
    last = "no answer"
    own = client is None
    hc = client or httpx.AsyncClient(timeout=10)
    try:
        healthy = False
        while time.monotonic() < deadline:
            try:
                if not healthy:
                    r = await hc.get(base_url.rstrip("/") + profile.health_path)
                    healthy = r.status_code == 200
                    last = f"health: HTTP {r.status_code} {r.text[:200]}"
                if healthy:
                    r = await hc.post(
                        base_url.rstrip("/") + profile.mcp_path,
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"Accept": "application/json, text/event-stream"},
                    )
                    if r.status_code != 404:
                        return
                    last = "MCP endpoint: HTTP 404"
            except httpx.HTTPError as e:
                last = type(e).__name__
            await asyncio.sleep(0.5)
    finally:
        if own:
            await hc.aclose()
    raise TimeoutError(f"the world at {base_url} was not ready within {timeout_s:.0f}s ({last})")


async def fetch_snapshot(
    base_url: str, profile: ImageProfile, *, timeout_s: float = 120.0, client=None
) -> bytes:
    """The world's snapshot from the profile's endpoint: a tar (gzip or plain) whose
    members are under filesystem/ and .apps_data/. Checked before it is returned."""
    import httpx

    if not profile.snapshot_endpoint:
        raise UsageError(f"image profile {profile.name!r} has no snapshot endpoint")
    own = client is None
    hc = client or httpx.AsyncClient(timeout=timeout_s)
    try:
        r = await hc.post(base_url.rstrip("/") + profile.snapshot_endpoint)
    finally:
        if own:
            await hc.aclose()
    if r.status_code != 200:
        raise RuntimeError(f"snapshot: HTTP {r.status_code} {r.text[:200]}")
    check_snapshot(r.content)
    return r.content


def check_snapshot(data: bytes) -> list[str]:
    """Member names of a snapshot tar; ValueError when it is not one (bad tar, members
    outside filesystem/ and .apps_data/, absolute or '..' paths)."""
    from apexrl.artifacts.archive_extract import gunzip, tar_members
    from apexrl.errors import BadRecordError

    # sandbox-written bytes: decompressed and parsed by the shared, size-limited reader
    try:
        raw = gunzip(data, "world snapshot") if data[:2] == b"\x1f\x8b" else data
        members, bad = tar_members(raw, "world snapshot")
    except BadRecordError as e:
        raise ValueError(f"the snapshot is not a tar: {e.detail}") from None
    names = [m.label.removeprefix("./") for m in members] + [b[0] for b in bad]
    for n in names:
        if n in (".", ""):
            continue
        top = n.split("/", 1)[0]
        if n.startswith("/") or ".." in n.split("/") or top not in TOPS:
            raise ValueError(f"the snapshot has a member outside the world: {n!r}")
    return names


def compose_override(profile: ImageProfile, task_slug: str | None) -> dict | None:
    """A Compose overlay for Harbor's podman/docker environments (their `main` service)
    that starts the world as `profile` says, in place of Harbor's keep-alive command: the
    start command (Mercor's: `/app/tools/start.sh <task_slug>`, whose gateway keeps the
    container up), after linking /world to the image's data roots (agents, oracles and
    graders address /world), in the data's folder. None for apexrl's own images: their
    entrypoint already serves the world beside Harbor's command."""
    if profile.name == "apexrl":
        return None
    start = profile.start_argv(task_slug)
    script = 'mkdir -p /world && ln -sfn "$1" /world/filesystem && ln -sfn "$2" /world/.apps_data'
    script += '; shift 2; exec "$@"'
    main: dict = {
        "entrypoint": ["sh", "-c", script, "sh", profile.filesystem, profile.apps_data],
        "command": start,
        "working_dir": profile.filesystem,
    }
    env = profile.start_env()
    if env:
        main["environment"] = env
    return {"services": {"main": main}}


def podman_run_argv(
    profile: ImageProfile,
    image: str,
    task_slug: str | None,
    *,
    host_port: int,
    name: str,
    host: str = "127.0.0.1",
) -> list[str]:
    """`podman run` (or docker) arguments that start a world image as its profile says:
    its start command, its gateway port published on host:host_port only."""
    argv = ["podman", "run", "-d", "--rm", "--name", name]
    argv += ["-p", f"{host}:{host_port}:{profile.port}"]
    for k, v in profile.start_env().items():
        argv += ["-e", f"{k}={v}"]
    start = profile.start_argv(task_slug)
    return argv + ["--entrypoint", start[0], image, *start[1:]]
