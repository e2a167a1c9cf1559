"""The one place apexrl reads and extracts tar, gzip and zip archives (writing:
apexrl.artifacts.archive_write; a destination's lock: apexrl.artifacts.dirlock).

Extraction treats every archive as hostile:

- names: no absolute paths, no `..`, no NUL, no drive letters;
- kinds: regular files and folders only; devices and fifos are refused;
- links: refused unless the policy is `in_tree`; then each symlink and hard link
  is checked against the real filesystem once the tree is written (the final
  resolved path must stay inside the destination), so chains of links that are
  each harmless as text (`p/q/A -> ../..`, `U0 -> p/q/A/..`) are caught;
- writing never follows a link: every folder on a member's path is created by the
  extraction or checked with lstat to be a real folder, and files are created with
  O_EXCL|O_NOFOLLOW, so a link planted by an earlier member (or found in the
  destination) cannot redirect a write;
- limits: bytes per member, bytes in all, members, and the compression ratio
  (gzip and zip bombs stop before memory is spent); errors name the record and
  the member. Defaults come from `Limits` and can be raised with
  APEXRL_ARCHIVE_MAX_MEMBER_BYTES, APEXRL_ARCHIVE_MAX_TOTAL_BYTES,
  APEXRL_ARCHIVE_MAX_MEMBERS and APEXRL_ARCHIVE_MAX_RATIO.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Literal

from apexrl.artifacts.archive_write import COPY_BUFSIZE
from apexrl.errors import BadRecordError
from apexrl.host import env_int

LinkPolicy = Literal["none", "in_tree"]


# --- limits ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """What one archive may expand to. Ratio = bytes out / bytes in, checked once the
    output passes `ratio_floor` (small archives of repetitive text compress well)."""

    max_member_bytes: int = 512 * 1024 * 1024
    max_total_bytes: int = 2 * 1024 * 1024 * 1024
    max_members: int = 200_000
    max_ratio: float = 1000.0
    ratio_floor: int = 16 * 1024 * 1024

    @classmethod
    def from_env(cls, **overrides: Any) -> Limits:
        base = cls(**overrides)
        return cls(
            max_member_bytes=env_int(
                "APEXRL_ARCHIVE_MAX_MEMBER_BYTES", base.max_member_bytes, lift=False
            ),
            max_total_bytes=env_int(
                "APEXRL_ARCHIVE_MAX_TOTAL_BYTES", base.max_total_bytes, lift=False
            ),
            max_members=env_int("APEXRL_ARCHIVE_MAX_MEMBERS", base.max_members, lift=False),
            max_ratio=float(env_int("APEXRL_ARCHIVE_MAX_RATIO", int(base.max_ratio), lift=False)),
            ratio_floor=base.ratio_floor,
        )

    def check_ratio(self, out_bytes: int, in_bytes: int, where: str) -> None:
        if out_bytes > self.ratio_floor and out_bytes > self.max_ratio * max(in_bytes, 1):
            raise BadRecordError(
                where,
                f"refused: {in_bytes} compressed bytes expand past {out_bytes} bytes "
                f"(ratio over {self.max_ratio:g}; a compression bomb?)",
                hint="raise APEXRL_ARCHIVE_MAX_RATIO if the data is genuine",
            )


def gunzip(blob: bytes, where: str, limits: Limits | None = None) -> bytes:
    """Decompress gzip (multi-member too) without ever holding more than the limit.

    ISA-L's inflate (igzip, about 1.5-2x zlib's), one bounded call per member: the
    output may not pass what the limits allow for this many compressed bytes (the
    ratio, the total), so a bomb stops at that size, before memory is spent."""
    from isal import igzip_lib

    limits = limits or Limits.from_env()
    cap = limits.max_total_bytes + 64 * 1024 * 1024  # tar headers on top of the content
    allowed = min(cap, max(limits.ratio_floor, int(limits.max_ratio * max(len(blob), 1))))
    out: list[bytes] = []
    total = 0
    data: bytes = blob
    try:
        while data:
            d = igzip_lib.IgzipDecompressor(igzip_lib.DECOMP_GZIP)
            # igzip allocates max_length up front: start small, then double.
            step = max(len(data) * 8, 1 << 16)
            chunk = d.decompress(data, min(step, allowed - total + 1))
            while True:
                total += len(chunk)
                out.append(chunk)
                if total > allowed:
                    if total > cap:
                        raise BadRecordError(
                            where,
                            f"refused: expands to more than {cap} bytes",
                            hint="raise APEXRL_ARCHIVE_MAX_TOTAL_BYTES if the data is genuine",
                        )
                    limits.check_ratio(total, len(blob), where)  # raises: over the ratio
                if d.eof or d.needs_input or not chunk:
                    break
                step *= 2
                chunk = d.decompress(b"", min(step, allowed - total + 1))
            if not d.eof:
                raise BadRecordError(where, "not a valid gzip stream: truncated")
            data = d.unused_data.lstrip(b"\0")  # zero padding after the last member
    except igzip_lib.error as e:
        raise BadRecordError(where, f"not a valid gzip stream: {e}") from None
    except MemoryError:
        raise BadRecordError(where, "refused: out of memory while decompressing") from None
    return out[0] if len(out) == 1 else b"".join(out)


# --- extraction ----------------------------------------------------------------------------


@dataclass
class Member:
    """One archive member as extraction sees it (name already relative and checked)."""

    name: str
    kind: str  # "file" | "dir" | "symlink" | "hardlink"
    size: int = 0
    mode: int = 0o644
    linkname: str = ""
    read: Callable[[], IO[bytes]] | None = None  # file content (or `data`)
    label: str = ""  # the name as the archive spells it, for errors
    data: memoryview | bytes | None = None  # file content already in memory

    def open(self) -> IO[bytes]:
        if self.data is not None:
            return io.BytesIO(self.data)
        assert self.read is not None
        return self.read()


@dataclass
class Refused:
    name: str
    reason: str


@dataclass
class Extracted:
    n_files: int = 0
    n_dirs: int = 0
    n_links: int = 0
    bytes: int = 0
    refused: list[Refused] = field(default_factory=list)


def check_name(name: str) -> str:
    """The member's normalised relative name ('' for the root), or ValueError saying why."""
    if (
        name
        and name[0] not in "/."
        and "/." not in name
        and "//" not in name
        and "\\" not in name
        and "\x00" not in name
        and name[-1] != "/"
    ):  # the common case: no part to drop or refuse, nothing to rewrite
        return name
    n = name.replace("\\", "/")
    if "\x00" in n:
        raise ValueError("NUL in name")
    if n.startswith("/"):
        raise ValueError("absolute path refused")
    parts = [p for p in n.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ValueError("path traversal ('..') refused")
    return "/".join(parts)


def tar_members(
    raw: bytes, where: str, *, strip: str | None = None
) -> tuple[list[Member], list[tuple[str, str]]]:
    """Parse an uncompressed tar held in memory. Returns (members, bad) where bad lists
    (label, reason) for kinds extraction never writes (devices, fifos, unknown).

    With `strip`, a leading `<strip>/` shared by every member is removed. The formats
    apexrl and common tools write (ustar, POSIX/PAX, GNU without long-name records)
    go through a lean parser that still checks every header's checksum, octal fields
    and bounds; anything else falls back to the standard library's tarfile, whose
    reading is the reference the lean parser and the C fast path follow.

    One verdict per archive: a stream that tar readers take apart differently (a
    folder or link header carrying data, a GNU header with a ustar prefix, a folder
    marked by a trailing '/' renamed by PAX, a header tarfile stops at before the
    end-of-archive block) is refused here, whichever parser reads it, and the C fast
    path declines it, so no reader of a task binary sees a tree another does not."""
    try:
        raw_members = _lean_tar_members(raw)
        if raw_members is None:
            raw_members = _tarfile_members(raw, where)
    except _Ambiguous as e:
        raise BadRecordError(
            where,
            f"refused: {e} (tar readers disagree on what this archive holds)",
            hint="repack the task with `apexrl tasks pack`",
        ) from None
    prefix = f"{strip}/" if strip else None
    do_strip = bool(prefix) and all(
        m[0] == strip or m[0].startswith(prefix)  # type: ignore[arg-type]
        for m in raw_members
    )
    members: list[Member] = []
    bad: list[tuple[str, str]] = []
    mv = memoryview(raw)
    for label, kind, size, mode, link, off in raw_members:
        name = label
        if do_strip:
            if name == strip:
                continue
            name = name[len(prefix) :]  # type: ignore[arg-type]
        if kind == "file":
            data = mv[off : off + size]
            members.append(
                Member(name, "file", size, mode, "", lambda d=data: io.BytesIO(d), label, data)
            )
        elif kind == "dir":
            members.append(Member(name, "dir", 0, mode, label=label))
        elif kind == "symlink":
            members.append(Member(name, "symlink", 0, 0o777, link, label=label))
        elif kind == "hardlink":
            if do_strip and link.startswith(prefix):  # type: ignore[arg-type]
                link = link[len(prefix) :]  # type: ignore[arg-type]
            members.append(Member(name, "hardlink", 0, 0o644, link, label=label))
        else:
            bad.append((label, "device or fifo refused"))
    return members, bad


# (name, kind, size, mode, linkname, data offset) per member, names as in the archive.
_RawMember = tuple[str, str, int, int, str, int]
_ZERO_BLOCK = bytes(512)
_LEAN_KINDS = {b"0": "file", b"\0": "file", b"5": "dir", b"2": "symlink", b"1": "hardlink"}
_PAX_IGNORED = frozenset(
    (b"mtime", b"atime", b"ctime", b"uid", b"gid", b"uname", b"gname", b"comment")
)


class _NotLean(Exception):
    """The archive uses a feature the lean parser leaves to tarfile."""


class _Ambiguous(Exception):
    """A header that tar readers read differently: refused by every parser."""


_GNU_MAGIC = b"ustar  \0"


def _ambiguity(head: bytes, kind: str, size: int, pax_path: bytes | None) -> str | None:
    """Why the member whose own header block is `head` reads as two different things to
    two tar readers, or None. `kind` as the reader took it ("file", "dir", "link" or
    "other"), `size` the data it did not skip (PAX applied): tarfile reads the next
    header right after a folder's or a link's header, other readers skip `size` bytes."""
    typeflag = head[156:157]
    if head[257:265] == _GNU_MAGIC and head[345] and typeflag not in (b"L", b"K", b"S"):
        return "a GNU header with bytes in its ustar prefix field (a name prefix to some readers)"
    if typeflag == b"\0":
        by_slash = head[:100].split(b"\0", 1)[0].endswith(b"/")
        if pax_path is not None and pax_path.endswith(b"/") != by_slash:
            return "a header marked a file or a folder only by a trailing '/', renamed by PAX"
    if size and kind != "file":
        what = {"dir": "folder", "symlink": "link", "hardlink": "link"}.get(kind, kind)
        return f"a {what} header followed by {size} bytes of data"
    return None


def _octal(field: bytes) -> int:
    if field[-1] == 0 and field[0] != 32 and _OCTAL_DIGITS.issuperset(field[:-1]):
        return int(field[:-1], 8)  # the usual spelling: zero-padded digits, one NUL
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if text.strip(b"01234567"):  # base-256, a sign or garbage: tarfile decides
        raise _NotLean
    return int(text, 8)


def _pax_records(data: bytes) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 24)
        if space < 0:
            raise _NotLean
        length = int(data[pos:space]) if data[pos:space].isdigit() else 0
        end = pos + length
        if length <= space - pos + 1 or end > len(data) or data[end - 1 : end] != b"\n":
            raise _NotLean
        key, eq, value = data[space + 1 : end - 1].partition(b"=")
        if not eq:
            raise _NotLean
        out[key] = value
        pos = end
    return out


def _lean_tar_members(raw: bytes) -> list[_RawMember] | None:
    """The members of a plain ustar/PAX/GNU tar, or None to let tarfile parse it."""
    try:
        return _lean_parse(raw)
    except (_NotLean, ValueError):
        return None


# The ustar header's fields in order (name, mode, uid, gid, size, mtime, chksum,
# typeflag, linkname, magic+version, uname, gname, devmajor, devminor, prefix, pad).
_USTAR = struct.Struct("100s8s8s8s12s12s8sc100s8s32s32s8s8s155s12x")
_OCTAL_DIGITS = frozenset(b"01234567")
# A header as apexrl and GNU tar spell it: every number field (mode, uid, gid, size,
# mtime, checksum, device numbers) zero-padded octal digits ending in NUL (checksum:
# six digits, NUL, space; device numbers may be empty), ustar or GNU magic. tarfile
# reads every number field, and stops at a header where one is not a number.
_FAST_HEADER = re.compile(
    rb"(?s).{100}([0-7]{7})\0[0-7]{7}\0[0-7]{7}\0([0-7]{11})\0[0-7]{11}\0([0-7]{6})\0 (.)"
    rb"(.{100})(ustar\x0000|ustar  \0).{64}(?:[0-7]{7}\0|\0{8}){2}"
)


def _lean_parse(raw: bytes) -> list[_RawMember]:
    n = len(raw)
    pos = 0
    out: list[_RawMember] = []
    append = out.append
    unpack_from = _USTAR.unpack_from
    adler32 = zlib.adler32
    fast_header = _FAST_HEADER.match
    pax: dict[bytes, bytes] | None = None
    while True:
        if pos + 512 > n:
            raise _NotLean  # no end-of-archive block: tarfile's rules for a short tar
        # The header's byte sum (the checksum field counted as spaces) through Adler-32,
        # whose low half is 1 + the byte sum mod 65521: exact for 256 bytes (at most
        # 65280), so two halves give the sum in C instead of 512 steps of sum().
        total = adler32(raw[pos : pos + 256]) & 0xFFFF
        total += adler32(raw[pos + 256 : pos + 512]) & 0xFFFF
        fast = fast_header(raw, pos)
        if fast is not None:  # the usual spelling: fields read by one regex match
            mode_o, size_o, chk_o, typeflag, link_f, magic = fast.groups()
            name_f = raw[pos : pos + 100]
            prefix_f = raw[pos + 345 : pos + 500]
            mode_f = b"%s\0" % mode_o
            if int(chk_o, 8) != total - 2 - sum(chk_o) + 224:  # "\0 " counted as spaces
                raise _NotLean
            size = int(size_o, 8)
            gnu = magic == b"ustar  \0"
        else:
            fields = unpack_from(raw, pos)
            (name_f, mode_f, uid_f, gid_f, size_f, mtime_f, chk_f, typeflag, link_f, magic) = (
                fields[:10]
            )
            prefix_f = fields[14]
            if chk_f == b"\0\0\0\0\0\0\0\0" and raw[pos : pos + 512] == _ZERO_BLOCK:
                if pax is not None:
                    raise _NotLean
                return out
            for number in (mode_f, uid_f, gid_f, mtime_f, fields[12], fields[13]):
                _octal(number)  # not a number: tarfile stops here, or reads base-256
            if _octal(chk_f) != total - 2 - sum(chk_f) + 256:
                raise _NotLean  # a bad (or signed) checksum: tarfile reports or accepts it
            gnu = magic == b"ustar  \0"
            if not gnu and magic[:6] != b"ustar\0":
                raise _NotLean  # v7 and other dialects
            size = _octal(size_f)
        data_at = pos + 512
        end = data_at + size + (-size % 512)
        if end > n:
            raise _NotLean  # truncated
        if typeflag == b"x":
            if pax is not None:
                raise _NotLean
            pax = _pax_records(raw[data_at : data_at + size])
            pos = end
            continue
        kind = _LEAN_KINDS.get(typeflag)
        if kind is None:
            raise _NotLean  # devices, fifos, GNU long names, sparse, global headers
        name_b = name_f.split(b"\0", 1)[0]
        if typeflag == b"\0" and name_b.endswith(b"/"):
            kind = "dir"  # old tars mark folders by a trailing slash of the header's name
        pax_path = pax.get(b"path") if pax is not None else None
        if prefix_f[0]:
            if gnu:  # GNU keeps times there; other readers a name prefix
                raise _Ambiguous(_ambiguity(raw[pos : pos + 512], kind, 0, pax_path))
            name_b = prefix_f.split(b"\0", 1)[0] + b"/" + name_b
        name = name_b.decode("utf-8", "surrogateescape")
        link = ""
        if link_f[0]:
            link = link_f.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        if pax is not None:
            for key, value in pax.items():
                if key == b"path":
                    name = value.decode("utf-8")
                elif key == b"linkpath":
                    link = value.decode("utf-8")
                elif key == b"size":
                    if not value.isdigit():
                        raise _NotLean
                    size = int(value)
                    end = data_at + size + (-size % 512)
                    if end > n:
                        raise _NotLean
                elif key not in _PAX_IGNORED and not key.startswith(b"SCHILY."):
                    raise _NotLean  # hdrcharset, GNU.sparse.*, ...: tarfile's semantics
            pax = None
        if typeflag == b"\0" or (size and kind != "file"):
            why = _ambiguity(raw[pos : pos + 512], kind, size, pax_path)
            if why:
                raise _Ambiguous(why)
        if kind == "file":
            append((name, kind, size, _octal(mode_f), "", data_at))
            pos = end
            continue
        if kind == "dir":
            append((name.rstrip("/"), kind, 0, _octal(mode_f), "", 0))
        else:
            append((name, kind, 0, 0o777 if kind == "symlink" else 0o644, link, 0))
        pos = end


def _tarfile_members(raw: bytes, where: str) -> list[_RawMember]:
    import tarfile

    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            infos = tar.getmembers()
            stop = tar.offset
    except (tarfile.TarError, EOFError, ValueError, OverflowError) as e:  # a huge size field
        raise BadRecordError(where, f"not a valid tar: {e}") from None
    if stop < len(raw) and raw[stop : stop + 512] != _ZERO_BLOCK:
        # tarfile ends quietly at a header it cannot read; other readers go on past it
        raise _Ambiguous(f"an unreadable header at byte {stop}, before the end-of-archive block")
    out: list[_RawMember] = []
    for m in infos:
        kind = "file" if m.isfile() else "dir" if m.isdir() else "other"
        kind = "link" if m.issym() or m.islnk() else kind
        unskipped = 0 if m.isreg() or m.type not in tarfile.SUPPORTED_TYPES else m.size
        path = m.pax_headers.get("path")
        path_b = path.encode("utf-8", "surrogateescape") if path is not None else None
        why = _ambiguity(raw[m.offset_data - 512 : m.offset_data], kind, unskipped, path_b)
        if why:
            raise _Ambiguous(why)
        if m.isfile():
            out.append((m.name, "file", m.size, m.mode, "", m.offset_data))
        elif m.isdir():
            out.append((m.name, "dir", 0, m.mode, "", 0))
        elif m.issym():
            out.append((m.name, "symlink", 0, 0o777, m.linkname, 0))
        elif m.islnk():
            out.append((m.name, "hardlink", 0, 0o644, m.linkname, 0))
        else:
            out.append((m.name, "other", 0, 0, "", 0))
    return out


def _slice_reader(mv: memoryview, off: int, size: int) -> Callable[[], IO[bytes]]:
    return lambda: io.BytesIO(mv[off : off + size])


def extract_tar(
    raw: bytes,
    dest: Path,
    *,
    where: str,
    links: LinkPolicy = "none",
    limits: Limits | None = None,
    strip: str | None = None,
    skip_refused: bool = False,
    compressed_size: int | None = None,
    empty: bool = False,
) -> Extracted:
    """Extract an uncompressed tar (bytes) into the existing, empty folder `dest`
    (`empty`: the caller made it just now, so the fast path need not look).

    A plain archive (files and folders, nothing to refuse or normalise) goes through
    the C fast path; anything else, and any archive where it is not built, through
    the Python extractor, which names what it refuses."""
    limits = limits or Limits.from_env()
    compressed = compressed_size if compressed_size is not None else len(raw)
    done = _extract_native("extract", raw, dest, limits, strip, empty, compressed)
    if done is not None:
        return done
    return _extract_tar_python(raw, dest, where, links, limits, strip, skip_refused, compressed)


def extract_targz(
    blob: bytes,
    dest: Path,
    *,
    where: str,
    links: LinkPolicy = "none",
    limits: Limits | None = None,
    strip: str | None = None,
    skip_refused: bool = False,
    empty: bool = False,
    native: bool = True,
) -> Extracted:
    """extract_tar of a gzip tar. The C fast path inflates it too (zlib, within the bound
    `gunzip` keeps), so one call without the GIL does a task's whole unpack; `native`
    False goes straight to the Python extractor (the fast path declined already)."""
    limits = limits or Limits.from_env()
    done = _extract_native("extract_gz", blob, dest, limits, strip, empty) if native else None
    if done is not None:
        return done
    raw = gunzip(blob, where, limits)
    return _extract_tar_python(raw, dest, where, links, limits, strip, skip_refused, len(blob))


def extract_tar_or_targz(blob: bytes, dest: Path, *, where: str, **kw: Any) -> Extracted:
    """extract_targz when `blob` starts with gzip's magic, else extract_tar: for archives
    whose writer may or may not compress (a SkyRL adapter, a sandbox's world snapshot)."""
    extract = extract_targz if blob[:2] == b"\x1f\x8b" else extract_tar
    return extract(blob, dest, where=where, **kw)


def _extract_tar_python(
    raw: bytes,
    dest: Path,
    where: str,
    links: LinkPolicy,
    limits: Limits,
    strip: str | None,
    skip_refused: bool,
    compressed_size: int,
) -> Extracted:
    members, bad = tar_members(raw, where, strip=strip)
    return extract_members(
        members,
        dest,
        where=where,
        links=links,
        limits=limits,
        bad=bad,
        skip_refused=skip_refused,
        compressed_size=compressed_size,
    )


_NATIVE_UNSET = object()
_native: Any = _NATIVE_UNSET


def native_tar() -> Any:
    """The C fast path (`apexrl.artifacts._fasttar`, built from _fasttar.c by `make install`),
    or None where it is not built or APEXRL_NATIVE_TAR=0 turns it off."""
    global _native
    if _native is _NATIVE_UNSET:
        try:
            from apexrl.artifacts import _fasttar
        except ImportError:
            _fasttar = None
        _native = _fasttar
    if os.environ.get("APEXRL_NATIVE_TAR", "1") == "0":
        return None
    return _native


def native_limits(limits: Limits) -> tuple:
    """The limits as the C fast path takes them (the process umask last)."""
    return (
        limits.max_members,
        limits.max_member_bytes,
        limits.max_total_bytes,
        float(limits.max_ratio),
        limits.ratio_floor,
        _umask(),
    )


def _extract_native(
    fn: str, data: bytes, dest: Path, limits: Limits, strip: str | None, empty: bool, *extra: int
) -> Extracted | None:
    """The tree written by the C fast path (`fn` of _fasttar), or None, nothing written,
    when the archive is not plain or the module is not built. A write that fails part
    way (a duplicate name, a file where a folder goes) is undone here, so the Python
    extractor starts from the same empty folder and decides."""
    native = native_tar()
    if native is None:
        return None
    base = os.fspath(dest)
    try:
        if not empty and os.listdir(base):
            return None  # only into an empty folder: undoing a failed write empties it
    except OSError:
        return None
    try:
        done = getattr(native, fn)(data, base, strip, native_limits(limits), *extra)
    except OSError:
        empty_folder(base)
        return None
    if done is None:
        return None
    return Extracted(n_files=done[0], n_dirs=done[1], bytes=done[2])


def empty_folder(base: str) -> None:
    """Remove what the fast path wrote (files and folders only: it makes no links)."""
    import shutil

    with os.scandir(base) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def zip_members(zf: Any, where: str) -> tuple[list[Member], list[tuple[str, str]]]:
    members: list[Member] = []
    bad: list[tuple[str, str]] = []
    for info in zf.infolist():
        name = info.filename.replace("\\", "/")
        if len(name) > 1 and name[0].isascii() and name[0].isalpha() and name[1] == ":":
            bad.append((info.filename, "absolute path refused (a drive letter)"))
            continue
        mode = (info.external_attr >> 16) & 0xFFFF
        kind = stat.S_IFMT(mode)
        if info.is_dir():
            members.append(Member(info.filename, "dir", 0, 0o755, label=info.filename))
        elif kind == stat.S_IFLNK:
            if info.file_size > 4096:
                bad.append((info.filename, "link target too long"))
                continue
            target = zf.read(info).decode("utf-8", "replace")
            members.append(Member(info.filename, "symlink", 0, 0o777, target, label=info.filename))
        elif kind in (0, stat.S_IFREG):
            members.append(
                Member(
                    info.filename,
                    "file",
                    info.file_size,
                    mode & 0o777,
                    "",
                    lambda i=info: zf.open(i),
                    info.filename,
                )
            )
        else:
            bad.append((info.filename, "not a file, folder or link"))
    return members, bad


def open_zip(path: Path, where: str) -> Any:
    """The zipfile.ZipFile of `path`, or a BadRecordError naming `where` when it is not
    a zip that can be read."""
    import zipfile

    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadRecordError(where, f"not a readable zip: {e}") from None


def extract_zip(
    path: Path,
    dest: Path,
    *,
    where: str | None = None,
    links: LinkPolicy = "none",
    limits: Limits | None = None,
) -> Extracted:
    """Extract a zip file into the existing folder `dest` (nothing written when refused)."""
    import zipfile

    where = where or str(path)
    with open_zip(path, where) as zf:
        members, bad = zip_members(zf, where)
        try:
            return extract_members(
                members,
                dest,
                where=where,
                links=links,
                limits=limits,
                bad=bad,
                compressed_size=os.path.getsize(path),
            )
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:
            raise BadRecordError(where, f"corrupt zip member: {e}") from None


def extract_members(
    members: list[Member],
    dest: Path,
    *,
    where: str,
    links: LinkPolicy = "none",
    limits: Limits | None = None,
    bad: list[tuple[str, str]] | None = None,
    skip_refused: bool = False,
    compressed_size: int = 0,
) -> Extracted:
    """Check every member, then write them under `dest` without following any link.

    Refusals raise a BadRecordError naming `where` and the member, before anything
    is written when the check is static; with `skip_refused` they are recorded in
    the result instead and the member is skipped. A failure part way (a link
    found escaping after the write) raises too: callers extract into a temp
    folder and discard it on error."""
    limits = limits or Limits.from_env()
    result = Extracted()

    def refuse(label: str, reason: str, hint: str | None = None) -> None:
        if skip_refused:
            result.refused.append(Refused(label, reason))
            return
        raise BadRecordError(f"{where} member {label!r}", reason, hint=hint)

    for label, reason in bad or []:
        refuse(label, reason)
    if len(members) > limits.max_members:
        raise BadRecordError(
            where,
            f"refused: {len(members)} members (limit {limits.max_members})",
            hint="raise APEXRL_ARCHIVE_MAX_MEMBERS if the data is genuine",
        )
    checked: list[Member] = []
    total = 0
    for m in members:
        label = m.label or m.name
        try:
            m.name = check_name(m.name)
        except ValueError as e:
            refuse(label, str(e))
            continue
        if not m.name:
            continue
        if m.kind in ("symlink", "hardlink"):
            if links == "none":
                refuse(label, f"link to {m.linkname!r} refused (links are not allowed here)")
                continue
            if "\x00" in m.linkname or m.linkname.startswith("/") or not m.linkname:
                refuse(label, f"link to {m.linkname!r} leaves the tree")
                continue
            base = "" if m.kind == "hardlink" else posixpath_dir(m.name)
            rel = os.path.normpath(os.path.join(base, m.linkname))
            if rel == ".." or rel.startswith("../"):
                refuse(label, f"link to {m.linkname!r} leaves the tree")
                continue
        if m.size > limits.max_member_bytes:
            refuse(
                label,
                f"member of {m.size} bytes exceeds the {limits.max_member_bytes}-byte limit",
                hint="raise APEXRL_ARCHIVE_MAX_MEMBER_BYTES if the data is genuine",
            )
            continue
        total += m.size
        if total > limits.max_total_bytes:
            raise BadRecordError(
                where,
                f"refused: expands to more than {limits.max_total_bytes} bytes",
                hint="raise APEXRL_ARCHIVE_MAX_TOTAL_BYTES if the data is genuine",
            )
        if compressed_size:
            limits.check_ratio(total, compressed_size, where)
        checked.append(m)
    with _Tree(Path(dest), where) as tree:
        for m in checked:
            label = m.label or m.name
            try:
                if m.kind == "dir":
                    tree.mkdir(m.name)
                    result.n_dirs += 1
                elif m.kind == "file":
                    result.bytes += tree.write_file(m, limits)
                    result.n_files += 1
                elif m.kind == "symlink":
                    tree.symlink(m.name, m.linkname)
                    result.n_links += 1
                elif m.kind == "hardlink":
                    tree.hardlink(m.name, m.linkname)
                    result.n_links += 1
            except _Refusal as e:
                refuse(label, str(e))
        if tree.made_links:
            for rel, reason in tree.escaping_links():
                if not skip_refused:
                    raise BadRecordError(f"{where} member {rel!r}", reason)
                tree.remove(rel)
                result.refused.append(Refused(rel, reason))
    return result


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


_UMASK: tuple[int, int] | None = None  # (pid, umask)


def _umask() -> int:
    """The process umask, read without changing it (os.umask would, racing threads);
    read once per process (a worker extracts thousands of archives)."""
    global _UMASK
    pid = os.getpid()
    if _UMASK is None or _UMASK[0] != pid:
        _UMASK = (pid, _read_umask())
    return _UMASK[1]


def _read_umask() -> int:
    try:
        fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        try:
            text = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
        at = text.index(b"\nUmask:") + 7
        return int(text[at : text.index(b"\n", at)].strip(), 8)
    except (OSError, ValueError):
        pass
    return 0o777  # unknown: always set the mode explicitly


def posixpath_dir(name: str) -> str:
    return str(PurePosixPath(name).parent) if "/" in name else ""


class _Refusal(Exception):
    pass


class _Tree:
    """Writes under a root folder without ever following a link.

    Every folder on a member's path is either created here (mkdir: a new real folder)
    or checked with lstat to be a real folder, never a link; files, links and hard
    links are then created with O_EXCL/O_NOFOLLOW (no link at the last component).
    This holds while nothing else writes into the destination during extraction:
    callers extract into a fresh private temp folder (or hold `dir_lock`)."""

    def __init__(self, root: Path, where: str) -> None:
        self.root = root
        self.where = where
        self.base = os.fspath(root)
        self.real_dirs: set[str] = {""}
        self.made_links = False
        self.umask = _umask()

    def __enter__(self) -> _Tree:
        try:
            st = os.lstat(self.base)
        except FileNotFoundError:
            os.makedirs(self.base, 0o755, exist_ok=True)
            st = os.lstat(self.base)
        if not stat.S_ISDIR(st.st_mode):
            raise BadRecordError(self.where, f"destination {self.base} is not a folder (a link?)")
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def dir_path(self, rel: str) -> str:
        """The full path of folder `rel`, created as needed, checked to be no link."""
        full = f"{self.base}/{rel}" if rel else self.base
        if rel in self.real_dirs:
            return full
        missing = []  # from `rel` up to the nearest folder already made (a loop: any depth)
        while rel not in self.real_dirs:
            missing.append(rel)
            rel = rel.rpartition("/")[0]
        for folder in reversed(missing):
            path = f"{self.base}/{folder}"
            try:
                os.mkdir(path, 0o755)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    raise _Refusal(f"path goes through a link or a file ({folder!r})") from None
            self.real_dirs.add(folder)
        return full

    def mkdir(self, rel: str) -> None:
        self.dir_path(rel)

    def write_file(self, m: Member, limits: Limits) -> int:
        parent, _, leaf = m.name.rpartition("/")
        full = f"{self.dir_path(parent)}/{leaf}"
        mode = 0o755 if m.mode & 0o100 else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(full, flags, mode)
        except FileExistsError:  # a later duplicate replaces an earlier file
            if stat.S_ISDIR(os.lstat(full).st_mode):
                raise _Refusal("a file and a folder share this name") from None
            os.unlink(full)
            fd = os.open(full, flags, mode)
        written = 0
        try:
            if m.data is not None:  # in memory (a tar): one write, no copies
                written = len(m.data)
                if written > m.size:
                    raise _Refusal(f"member is larger than its declared {m.size} bytes")
                if written:
                    _write_all(fd, m.data)
            else:
                assert m.read is not None
                with m.read() as src:
                    while True:
                        chunk = src.read(COPY_BUFSIZE)
                        if not chunk:
                            break
                        written += len(chunk)
                        if written > m.size:  # m.size was checked against the limit
                            raise _Refusal(f"member is larger than its declared {m.size} bytes")
                        _write_all(fd, chunk)
            if mode & self.umask:  # the umask took bits off at creation: set them
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        return written

    def symlink(self, rel: str, target: str) -> None:
        parent, _, leaf = rel.rpartition("/")
        full = os.path.join(self.dir_path(parent), leaf)
        self.made_links = True
        try:
            os.symlink(target, full)
        except FileExistsError:
            raise _Refusal("a member of this name already exists") from None

    def hardlink(self, rel: str, target: str) -> None:
        parent, _, leaf = rel.rpartition("/")
        tparent, _, tleaf = target.rpartition("/")
        full = os.path.join(self.dir_path(parent), leaf)
        tfull = os.path.join(self.dir_path(tparent), tleaf)
        try:
            st = os.lstat(tfull)
        except FileNotFoundError:
            raise _Refusal(f"hard link to {target!r}, not in the archive before it") from None
        if not stat.S_ISREG(st.st_mode):
            raise _Refusal(f"hard link to {target!r}, which is not a regular file")
        self.made_links = True
        try:
            os.link(tfull, full, follow_symlinks=False)
        except FileExistsError:
            raise _Refusal("a member of this name already exists") from None

    def escaping_links(self) -> list[tuple[str, str]]:
        """Every symlink now in the tree whose final resolved path leaves the root
        (resolved against the real filesystem, so chains of links count)."""
        root = os.path.realpath(self.root)
        out = []
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                if not os.path.islink(full):
                    continue
                real = os.path.realpath(full)
                if real != root and not real.startswith(root + os.sep):
                    rel = os.path.relpath(full, root)
                    out.append((rel, f"link to {os.readlink(full)!r} leaves the tree"))
        return out

    def remove(self, rel: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(self.root, rel))
