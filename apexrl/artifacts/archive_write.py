"""The one place apexrl writes tar and gzip archives (apexrl.artifacts.archive_extract reads them).

Writing is deterministic: entries in the order given (callers sort), uid/gid 0,
no owner names, one fixed mtime, modes normalised, gzip header with mtime 0 and
no file name, a pinned compression level. The same entries give the same bytes.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from apexrl.artifacts.nofollow import open_nofollow
from apexrl.errors import ApexError, BadRecordError

GZIP_LEVEL = 6  # gzip's own default: the speed/size trade-off of `tar czf`
COPY_BUFSIZE = 1 << 20
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # no name, mtime 0, OS unknown


@dataclass(frozen=True)
class Entry:
    """One tar entry. `name` is relative (no leading '/')."""

    name: str
    kind: str  # "dir" | "file" | "symlink" | "hardlink"
    mode: int = 0o644
    size: int = 0
    opener: Callable[[], IO[bytes]] | None = None  # file content
    linkname: str = ""


def bytes_entry(name: str, data: bytes, *, executable: bool = False) -> Entry:
    return Entry(name, "file", 0o755 if executable else 0o644, len(data), lambda: io.BytesIO(data))


def file_entry(
    name: str, path: Path | str, *, size: int | None = None, executable: bool = False
) -> Entry:
    """A file on disk, opened without following a link when the tar is written."""
    st_size = os.stat(path, follow_symlinks=False).st_size if size is None else size
    return Entry(
        name, "file", 0o755 if executable else 0o644, st_size, lambda p=path: open_nofollow(p)
    )


def tar_header(
    name: str, size: int, mode: int, kind: str, *, linkname: str = "", mtime: int = 0
) -> bytes:
    """A ustar header (with a PAX record before it for long or non-ASCII names)."""
    typeflag = {"file": b"0", "dir": b"5", "symlink": b"2", "hardlink": b"1"}[kind]
    raw = name.encode("utf-8")
    link = linkname.encode("utf-8")
    records = b""
    if len(raw) > 100 or not raw.isascii():
        records += _pax_record("path", raw)
        raw = raw[:100]
    if len(link) > 100 or not link.isascii():
        records += _pax_record("linkpath", link)
        link = link[:100]
    if size >= 8**11:
        records += _pax_record("size", str(size).encode())
    head = b""
    if records:
        head = _ustar_block(b"././@PaxHeader", len(records), 0o644, b"x", b"", mtime)
        head += records + b"\0" * (-len(records) % 512)
    return head + _ustar_block(raw, size if size < 8**11 else 0, mode, typeflag, link, mtime)


def _pax_record(key: str, value: bytes) -> bytes:
    body = b" " + key.encode() + b"=" + value + b"\n"
    length = len(body)
    while len(str(length).encode()) + len(body) != length:
        length = len(str(length).encode()) + len(body)
    return str(length).encode() + body


def _ustar_block(
    name: bytes, size: int, mode: int, typeflag: bytes, linkname: bytes, mtime: int
) -> bytes:
    # name and linkname are at most 100 bytes (longer ones go in a PAX record).
    head = b"%s%07o\x000000000\x000000000\x00%011o\x00%011o\x00" % (
        name.ljust(100, b"\0"),
        mode,
        size,
        mtime,
    )
    tail = typeflag + linkname.ljust(100, b"\0") + _USTAR_TAIL
    return b"%s%06o\x00 %s" % (head, sum(head) + sum(tail) + 256, tail)


_USTAR_TAIL = b"ustar\x0000" + bytes(247)  # magic, version, then owner names etc. empty


def write_tar(
    write: Callable[[bytes], Any],
    entries: Iterable[Entry],
    *,
    mtime: int = 0,
    on_bytes: Callable[[int], None] | None = None,
) -> None:
    """Write `entries` as one tar stream through `write` (entries in the order given)."""
    for e in entries:
        if e.kind == "file":
            write(tar_header(e.name, e.size, e.mode, "file", mtime=mtime))
            assert e.opener is not None
            left = e.size
            with e.opener() as fh:
                while left > 0:
                    chunk = fh.read(min(left, COPY_BUFSIZE))
                    if not chunk:
                        raise ApexError(f"{e.name}: file changed while packing (shorter)")
                    write(chunk)
                    left -= len(chunk)
            if e.size % 512:
                write(b"\0" * (512 - e.size % 512))
            if on_bytes:
                on_bytes(e.size)
        elif e.kind == "dir":
            name = e.name if e.name.endswith("/") else e.name + "/"
            write(tar_header(name, 0, 0o755, "dir", mtime=mtime))
        elif e.kind in ("symlink", "hardlink"):
            mode = 0o777 if e.kind == "symlink" else 0o644
            write(tar_header(e.name, 0, mode, e.kind, linkname=e.linkname, mtime=mtime))
        else:
            raise ApexError(f"{e.name}: cannot write a tar entry of kind {e.kind!r}")
    write(b"\0" * 1024)  # end-of-archive marker


def tar_bytes(entries: Iterable[Entry], *, mtime: int = 0) -> bytes:
    parts: list[bytes] = []
    write_tar(parts.append, entries, mtime=mtime)
    return b"".join(parts)


def gzip_bytes(data: bytes, level: int = GZIP_LEVEL) -> bytes:
    """gzip with a fixed header (raw deflate + our own header and trailer)."""
    comp = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
    body = comp.compress(data) + comp.flush()
    trailer = struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return _gzip_header(level) + body + trailer


# ISA-L's best level: about 9x faster than zlib -6 for a few percent more bytes. Its
# output is fixed for a given isal version on a given CPU class (the x86-64 kernels
# agree above SSE4.2), so the version is pinned in pyproject.toml.
FAST_GZIP_LEVEL = 3


def gzip_fast(data: bytes | bytearray | memoryview) -> bytes:
    """gzip through ISA-L (igzip) with the same fixed header as `gzip_bytes`: the
    format of task binaries, where packing speed matters more than the last bytes."""
    from isal import isal_zlib

    body = isal_zlib.compress(data, FAST_GZIP_LEVEL, -isal_zlib.MAX_WBITS)
    trailer = struct.pack("<II", isal_zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return GZIP_HEADER + body + trailer


def _gzip_header(level: int) -> bytes:
    xfl = b"\002" if level == 9 else (b"\004" if level == 1 else b"\000")
    return GZIP_HEADER[:8] + xfl + GZIP_HEADER[9:]


class PipelinedGzip:
    """A streaming gzip writer (mtime 0, no name, OS 255) that deflates on a worker
    thread, so tar building and compression use two cores like `tar | gzip`.
    Output bytes do not depend on how the input is split into writes."""

    def __init__(self, sink: Any, level: int = GZIP_LEVEL) -> None:
        import queue
        import threading

        self.sink = sink
        self.crc = 0
        self.size = 0
        self.buf = bytearray()
        self.q: queue.Queue[bytes | None] = queue.Queue(maxsize=8)
        self.error: BaseException | None = None
        self._co = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)
        sink.write(_gzip_header(level))
        self.thread = threading.Thread(target=self._run, name="gzip", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while True:
                chunk = self.q.get()
                if chunk is None:
                    self.sink.write(self._co.flush())
                    return
                out = self._co.compress(chunk)
                if out:
                    self.sink.write(out)
        except BaseException as e:  # surfaced by write()/close()
            self.error = e
            while self.q.get() is not None:  # drain so the producer never blocks
                pass

    def _put(self, chunk: bytes | None) -> None:
        if self.error:
            raise self.error
        self.q.put(chunk)

    def write(self, data: bytes) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        self.buf += data
        if len(self.buf) >= COPY_BUFSIZE:
            self._put(bytes(self.buf))
            self.buf.clear()
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self.buf:
            self._put(bytes(self.buf))
            self.buf.clear()
        self._put(None)
        self.thread.join()
        if self.error:
            raise self.error
        self.sink.write(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))

    def abort(self) -> None:
        if self.thread.is_alive():
            self.q.put(None)
            self.thread.join(timeout=30)


def walk_sorted(root: Path, *, where: str | None = None) -> Iterator[tuple[str, str, bool]]:
    """(relative posix name, full path, is_dir) depth first in name order; refuses links
    and special files (packing never follows or stores a link)."""
    root = Path(root)
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        full_dir = os.path.join(root, rel_dir) if rel_dir else str(root)
        with os.scandir(full_dir) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            label = f"{where or root}/{rel}"
            if entry.is_symlink():
                raise BadRecordError(
                    label, "symbolic links are not packed", hint="replace the link by a file"
                )
            if entry.is_dir(follow_symlinks=False):
                yield rel, entry.path, True
                subdirs.append(rel)
            elif entry.is_file(follow_symlinks=False):
                yield rel, entry.path, False
            else:
                raise BadRecordError(label, "special files (devices, fifos) are not packed")
        stack.extend(reversed(subdirs))  # the first name pops first
