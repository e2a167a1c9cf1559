"""archipelago's tool surface: the servers (filesystem, word, excel, powerpoint, pdfs,
mail, chat, calendar, code_execution) with archipelago's tool and argument names,
implemented over apexrl's world logic. See `apexrl.worlds.surface`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.servers import Failed
from apexrl.worlds.world import World

JPEG_QUALITY = 85  # images are returned re-encoded as JPEG, as the peer returns them


def path_problem(file_path: str, ext: str) -> str | None:
    """What the peer's file servers say is wrong with the form of a file path argument
    that must end with `ext` ('.docx'); None when nothing is."""
    if not isinstance(file_path, str) or not file_path.startswith("/"):
        return "File path must start with /"
    if not file_path.lower().endswith(ext):
        return f"File path must end with {ext}"
    return None


def existing_file(world: World, file_path: str, *, must_exist: bool = True) -> Path:
    """The file an office tool's (already checked) path names; the peer's
    'File not found' when it leads outside the world or (`must_exist`) is not a file."""
    try:
        p = world.fs_path(file_path)
    except ApexError:
        raise Failed(f"File not found: {file_path}") from None
    if must_exist and not p.is_file():
        raise Failed(f"File not found: {file_path}")
    return p


def image_file(world: World, image_path: str) -> Path:
    """The picture an add_image tool inserts: a .jpg, .jpeg or .png file in the world."""
    try:
        img = world.fs_path(image_path)
    except ApexError:
        img = None
    if img is None or not img.is_file():
        raise Failed(f"Image file not found: {image_path}")
    ext = img.suffix.lower().lstrip(".")
    if ext not in ("jpg", "jpeg", "png"):
        raise Failed(f"Unsupported image format: {ext}. Supported formats: jpg, jpeg, png")
    return img


class ImageCache:
    """The images a read tool listed, kept by (file path, annotation key) as the JPEG that
    read_image returns: the peer keeps them in memory so, and answers read_image only
    for an image a read listed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jpegs: dict[tuple[str, str], bytes] = {}

    def keep(self, file_path: str, key: str, blob: bytes) -> None:
        """Keep an image (raises when its bytes are no image PIL reads)."""
        data = jpeg(blob)
        with self._lock:
            self._jpegs[(file_path, key)] = data

    def image(self, file_path: str, key: str) -> Any:
        """The kept image as MCP image content, None when none is kept under the key."""
        with self._lock:
            data = self._jpegs.get((file_path, key))
        return None if data is None else image_content(data, "image/jpeg")


def image_content(data: bytes, mime: str) -> Any:
    """An image's bytes as MCP image content."""
    import base64

    from mcp.types import ImageContent

    return ImageContent(type="image", data=base64.b64encode(data).decode(), mimeType=mime)


def encoded(img: Any, fmt: str, **options: Any) -> bytes:
    """A PIL image's bytes in `fmt` ('PNG', 'JPEG')."""
    import io

    out = io.BytesIO()
    img.save(out, format=fmt, **options)
    return out.getvalue()


def jpeg(blob: bytes) -> bytes:
    """An image's bytes re-encoded as the JPEG the peer's read_image returns."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(blob))
    if img.mode != "RGB":
        img = img.convert("RGB")
    return encoded(img, "JPEG", quality=JPEG_QUALITY, optimize=True)


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


def transform_image(
    blob: bytes,
    operation: str,
    *,
    rotation: float | None = None,
    flip: str | None = None,
    brightness: float | None = None,
    contrast: float | None = None,
    crop: tuple[int | None, int | None, int | None, int | None] | None = None,
) -> bytes:
    """An image's bytes after rotate / flip / brightness / contrast / crop (same format)."""
    import io

    from PIL import Image, ImageEnhance, ImageOps

    img = Image.open(io.BytesIO(blob))
    fmt = img.format or "PNG"
    if operation == "rotate":
        if rotation is None or not 0 <= rotation <= 360:
            raise ApexError("'rotate' needs rotation between 0 and 360 degrees")
        img = img.rotate(-rotation, expand=True)  # clockwise
    elif operation == "flip":
        if flip not in ("horizontal", "vertical"):
            raise ApexError("'flip' needs flip='horizontal' or 'vertical'")
        img = ImageOps.mirror(img) if flip == "horizontal" else ImageOps.flip(img)
    elif operation in ("brightness", "contrast"):
        factor = brightness if operation == "brightness" else contrast
        if factor is None or factor <= 0:
            raise ApexError(f"'{operation}' needs a positive {operation} factor")
        enh = ImageEnhance.Brightness if operation == "brightness" else ImageEnhance.Contrast
        img = enh(img.convert("RGB") if img.mode not in ("RGB", "L") else img).enhance(factor)
    elif operation == "crop":
        left, top, right, bottom = crop or (None, None, None, None)
        if None in (left, top, right, bottom) or not (
            0 <= left < right <= img.width and 0 <= top < bottom <= img.height
        ):
            raise ApexError(
                f"'crop' needs 0 <= crop_left < crop_right <= {img.width} and "
                f"0 <= crop_top < crop_bottom <= {img.height}"
            )
        img = img.crop((left, top, right, bottom))
    else:
        raise ApexError(f"unknown operation {operation!r}")
    out = io.BytesIO()
    if fmt.upper() in ("JPEG", "JPG") and img.mode not in ("RGB", "L"):
        img = img.convert("RGB")
    img.save(out, format=fmt)
    return out.getvalue()
