"""An open world: `filesystem/` (the company's files) and `.apps_data/` (mail,
chat, calendar), from a folder or a zip extracted safely (layout and extraction:
`apexrl.worlds.store`), and the apps (servers) it mounts.

Every path a tool receives goes through `World.fs_path` / `World.apps_path`, which
refuse anything that resolves outside the world (`..`, absolute escapes, symlinks
pointing out).
"""

from __future__ import annotations

import json
import tempfile
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.errors import ApexError, UsageError
from apexrl.worlds.store import APPS_DIR, FS_DIR, extract_zip_safely, find_root
from apexrl.worlds.surface import get_surface


def app_names() -> tuple[str, ...]:
    """The world apps (`files`, `docs`, ...), in the order the gateway mounts their
    servers: those the default tool surface serves (`apexrl.worlds.surface`)."""
    return tuple(dict.fromkeys(s.app for s in get_surface().servers))


def normalize_app(name: str) -> str | None:
    """The world app an app name means (its own name, its server's, or an alias of its
    `Server`; lower-cased, '-'/' ' -> '_'), or None when unknown."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    for s in get_surface().servers:
        if key in (s.app, s.name, *s.aliases):
            return s.app
    return None


def known_apps(names: list) -> list[str]:
    """The world apps `names` (a world's `apps` list) mean, in mount order; unknown
    names are left out."""
    known = {normalize_app(str(n)) for n in names}
    return [s for s in app_names() if s in known]


class PathEscapeError(ApexError):
    def __init__(self, path: str) -> None:
        super().__init__(
            f"path {path!r} is outside the world",
            hint="use a path relative to the world's filesystem/ (e.g. 'Reports/q3.xlsx')",
        )


@dataclass
class World:
    """A world folder. `lock` serialises writes made by tool calls."""

    root: Path
    world_id: str
    apps: list[str] = field(default_factory=list)  # app names, empty = all that apply
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    cache: dict = field(default_factory=dict, repr=False)  # facts read once (e.g. the user)
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    @property
    def fs_root(self) -> Path:
        return self.root / FS_DIR

    @property
    def apps_root(self) -> Path:
        return self.root / APPS_DIR

    def fs_path(self, rel: str, *, must_exist: bool = False) -> Path:
        return _inside(self.fs_root, rel, must_exist=must_exist)

    def apps_path(self, rel: str, *, must_exist: bool = False) -> Path:
        return _inside(self.apps_root, rel, must_exist=must_exist)

    def rel(self, p: Path) -> str:
        """A path shown to the agent: relative to filesystem/, '/'-separated."""
        try:
            return p.resolve().relative_to(self.fs_root.resolve()).as_posix() or "."
        except ValueError:
            return p.as_posix()

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _inside(base: Path, rel: str, *, must_exist: bool) -> Path:
    rel = (rel or "").strip()
    if "\x00" in rel:
        raise PathEscapeError(rel)
    # Agents often write '/Reports/x.docx' meaning the world root: treat a leading
    # slash as relative to the base, then check where it really lands.
    cleaned = rel.replace("\\", "/").lstrip("/")
    base_r = base.resolve()
    target = (base_r / cleaned).resolve()
    if target != base_r and not target.is_relative_to(base_r):
        raise PathEscapeError(rel)
    if must_exist and not target.exists():
        raise ApexError(
            f"no such file or folder: {rel!r}",
            hint="list the folder first to see what exists",
        )
    return target


# --- opening worlds ------------------------------------------------------------------


def open_world(
    src: Path,
    *,
    workdir: Path | None = None,
    apps: list[str] | None = None,
    world_id: str | None = None,
) -> World:
    """Open a world folder, or extract a world zip (into `workdir` or a temp dir)."""
    src = Path(src)
    if not src.exists():
        raise UsageError(f"world {src} does not exist", hint="pass a world folder or a .zip")
    chosen_apps = resolve_apps(apps) if apps else None  # usage errors before any work
    tmp = None
    if src.is_file():
        if not zipfile.is_zipfile(src):
            raise UsageError(f"world {src} is neither a folder nor a zip file")
        if workdir is None:
            tmp = tempfile.TemporaryDirectory(prefix="apexrl-world-")
            dest = Path(tmp.name)
        else:
            dest = Path(workdir)
            dest.mkdir(parents=True, exist_ok=True)
        extract_zip_safely(src, dest)
        root = find_root(dest, src)
        wid = world_id or src.stem
    else:
        root = find_root(src, src)
        wid = world_id or src.name
    resolved_apps = chosen_apps if chosen_apps else _apps_from_descriptions(src, wid)
    if not resolved_apps:
        resolved_apps = _apps_from_meta(root)
    w = World(root=root.resolve(), world_id=wid, apps=resolved_apps, _tmp=tmp)
    w.fs_root.mkdir(exist_ok=True)
    return w


def resolve_apps(apps: list[str]) -> list[str]:
    out: list[str] = []
    for a in apps:
        for part in a.split(","):
            if not part.strip():
                continue
            name = normalize_app(part)
            if name is None:
                raise UsageError(
                    f"unknown app {part.strip()!r}",
                    hint=f"known apps: {', '.join(app_names())}",
                )
            if name not in out:
                out.append(name)
    return [s for s in app_names() if s in out]


def _apps_from_descriptions(src: Path, world_id: str) -> list[str]:
    """Apps from `world_descriptions.json` when the world sits in an APEX dataset
    (DIR/world_files_zipped/<id>.zip); empty (= all servers) otherwise."""
    for cand in (
        src.parent.parent / "world_descriptions.json",
        src.parent / "world_descriptions.json",
    ):
        if not cand.is_file():
            continue
        try:
            data = json.loads(cand.read_text("utf-8"))
        except (OSError, ValueError):
            return []
        rows = data if isinstance(data, list) else data.get("worlds", [])
        for row in rows:
            if isinstance(row, dict) and row.get("world_id") == world_id:
                return known_apps(row.get("apps") or [])
    return []


def _apps_from_meta(root: Path) -> list[str]:
    """Apps from the world's own `world.json` (`{"apps": [...]}`, the file `world pack`
    reads and images carry at /world/world.json); empty (= all servers) otherwise."""
    meta = root / "world.json"
    if not meta.is_file() or meta.is_symlink() or meta.stat().st_size > 1 << 20:
        return []
    try:
        data = json.loads(meta.read_text("utf-8"))
    except (OSError, ValueError):
        return []
    apps = data.get("apps") if isinstance(data, dict) else None
    if not isinstance(apps, list):
        return []
    return known_apps(apps)
