"""Hand-built tar headers for the differential tests of the C and Python tar readers:
every field spelled as the caller says (valid or not), the checksum computed unless told."""

from __future__ import annotations

import os
from pathlib import Path

from apexrl.artifacts import archive_write

USTAR = b"ustar\x0000"
GNU = b"ustar  \x00"


def header(
    name: bytes,
    size: int | bytes = 0,
    typeflag: bytes = b"0",
    *,
    prefix: bytes = b"",
    magic: bytes = USTAR,
    mode: bytes = b"0000644\0",
    linkname: bytes = b"",
    chksum: bytes | None = None,
) -> bytes:
    """One 512-byte header; `size` an int (octal, NUL-ended) or the field's raw 12 bytes."""
    h = bytearray(512)
    h[0:100] = name[:100].ljust(100, b"\0")
    h[100:108] = mode[:8].ljust(8, b"\0")
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = (b"%011o\0" % size) if isinstance(size, int) else size[:12].ljust(12, b"\0")
    h[136:148] = b"00000000000\0"
    h[156:157] = typeflag[:1] or b"\0"
    h[157:257] = linkname[:100].ljust(100, b"\0")
    h[257:265] = magic[:8].ljust(8, b"\0")
    h[345:500] = prefix[:155].ljust(155, b"\0")
    h[148:156] = b" " * 8
    h[148:156] = chksum if chksum is not None else b"%06o\0 " % sum(h)
    return bytes(h)


def fix_checksums(raw: bytearray, at: list[int]) -> None:
    """Recompute the checksum of the headers at these offsets (after a mutation)."""
    for pos in at:
        if pos + 512 <= len(raw):
            h = raw[pos : pos + 512]
            h[148:156] = b" " * 8
            raw[pos + 148 : pos + 156] = b"%06o\0 " % sum(h)


def pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


def pax(records: list[tuple[str, bytes]], *, typeflag: bytes = b"x") -> bytes:
    body = b"".join(archive_write._pax_record(k, v) for k, v in records)
    return header(b"././@PaxHeader", len(body), typeflag) + pad(body)


def member(name: bytes, data: bytes = b"", typeflag: bytes = b"0", **kw) -> bytes:
    return header(name, len(data), typeflag, **kw) + pad(data)


END = bytes(1024)


def task_tar(root: Path, prefix: str) -> bytes:
    """The files of a task folder as an uncompressed tar under `prefix/` (no end blocks)."""
    entries = [archive_write.Entry(prefix, "dir")]
    for rel, full, is_dir in archive_write.walk_sorted(root):
        name = f"{prefix}/{rel}"
        if is_dir:
            entries.append(archive_write.Entry(name, "dir"))
        else:
            entries.append(
                archive_write.file_entry(name, full, executable=os.access(full, os.X_OK))
            )
    return archive_write.tar_bytes(entries)[:-1024]


def two_tree_row(real: bytes, decoy: bytes, hidden: bytes) -> bytes:
    """Issue 29 finding 4: a PAX `path` record, then a GNU-magic header with a prefix, a
    trailing '/' and typeflag NUL whose data is the decoy tar (end blocks included). A
    reader that takes the data as a file's sees `real` after it; a reader that takes the
    header as a folder's reads the decoy's headers next and stops at its end blocks."""
    inner = decoy + END
    return (
        pax([("path", hidden)])
        + header(b"x/", len(inner), b"\0", prefix=b"p", magic=GNU)
        + pad(inner)
        + real
        + END
    )
