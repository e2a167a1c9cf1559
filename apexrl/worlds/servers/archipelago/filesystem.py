"""archipelago `filesystem` server: read-only browsing of the world's files."""

from __future__ import annotations

import fnmatch
import mimetypes
import os
import stat as stat_
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import files as _files
from apexrl.worlds.servers import Failed, Server, Style, caps
from apexrl.worlds.servers.archipelago import image_content, vpath
from apexrl.worlds.world import World

SERVER = Server("filesystem", app="files", aliases=("file_system", "file_browser"))

TEXT_EXTENSIONS = frozenset(
    [
        "txt",
        "json",
        "csv",
        "py",
        "md",
        "xml",
        "yaml",
        "yml",
        "js",
        "ts",
        "jsx",
        "tsx",
        "htm",
        "html",
        "css",
        "scss",
        "less",
        "java",
        "c",
        "cpp",
        "h",
        "hpp",
        "rs",
        "go",
        "rb",
        "php",
        "sh",
        "bash",
        "zsh",
        "fish",
        "ps1",
        "bat",
        "cmd",
        "sql",
        "graphql",
        "gql",
        "toml",
        "ini",
        "cfg",
        "conf",
        "env",
        "properties",
        "log",
        "gitignore",
        "dockerignore",
        "editorconfig",
        "makefile",
        "dockerfile",
        "vagrantfile",
        "rst",
        "tex",
        "bib",
    ]  # noqa: SIM905
)
IMAGE_FORMATS = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}
MAX_TREE_ENTRIES = 500

PathArg = Annotated[
    str, Field(description="Path inside the sandbox; '/' is the root of the world's files.")
]


def _ext(name: str) -> str:
    base = os.path.basename(name)
    if base.lower() in ("makefile", "dockerfile", "vagrantfile"):
        return base.lower()
    if base.startswith(".") and "." not in base[1:]:
        return base[1:].lower()
    return base.rsplit(".", 1)[-1].lower() if "." in base else ""


def _file(world: World, file_path: str, label: str = "File path") -> None:
    """archipelago's checks of a path argument, in its order and words."""
    if not isinstance(file_path, str) or not file_path:
        raise Failed(f"{label} is required and must be a string", Style.INTERNAL_ERROR)
    if not file_path.startswith("/"):
        raise Failed(f"{label} must start with /", Style.INTERNAL_ERROR)


def _resolve(world: World, file_path: str) -> Path:
    """The file a world path names; outside the world: archipelago's 'Access denied'."""
    try:
        p = world.fs_path(file_path)
    except ApexError:
        raise Failed(f"Access denied: {file_path}", Style.INTERNAL_ERROR) from None
    if not p.exists():
        raise Failed(f"File not found: {file_path}", Style.INTERNAL_ERROR)
    return p


def _entry(world: World, path: str) -> Path | str:
    """The file or folder a world path names, or archipelago's bracketed answer when there
    is none: '[access denied: <path>]' (outside the world), '[not found: <path>]'."""
    try:
        p = world.fs_path(path)
    except ApexError:
        return f"[access denied: {path}]"
    if not p.exists():
        return f"[not found: {path}]"
    return p


def _folder(world: World, path: str) -> Path | str:
    """The folder a world path names, or archipelago's bracketed answer (as `_entry`, and
    '[not a directory: <path>]')."""
    p = _entry(world, path)
    if isinstance(p, Path) and not p.is_dir():
        return f"[not a directory: {path}]"
    return p


def _inside(world: World, p) -> bool:
    return p.resolve().is_relative_to(world.fs_root.resolve())


def _human(size: int) -> str:
    """A size in B, KB, MB or GB with one decimal (binary units)."""
    if size < 1024:
        return f"{size} B"
    for unit, k in (("KB", 1), ("MB", 2), ("GB", 3)):
        if size < 1024 ** (k + 1) or unit == "GB":
            return f"{size / 1024**k:.1f} {unit}"
    return f"{size} B"


def _walk_unsorted(world: World, base):
    """Files under base in the directories' own order (a folder's files before its
    subfolders), never through a link out of the world."""
    root_r = world.fs_root.resolve()
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if (Path(dirpath) / d).resolve().is_relative_to(root_r)]
        for f in filenames:
            full = Path(dirpath) / f
            if full.resolve().is_relative_to(root_r):
                yield full


def _read_text(p: Path, encoding: str) -> str:
    """The file's text; for a file far over the reply limit only its head is read (the
    guard would cut the rest), with a note saying so."""
    import codecs

    limit = caps.reply_max_chars()
    size = p.stat().st_size
    if limit <= 0 or size <= 4 * limit:  # 4 bytes at most per character
        return p.read_bytes().decode(encoding)
    with p.open("rb") as fh:
        head = codecs.getincrementaldecoder(encoding)().decode(fh.read(4 * limit), final=False)
    keep = max(0, limit - 400)  # room for the note: the guard cuts no further
    note = caps.truncation_note(min(keep, len(head)), f"a file of {size:,} bytes")
    return f"{head[:keep]}\n\n{note}"


@SERVER.tool
def list_files(world: World, path: PathArg = "/") -> str:
    """List files and folders directly inside a directory: one line per entry,
    "'name' (folder)" or "'name' (mime/type file) N bytes"."""
    p = _folder(world, path)
    if isinstance(p, str):
        return p + "\n"
    out = []
    # the directory's own order (as archipelago lists it), not sorted
    for name in os.listdir(p):
        c = p / name
        if not _inside(world, c):
            continue
        if c.is_dir():
            out.append(f"'{c.name}' (folder)\n")
        elif c.is_file():
            mt = mimetypes.guess_type(c.name)[0] or "unknown"
            out.append(f"'{c.name}' ({mt} file) {c.stat().st_size} bytes\n")
    return "".join(out) or f"No items found in '{path}'"


@SERVER.tool
def read_image_file(world: World, file_path: PathArg):
    """Read an image file (png, jpg, jpeg, gif, webp) and return it as an image."""
    _file(world, file_path)
    ext = file_path.lower().rsplit(".", 1)[-1]
    if ext not in IMAGE_FORMATS:
        raise Failed(
            f"Unsupported image format: {ext}. Supported formats: png, jpg, jpeg, gif, webp",
            Style.INTERNAL_ERROR,
        )
    p = _resolve(world, file_path)
    if not p.is_file():
        raise Failed(f"Not a file: {file_path}", Style.INTERNAL_ERROR)
    size = p.stat().st_size
    if 0 < caps.image_max_bytes() < size:
        return caps.image_note(size)  # never read: the reply could not carry it
    return image_content(p.read_bytes(), IMAGE_FORMATS[ext])


@SERVER.tool
def read_text_file(
    world: World,
    file_path: PathArg,
    encoding: Annotated[str, Field(description="Text encoding, e.g. utf-8, latin-1.")] = "utf-8",
    max_size: Annotated[int, Field(description="Ignored (kept for compatibility).")] = 0,
) -> str:
    """Read a whole text file (.txt, .csv, .json, .md, .html, .xml, .yaml, source code,
    ...). Office files and PDFs are not text: read them with the word, excel,
    powerpoint or pdfs tools."""
    _file(world, file_path)
    ext = _ext(file_path)
    if ext not in TEXT_EXTENSIONS:
        known = ", ".join(sorted(TEXT_EXTENSIONS))
        raise Failed(
            f"Unsupported file type: '{ext}'. Supported extensions: {known}", Style.INTERNAL_ERROR
        )
    p = _resolve(world, file_path)
    if not p.is_file():
        raise Failed(f"Not a file: {file_path}", Style.INTERNAL_ERROR)
    try:
        return _read_text(p, encoding)
    except LookupError as e:
        raise Failed(f"Failed to read text file: {e!r}", Style.INTERNAL_ERROR) from None
    except UnicodeDecodeError as e:
        raise Failed(
            f"Failed to decode file with encoding '{encoding}': {e}", Style.INTERNAL_ERROR
        ) from None


@SERVER.tool
def search_files(
    world: World,
    pattern: Annotated[str, Field(description="Glob on file names: '*.xlsx', 'report_*'.")],
    path: PathArg = "/",
    recursive: Annotated[bool, Field(description="Search subdirectories too.")] = True,
    max_results: Annotated[int, Field(description="At most this many (0: no limit).")] = 100,
) -> str:
    """Find files whose name matches a glob pattern (* any characters, ? one character)
    under a directory. Returns the matching paths, one per line."""
    if not pattern:
        raise Failed("Pattern is required and must be a string", Style.INTERNAL_ERROR)
    _file(world, path, "Path")
    base = _folder(world, path)
    if isinstance(base, str):
        return base
    walker = (
        _walk_unsorted(world, base)
        if recursive
        else (
            base / n for n in os.listdir(base) if (base / n).is_file() and _inside(world, base / n)
        )
    )
    hits = []
    for f in walker:
        if fnmatch.fnmatch(f.name, pattern):
            hits.append(vpath(world, f))
            if max_results > 0 and len(hits) >= max_results:
                break
    if not hits:
        return f"No files matching '{pattern}' found in {path}"
    out = f"Found {len(hits)} file(s) matching '{pattern}':\n" + "\n".join(hits)
    if max_results > 0 and len(hits) >= max_results:
        out += f"\n\n(Results limited to {max_results})"
    return out


@SERVER.tool
def get_file_metadata(world: World, file_path: PathArg) -> str:
    """Metadata of a file or directory: type, MIME type, size, permissions, times."""
    _file(world, file_path)
    p = _entry(world, file_path)
    if isinstance(p, str):
        return p
    st = p.stat()
    lines = [f"Path: {vpath(world, p)}", f"Type: {'directory' if p.is_dir() else 'file'}"]
    if p.is_file():
        lines.append(f"MIME type: {mimetypes.guess_type(p.name)[0] or 'unknown'}")
    lines.append(f"Size: {st.st_size} bytes ({_human(st.st_size)})")
    lines.append(f"Permissions: {stat_.filemode(st.st_mode)[1:]} ({oct(st.st_mode)[-3:]})")
    for label, t in (
        ("Modified", st.st_mtime),
        ("Accessed", st.st_atime),
        ("Created/Changed", st.st_ctime),
    ):
        lines.append(f"{label}: {datetime.fromtimestamp(t, UTC).isoformat()}")
    lines += [f"Inode: {st.st_ino}", f"Device: {st.st_dev}", f"Hard links: {st.st_nlink}"]
    return "\n".join(lines)


@SERVER.tool
def get_directory_tree(
    world: World,
    path: PathArg = "/",
    max_depth: Annotated[int, Field(description="Levels to show, 1-10.")] = 3,
    include_files: Annotated[bool, Field(description="Show files, not only folders.")] = True,
    show_size: Annotated[bool, Field(description="Show file sizes in bytes.")] = False,
) -> str:
    """The directory tree under a path, drawn with box characters (folders end in '/')."""
    _file(world, path, "Path")
    base = _folder(world, path)
    if isinstance(base, str):
        return base
    depth = max(1, min(10, int(max_depth)))
    root = vpath(world, base)
    lines = [root if root == "/" else f"{root}/"]  # a folder ends in '/', as below
    count = [0]

    def walk(d, prefix: str, level: int) -> None:
        entries = [c for c in d.iterdir() if _inside(world, c) and not c.is_symlink()]
        dirs = sorted((c for c in entries if c.is_dir()), key=lambda c: c.name.lower())
        files = sorted((c for c in entries if c.is_file()), key=lambda c: c.name.lower())
        shown = dirs + (files if include_files else [])
        for i, c in enumerate(shown):
            if count[0] >= MAX_TREE_ENTRIES:
                lines.append(f"{prefix}... (truncated at {MAX_TREE_ENTRIES} entries)")
                return
            count[0] += 1
            last = i == len(shown) - 1
            conn = "└── " if last else "├── "
            if c.is_dir():
                lines.append(f"{prefix}{conn}{c.name}/")
                if level < depth:
                    walk(c, prefix + ("    " if last else "│   "), level + 1)
            else:
                size = f" ({c.stat().st_size} bytes)" if show_size else ""
                lines.append(f"{prefix}{conn}{c.name}{size}")

    walk(base, "", 1)
    return "\n".join(lines) if len(lines) > 1 else lines[0] + "\n(empty)"


def probe(world: World) -> str:
    return _files.probe(world)
