"""The world store (`--worlds DIR`): pristine worlds by id, and a task's world.

DIR holds `<world_id>/` folders (filesystem/, .apps_data/) or `<world_id>.zip`
files (also APEX's `world_files_zipped/<world_id>.zip` one level down). A zip is
extracted once, safely, into a cache keyed by its size and mtime; trials copy
from the pristine folder and never write to it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.models import check_safe_id
from apexrl.errors import BadRecordError, UsageError

TOPS = ("filesystem", ".apps_data")


def default_cache_dir() -> Path:
    """$APEXRL_WORLD_CACHE, else $XDG_CACHE_HOME/apexrl/worlds (~/.cache/apexrl/worlds)."""
    if os.environ.get("APEXRL_WORLD_CACHE"):
        return Path(os.environ["APEXRL_WORLD_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "apexrl" / "worlds"


@dataclass
class TaskWorld:
    """What a task needs of its world: the id, the image, and its input files."""

    task_dir: Path
    task_id: str
    world_id: str
    image: str | None
    task_files: Path | None  # environment/task_files/, overlaid on the world root


def task_world(task_dir: Path) -> TaskWorld:
    from apexrl.tasks.meta import read_task_meta

    task_dir = Path(task_dir)
    meta = read_task_meta(task_dir)  # [metadata] or archipelago.json; names the fix
    try:
        check_safe_id(meta.world_id, "world_id")
    except ValueError as e:
        raise BadRecordError(str(task_dir / "task.toml"), str(e)) from None
    files = task_dir / "environment" / "task_files"
    return TaskWorld(
        task_dir=task_dir,
        task_id=meta.task_id,
        world_id=meta.world_id,
        image=meta.image,
        task_files=files if files.is_dir() else None,
    )


class WorldStore:
    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise UsageError(
                f"world store {self.root} is not a folder",
                hint="pass --worlds DIR holding <world_id>/ folders or <world_id>.zip files",
            )
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()

    def _find(self, world_id: str) -> tuple[Path | None, Path | None]:
        """(world folder, world zip) for WORLD_ID, either None where the store has none."""
        check_safe_id(world_id, "world_id")
        for cand in (self.root / world_id, self.root / "worlds" / world_id):
            if cand.is_dir() and any((cand / t).is_dir() for t in TOPS):
                return cand, None
        for z in (
            self.root / f"{world_id}.zip",
            self.root / "world_files_zipped" / f"{world_id}.zip",
        ):
            if z.is_file():
                return None, z
        return None, None

    def has(self, world_id: str) -> bool:
        """Whether the store holds WORLD_ID (nothing is extracted)."""
        return self._find(world_id) != (None, None)

    def pristine(self, world_id: str) -> Path:
        """The world's root folder (filesystem/, .apps_data/), never to be written."""
        folder, zpath = self._find(world_id)
        if folder is not None:
            return folder
        if zpath is not None:
            return self._extracted(zpath, world_id)
        raise UsageError(
            f"world {world_id} is not in the world store {self.root}",
            hint=f"add {world_id}/ or {world_id}.zip to the store",
        )

    def _extracted(self, zpath: Path, world_id: str) -> Path:
        from apexrl.worlds.world import _find_root, extract_zip_safely

        st = zpath.stat()
        dest = self.cache_dir / f"{world_id}-{st.st_size}-{st.st_mtime_ns}"
        if dest.is_dir():
            return _find_root(dest, zpath)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{world_id}-", dir=self.cache_dir))
        try:
            extract_zip_safely(zpath, tmp)
            _find_root(tmp, zpath)
            try:
                tmp.rename(dest)
            except OSError:  # another trial extracted it first
                if not dest.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return _find_root(dest, zpath)


def overlay_sources(pristine: Path, task_files: Path | None) -> dict[str, Path]:
    """'filesystem/x' -> the file a trial's copy starts from (task files win)."""
    from apexrl.grading.evidence import walk_files

    sources = walk_files(pristine)
    if task_files is not None:
        for rel, p in walk_files(task_files).items():
            sources[rel] = p
    return sources
