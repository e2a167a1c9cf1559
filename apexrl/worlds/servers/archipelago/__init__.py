"""archipelago's tool surface: the servers (filesystem, word, excel, powerpoint, pdfs,
mail, chat, calendar, code_execution) with archipelago's tool and argument names,
implemented over apexrl's world logic. See `apexrl.worlds.surface`."""

from __future__ import annotations

from pathlib import Path

from apexrl.errors import ApexError
from apexrl.worlds.world import World


def vpath(world: World, p: Path) -> str:
    """A path as archipelago shows it: absolute inside the sandbox ('/Reports/x.xlsx')."""
    rel = world.rel(p)
    return "/" if rel in (".", "") else "/" + rel


def file_arg(world: World, path: str, exts: tuple[str, ...], *, must_exist: bool = True) -> Path:
    """Resolve a file argument that must end with one of `exts` (lower-case, with dots)."""
    if not isinstance(path, str) or not path.strip():
        raise ApexError("file_path is required")
    if exts and not path.lower().endswith(exts):
        raise ApexError(f"{path!r} must end with {' or '.join(exts)}")
    p = world.fs_path(path, must_exist=must_exist)
    if must_exist and p.is_dir():
        raise ApexError(f"{path!r} is a directory, not a file")
    return p


def new_file(world: World, directory: str, file_name: str, ext: str) -> Path:
    """The target of a create_* tool: `directory` + `file_name` (no '/', ends with `ext`)."""
    if not file_name or "/" in file_name or "\\" in file_name:
        raise ApexError(f"file_name {file_name!r} must be a plain name without '/'")
    if not file_name.lower().endswith(ext):
        raise ApexError(f"file_name {file_name!r} must end with {ext}")
    d = world.fs_path(directory or "/")
    if d.exists() and not d.is_dir():
        raise ApexError(f"{directory!r} is not a directory")
    p = world.fs_path(f"{(directory or '/').rstrip('/')}/{file_name}")
    if p.exists():
        raise ApexError(f"{vpath(world, p)} already exists")
    return p
