"""World sources: what `world pack` reads, as tar entries relative to the world root.

A source is a world folder, a world zip (safe member names, no links, one wrapping
folder accepted), or each world of an APEX-layout dataset directory
(world_descriptions.json + world_files_zipped/<id>.zip or world_files/<id>/). A world
of a dataset that cannot be read is a source with an `error`, so one bad world does
not stop the others. Image building is `apexrl.images.pack`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from apexrl.artifacts.archive_write import Entry, file_entry
from apexrl.errors import ApexError, BadRecordError, UsageError
from apexrl.worlds.store import TOPS, WORLD_META

SKIP_NAMES = {"__pycache__", ".DS_Store", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


@dataclass
class WorldSource:
    world_id: str
    where: str  # folder, zip, or dataset entry (for messages)
    entries: Callable[[], list[Entry]]  # names relative to the world root
    meta: dict[str, Any] = field(default_factory=dict)  # world.json content to add
    data_size: int = 0
    error: ApexError | None = None  # a world of a dataset that cannot be packed


def _failed(world_id: str, where: str, error: ApexError) -> WorldSource:
    def entries() -> list[Entry]:
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
    tops = [t for t in TOPS if (root / t).is_dir()]
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

    def entries() -> list[Entry]:
        out: list[Entry] = []
        base = root.resolve()
        for top in tops:
            out.extend(walk_entries(base, base / top))
        return out

    return WorldSource(wid, str(root), entries, meta, size)


def walk_entries(base: Path, top: Path, prefix: str = "") -> Iterator[Entry]:
    """Entries under `top`, named `prefix` + path relative to `base`; refuses links
    that leave `base` and anything that is not a file, directory or symlink."""
    rel = top.relative_to(base).as_posix()
    rel = "" if rel == "." else rel
    name = f"{prefix}{rel}".rstrip("/")
    if name:
        yield Entry(name, "dir", 0o755)
    with os.scandir(top) as it:
        items = sorted(it, key=lambda d: d.name)
    for de in items:
        if de.name in SKIP_NAMES:
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
            yield Entry(child, "symlink", 0o777, linkname=target)
        elif de.is_dir(follow_symlinks=False):
            yield from walk_entries(base, p, prefix)
        elif de.is_file(follow_symlinks=False):
            st = de.stat(follow_symlinks=False)
            yield file_entry(child, p, size=st.st_size, executable=bool(st.st_mode & 0o111))
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
    from apexrl.artifacts.archive_extract import open_zip

    where = str(path)
    with open_zip(path, where) as zf:
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
    if not any(n.split("/")[0] in TOPS for n in names):
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
        if top in TOPS:
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

    def entries() -> list[Entry]:
        out: list[Entry] = []
        shared: dict[str, zipfile.ZipFile] = {}

        def opener(info: zipfile.ZipInfo) -> Callable[[], Any]:
            def _open():
                if "zf" not in shared:
                    shared["zf"] = zipfile.ZipFile(path)
                return shared["zf"].open(info)

            return _open

        for n, info in kept:
            if info.is_dir():
                out.append(Entry(n, "dir", 0o755))
            else:
                mode = (info.external_attr >> 16) & 0o111
                out.append(Entry(n, "file", 0o755 if mode else 0o644, info.file_size, opener(info)))
        return out

    merged = {**zmeta, **(meta or {})}
    return WorldSource(world_id, where, entries, merged, size)
