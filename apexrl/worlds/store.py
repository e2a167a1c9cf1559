"""The world on disk: its layout, safe extraction, the world store, a task's world,
and what changed in a world (one diff for grading, snapshots and `world diff`).

A world root holds `filesystem/` (the company's files) and `.apps_data/` (mail, chat,
calendar), optionally `world.json`. A zip is extracted with apexrl.artifacts.archive_extract
(size, member and link limits); its root may sit under up to 3 wrapping folders.

The world store (`--worlds DIR`): DIR holds `<world_id>/` folders (filesystem/,
.apps_data/) or `<world_id>.zip` files (also APEX's `world_files_zipped/<world_id>.zip`
one level down). A zip is extracted once, safely, into a cache keyed by its size and
mtime; trials copy from the pristine folder and never write to it.

A trial's world state (`WorldState`) is the after-root plus the before-state: the
pristine world (the store's copy plus the task's input files), which lives outside the
sandbox. Unchanged files are recognised by (size, mtime) against the stats taken when
the copy was made, so a diff costs one stat per file plus a byte comparison of the
files that changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.artifacts.nofollow import open_regular
from apexrl.errors import BadRecordError, ExitCode, UsageError

# --- layout -------------------------------------------------------------------------------

FS_DIR = "filesystem"
APPS_DIR = ".apps_data"
TOPS = (FS_DIR, APPS_DIR)  # the world's top folders; nothing else is world state
WORLD_META = "world.json"  # optional: world_id, apps, ... (APEX world_descriptions row)


def is_world_root(d: Path) -> bool:
    return any((d / t).is_dir() for t in TOPS)


# --- extraction ---------------------------------------------------------------------------


def extract_zip_safely(zpath: Path, dest: Path, *, max_bytes: int | None = None) -> int:
    """Extract `zpath` under `dest` with apexrl.artifacts.archive_extract: no absolute paths,
    '..', devices, or links whose real resolved path leaves `dest`; size, member and
    ratio limits. Returns the number of files."""
    from apexrl.artifacts.archive_extract import Limits, extract_zip

    cap = max_bytes or 50 * 2**30  # worlds are bigger than tasks
    limits = Limits.from_env(max_total_bytes=cap, max_member_bytes=min(cap, 8 * 2**30))
    res = extract_zip(Path(zpath), Path(dest), where=str(zpath), links="in_tree", limits=limits)
    return res.n_files


def unreadable_zip(zpath: Path) -> str | None:
    """Why a world zip cannot be read (its central directory: cheap), None when it opens."""
    import zipfile

    try:
        with zipfile.ZipFile(zpath) as zf:
            if not zf.infolist():
                return f"{zpath}: an empty zip (no world files)"
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        return f"{zpath}: not a readable zip ({e})"
    return None


def find_root(d: Path, src: Path) -> Path:
    """The folder holding filesystem/ and .apps_data/: `d`, or down a chain of up to 3
    single wrapping folders (zips of real worlds wrap them: world_x/, data/world_x/)."""
    for _ in range(4):
        if is_world_root(d):
            return d
        kids = [
            k
            for k in d.iterdir()
            if not k.name.startswith(("__MACOSX", ".DS_Store")) and not k.is_symlink()
        ]
        if len(kids) != 1 or not kids[0].is_dir():
            break
        d = kids[0]
    raise BadRecordError(
        str(src),
        f"not a world: no {FS_DIR}/ or {APPS_DIR}/ at the top",
        hint="a world has top folders filesystem/ and .apps_data/",
    )


# --- the world store ----------------------------------------------------------------------


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
    from apexrl.artifacts.models import check_safe_id
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


class WorldStoreError(BadRecordError):
    """The world store cannot give a world: its zip is missing, unreadable or holds no
    world. The environment's failure, neither the task's (its own files are sound) nor
    the model's: a trial that meets one ends with class `world_store` (apexrl.eval.infra,
    kind `world`), rerun by `eval run --retry-errors` once the store is fixed."""

    def __init__(self, where: str, message: str, *, hint: str | None = None, code=None) -> None:
        super().__init__(where, message, hint=hint)
        if code is not None:
            self.code = code


class WorldStore:
    def __init__(self, root: Path, cache_dir: Path | None = None) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise UsageError(
                f"world store {self.root} is not a folder",
                hint="pass --worlds DIR holding <world_id>/ folders or <world_id>.zip files",
            )
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()

    def locate(self, world_id: str) -> tuple[Path | None, Path | None]:
        """(world folder, world zip) for WORLD_ID, either None where the store has none."""
        from apexrl.artifacts.models import check_safe_id

        check_safe_id(world_id, "world_id")
        for cand in (self.root / world_id, self.root / "worlds" / world_id):
            if cand.is_dir() and is_world_root(cand):
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
        return self.locate(world_id) != (None, None)

    def zip_problem(self, world_id: str) -> str | None:
        """Why the world's zip cannot be read (None: a folder, or a zip that opens)."""
        _, zpath = self.locate(world_id)
        return unreadable_zip(zpath) if zpath is not None else None

    def pristine(self, world_id: str) -> Path:
        """The world's root folder (filesystem/, .apps_data/), never to be written."""
        folder, zpath = self.locate(world_id)
        if folder is not None:
            return folder
        if zpath is not None:
            try:
                return self._extracted(zpath, world_id)
            except BadRecordError as e:  # a corrupt zip, or one that holds no world
                raise WorldStoreError(
                    e.where, e.detail, hint=f"replace {zpath.name} in the world store {self.root}"
                ) from None
        raise WorldStoreError(
            str(self.root),
            f"world {world_id} is not in the world store",
            hint=f"add {world_id}/ or {world_id}.zip to the store",
            code=ExitCode.USAGE,
        )

    def _extracted(self, zpath: Path, world_id: str) -> Path:
        st = zpath.stat()
        dest = self.cache_dir / f"{world_id}-{st.st_size}-{st.st_mtime_ns}"
        if dest.is_dir():
            return find_root(dest, zpath)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{world_id}-", dir=self.cache_dir))
        try:
            extract_zip_safely(zpath, tmp)
            find_root(tmp, zpath)
            try:
                tmp.rename(dest)
            except OSError:  # another trial extracted it first
                if not dest.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return find_root(dest, zpath)


def overlay_sources(pristine: Path, task_files: Path | None) -> dict[str, Path]:
    """'filesystem/x' -> the file a trial's copy starts from (task files win)."""
    sources = walk_files(pristine)
    if task_files is not None:
        for rel, p in walk_files(task_files).items():
            sources[rel] = p
    return sources


# --- state and diff -----------------------------------------------------------------------


@dataclass
class WorldState:
    after_root: Path  # the world root after the run (filesystem/, .apps_data/)
    before: dict[str, Path] | None = None  # 'filesystem/x' -> pristine file; None: unknown
    before_stats: dict[str, tuple[int, int]] | None = None  # rel -> (size, mtime_ns) at start


def walk_files(root: Path) -> dict[str, Path]:
    """'filesystem/a/b.txt' -> path, for every regular file under the world's top folders.

    Links and special files are left out and links are never descended; unreadable
    folders are skipped. Order: each folder's files, then its subfolders by name, depth
    first (os.walk's, with sorted folders). Built on scandir's entry types: a world of
    ~170 files is walked twice a trial, and pathlib per file held the GIL for ~1 ms."""
    out: dict[str, Path] = {}
    base = len(str(root)) + 1
    for top in TOPS:
        start = root / top
        if not start.is_dir() or start.is_symlink():
            continue
        stack = [str(start)]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError:
                continue
            subfolders = []
            for e in entries:
                if e.is_file(follow_symlinks=False):
                    out[e.path[base:]] = Path(e.path)
                elif e.is_dir(follow_symlinks=False):
                    subfolders.append(e.path)
            stack.extend(sorted(subfolders, reverse=True))
    return out


def stats_of(files: dict[str, Path]) -> dict[str, tuple[int, int]]:
    out = {}
    for rel, p in files.items():
        st = p.stat()
        out[rel] = (st.st_size, st.st_mtime_ns)
    return out


@dataclass
class Changes:
    """Paths created, modified and deleted between two states of a world, each sorted."""

    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def changed_paths(
    before: Collection[str], after: Collection[str], same: Callable[[str], bool]
) -> Changes:
    """The one world diff: a path only in `after` is created, only in `before` deleted,
    in both and not `same(path)` modified. `same` decides how content is compared
    (stats then bytes for a trial's copy, sha256 for snapshots)."""
    out = Changes()
    for rel in sorted(after):
        if rel not in before:
            out.created.append(rel)
        elif not same(rel):
            out.modified.append(rel)
    out.deleted = sorted(rel for rel in before if rel not in after)
    return out


def diff_state(state: WorldState) -> Changes | None:
    """What a trial changed in its world copy; None when the before-state is unknown."""
    if state.before is None:
        return None
    before = state.before
    after = walk_files(state.after_root)
    stats = state.before_stats or {}

    def same(rel: str) -> bool:
        st = after[rel].stat()
        if stats.get(rel) == (st.st_size, st.st_mtime_ns):
            return True
        return same_bytes(before[rel], after[rel])

    return changed_paths(before, after, same)


def same_bytes(trusted: Path, untrusted: Path) -> bool:
    """Byte equality; the untrusted (sandbox-written) side is opened without following links."""
    try:
        with open(trusted, "rb") as a, open(open_regular(untrusted), "rb", closefd=True) as b:
            while True:
                x, y = a.read(1 << 20), b.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False
