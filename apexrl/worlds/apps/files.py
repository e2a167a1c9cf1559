"""Read-only file tools over the world's filesystem/: list, read, search, info, tree."""

from __future__ import annotations

import fnmatch
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.servers import cap_text
from apexrl.worlds.world import World

READ_LIMIT = 40_000
_TEXT_EXT = {".docx", ".xlsx", ".xlsm", ".pptx", ".pdf"}


def _entry(world: World, p: Path) -> dict[str, Any]:
    st = p.stat()
    return {
        "path": world.rel(p),
        "type": "folder" if p.is_dir() else "file",
        "size": st.st_size if p.is_file() else None,
        "modified": datetime.fromtimestamp(st.st_mtime, UTC).isoformat(timespec="seconds"),
    }


def _walk(world: World, base: Path):
    root_r = world.fs_root.resolve()
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for d in list(dirnames):
            full = Path(dirpath) / d
            if not full.resolve().is_relative_to(root_r):
                dirnames.remove(d)  # never follow a link out of the world
        for f in sorted(filenames):
            full = Path(dirpath) / f
            if full.resolve().is_relative_to(root_r):
                yield full


def extract_text(world: World, p: Path) -> str:
    """The text of a file: plain text as-is, office files and PDFs converted."""
    ext = p.suffix.lower()
    if ext == ".docx":
        from apexrl.worlds.apps.docs import docx_text

        return docx_text(p)
    if ext in (".xlsx", ".xlsm"):
        from apexrl.worlds.apps.sheets import workbook_text

        return workbook_text(p)
    if ext == ".pptx":
        from apexrl.worlds.apps.slides import deck_text

        return deck_text(p)
    if ext == ".pdf":
        from apexrl.worlds.apps.pdf import pdf_text

        return pdf_text(p)
    data = p.read_bytes()
    if b"\x00" in data[:4096]:
        raise ApexError(
            f"{world.rel(p)} is a binary file ({len(data)} bytes); it has no text to read"
        )
    return data.decode("utf-8", errors="replace")


def tools(world: World) -> list:
    def list(path: str = "/") -> list[dict[str, Any]]:  # noqa: A001
        """List the files and folders directly inside a folder of the world (default: the top).

        Paths are relative to the world's files, e.g. 'Reports' or 'Reports/2024'."""
        p = world.fs_path(path, must_exist=True)
        if not p.is_dir():
            return [_entry(world, p)]
        return [
            _entry(world, c)
            for c in sorted(p.iterdir())
            if c.resolve().is_relative_to(world.fs_root.resolve())
        ]

    def read(path: str, offset: int = 0, max_chars: int = READ_LIMIT) -> str:
        """Read a file as text. .docx, .xlsx, .pptx and .pdf files are converted to text.

        Use offset/max_chars to page through long files."""
        p = world.fs_path(path, must_exist=True)
        if p.is_dir():
            raise ApexError(f"{path!r} is a folder; use list to see its contents")
        text = extract_text(world, p)
        chunk = text[offset : offset + max(1, max_chars)]
        more = offset + len(chunk) < len(text)
        if more:
            left = len(text) - offset - len(chunk)
            chunk += f"\n[... {left} more characters; read again with offset={offset + len(chunk)}]"
        return chunk

    def search(
        pattern: str = "*", content: str | None = None, path: str = "/", max_results: int = 100
    ) -> list[dict[str, Any]]:
        """Find files whose path matches a glob `pattern` (e.g. '*.xlsx', 'Reports/*budget*')
        and, when `content` is given, whose text contains it (case-insensitive).

        Returns the matching paths with, for content searches, the first matching lines."""
        base = world.fs_path(path, must_exist=True)
        needle = content.lower() if content else None
        out: list[dict[str, Any]] = []
        for f in _walk(world, base):
            rel = world.rel(f)
            if not (
                fnmatch.fnmatch(rel.lower(), pattern.lower())
                or fnmatch.fnmatch(f.name.lower(), pattern.lower())
            ):
                continue
            hit: dict[str, Any] = {"path": rel, "size": f.stat().st_size}
            if needle is not None:
                try:
                    text = extract_text(world, f)
                except Exception:
                    continue
                lines = [ln.strip() for ln in text.splitlines() if needle in ln.lower()]
                if not lines:
                    continue
                hit["matches"] = [cap_text(ln, 300) for ln in lines[:5]]
                hit["n_matches"] = len(lines)
            out.append(hit)
            if len(out) >= max_results:
                break
        return out

    def info(path: str) -> dict[str, Any]:
        """Metadata of a file or folder: type, size, modified time, extension, and for
        folders the number of entries."""
        p = world.fs_path(path, must_exist=True)
        d = _entry(world, p)
        st = p.stat()
        d["created"] = datetime.fromtimestamp(st.st_ctime, UTC).isoformat(timespec="seconds")
        if p.is_dir():
            d["entries"] = sum(1 for _ in p.iterdir())
        else:
            d["extension"] = p.suffix.lower()
        return d

    def tree(path: str = "/", depth: int = 3, max_entries: int = 500) -> str:
        """The folder tree under a path, indented, down to `depth` levels."""
        base = world.fs_path(path, must_exist=True)
        root_r = world.fs_root.resolve()
        lines = [world.rel(base) + "/"]
        count = 0

        def walk(d: Path, level: int) -> None:
            nonlocal count
            for c in sorted(d.iterdir()):
                if not c.resolve().is_relative_to(root_r):
                    continue
                if count >= max_entries:
                    return
                count += 1
                lines.append("  " * level + c.name + ("/" if c.is_dir() else ""))
                if c.is_dir() and level < depth:
                    walk(c, level + 1)

        walk(base, 1)
        if count >= max_entries:
            lines.append(f"[... stopped at {max_entries} entries]")
        return "\n".join(lines)

    return [list, read, search, info, tree]


def probe(world: World) -> str:
    if not world.fs_root.is_dir():
        raise ApexError(f"{world.fs_root} is not a folder")
    n = sum(1 for _ in _walk(world, world.fs_root))
    return f"{n} files"
