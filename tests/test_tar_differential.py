"""Differential fuzzing of apexrl's tar readers (issue 29, finding 4): the C fast path
(`_fasttar.members`, the exact plan `extract` writes), the lean Python parser and
tarfile's reading (the Python fallback) over crafted and mutated streams.

The one verdict per stream: where C takes an archive, Python reads the very same
members (names, kinds, exec bits, bytes); where the lean parser takes one, tarfile
reads the same members; anything else is refused or left to the one reader that
takes it. Bounded: hypothesis with fixed example counts, and a seeded loop of
mutations with the checksums fixed up (so mutations reach the field parsers instead
of stopping at the checksum). About 20 s here."""

from __future__ import annotations

import io
import os
import random
import tarfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apexrl.artifacts import _fasttar, archive_extract, archive_write
from apexrl.errors import BadRecordError
from tests import tar_craft as tc

LIMITS = archive_extract.Limits()

Norm = list[tuple[str, str, bool, bytes]]  # (name, kind, exec, data) as extraction writes


def _norm(raw: bytes, members: list) -> Norm | str:
    """Python members as the extractor would write them, or why it refuses."""
    out: Norm = []
    for m in members:
        try:
            name = archive_extract.check_name(m.name)
        except ValueError as e:
            return f"refused {m.name!r}: {e}"
        if not name:
            continue
        data = bytes(m.data) if m.kind == "file" and m.data is not None else b""
        link = m.linkname if m.kind in ("symlink", "hardlink") else ""
        out.append(
            (
                name,
                m.kind,
                bool(m.mode & 0o100) if m.kind == "file" else False,
                data + link.encode("utf-8", "surrogateescape"),
            )
        )
    return out


def python_verdict(raw: bytes, strip: str | None) -> Norm | str:
    try:
        members, bad = archive_extract.tar_members(raw, "fuzz", strip=strip)
    except BadRecordError as e:
        return f"refused: {e.detail}"
    if bad:
        return f"refused {bad[0]}"
    return _norm(raw, members)


def c_verdict(raw: bytes, strip: str | None) -> Norm | None:
    plan = _fasttar.members(raw, strip)
    if plan is None:
        return None
    return [
        (name.decode(), "dir" if is_dir else "file", bool(ex) and not is_dir, raw[off : off + size])
        for name, is_dir, ex, off, size in plan
    ]


def _raw_norm(raw: bytes, rows: list) -> list:
    """Raw member tuples of the lean parser or tarfile, compared name-normalised."""
    out = []
    for name, kind, size, mode, link, off in rows:
        try:
            name = archive_extract.check_name(name)
        except ValueError:
            name = "!" + name
        data = raw[off : off + size] if kind == "file" else b""
        ex = bool(mode & 0o100) if kind == "file" else False
        out.append((name, kind, ex, data, link if kind in ("symlink", "hardlink") else ""))
    return out


def check_one_verdict(raw: bytes, strip: str | None = "t") -> None:
    c = c_verdict(raw, strip)
    py = python_verdict(raw, strip)
    if c is not None:
        assert not isinstance(py, str), f"C takes a stream Python refuses: {py}"
        assert c == py, "C and Python read different trees"
    try:
        lean = archive_extract._lean_tar_members(raw)
    except archive_extract._Ambiguous:
        lean = None
        assert isinstance(py, str)  # refused by the one parse every reader takes
    if lean is not None:
        try:
            ref = archive_extract._tarfile_members(raw, "fuzz")
        except (BadRecordError, archive_extract._Ambiguous) as e:
            raise AssertionError(f"the lean parser takes a stream tarfile refuses: {e}") from None
        assert _raw_norm(raw, lean) == _raw_norm(raw, ref), "lean parser and tarfile differ"


# --- crafted streams ------------------------------------------------------------------------

_NAMES = [
    b"t/a", b"t/a/", b"t/", b"t", b"./t/a", b"t/./a", b"t//a", b"t/../a", b"/t/a", b"t/b/c",
    b"t/" + b"n" * 98, b"t/\xc3\xa9", b"t/\xff", b"", b"t/a\\b", b"a", b"t/a\0b",
]  # fmt: skip
_PAX_VALUES = [
    *_NAMES, b"t/" + b"L" * 150, b"t/" + b"/".join([b"d"] * 140), b"t/" + b"p" * 300,
    b"12", b"0", b"1024", b"-1", b"99999999999999999999", b" 5", b"x",
]  # fmt: skip
_PAX_KEYS = [
    "path", "path", "size", "linkpath", "mtime", "uid", "comment", "hdrcharset",
    "SCHILY.xattr.user.a", "GNU.sparse.name", "GNU.sparse.size",
]  # fmt: skip
_TYPES = [b"0", b"\0", b"5", b"0", b"5", b"1", b"2", b"3", b"6", b"7", b"L", b"K", b"S", b"Z", b"g"]
_MAGICS = [tc.USTAR, tc.GNU, b"ustar\0  ", b"\0" * 8, b"ustar\x0001"]
_PREFIXES = [b"", b"", b"", b"p", b"t", b"a/b", b"t/"]

_payload = st.one_of(
    st.just(b""),
    st.binary(max_size=600),
    st.just("inner"),  # a whole tar as the data (the decoy of finding 4)
)


@st.composite
def _block(draw) -> bytes:
    kind = draw(st.sampled_from(["member", "member", "member", "pax", "garbage"]))
    if kind == "garbage":
        return draw(st.binary(min_size=512, max_size=512))
    if kind == "pax":
        recs = draw(
            st.lists(
                st.tuples(st.sampled_from(_PAX_KEYS), st.sampled_from(_PAX_VALUES)),
                min_size=1,
                max_size=3,
            )
        )
        return tc.pax(recs, typeflag=draw(st.sampled_from([b"x", b"x", b"g"])))
    data = draw(_payload)
    if data == "inner":
        data = archive_write.tar_bytes([archive_write.bytes_entry("t/instruction.md", b"DECOY")])
    size_mode = draw(st.sampled_from(["exact", "exact", "exact", "zero", "plus", "minus", "raw"]))
    size: int | bytes = {
        "exact": len(data),
        "zero": 0,
        "plus": len(data) + 512,
        "minus": max(len(data) - 1, 0),
        "raw": draw(st.sampled_from([b"  " + b"%09o" % len(data) + b" ", b"\x80" + bytes(11)])),
    }[size_mode]
    head = tc.header(
        draw(st.sampled_from(_NAMES)),
        size,
        draw(st.sampled_from(_TYPES)),
        prefix=draw(st.sampled_from(_PREFIXES)),
        magic=draw(st.sampled_from(_MAGICS)),
        mode=draw(st.sampled_from([b"0000644\0", b"0000755\0", b"0000755 ", b"     7\0\0"])),
        linkname=draw(st.sampled_from([b"", b"t/a", b"../x", b"/etc/passwd"])),
    )
    if draw(st.integers(0, 9)) == 0:  # a signed or wrong checksum now and then
        head = head[:148] + draw(st.sampled_from([b"0000000\0", b"7777777\0"])) + head[156:]
    return head + tc.pad(data)


# derandomized: CI runs the same 600 streams every time (a longer exploration is a local run
# without it); a disagreement found there becomes a fixed case here, not a CI coin toss
@settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    blocks=st.lists(_block(), min_size=1, max_size=6),
    ending=st.sampled_from(["end", "end", "end+junk", "one-zero", "none"]),
    strip=st.sampled_from(["t", "t", None]),
)
def test_crafted_streams_get_one_verdict(blocks, ending, strip):
    raw = (
        b"".join(blocks)
        + {
            "end": tc.END,
            "end+junk": tc.END + b"junk" * 128,
            "one-zero": bytes(512),
            "none": b"",
        }[ending]
    )
    check_one_verdict(raw, strip)


# --- mutated streams ---------------------------------------------------------------------------


def _tarfile_tar(fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=fmt) as t:
        for name, kind, data in [
            ("t", "dir", b""),
            ("t/instruction.md", "file", b"hello\n" * 40),
            ("t/" + "long" * 40 + ".txt", "file", b"long name"),
            ("t/sub", "dir", b""),
            ("t/sub/run.sh", "exec", b"#!/bin/sh\n"),
            ("t/sub/link", "sym", b"../instruction.md"),
            ("t/hard", "hard", b"t/instruction.md"),
        ]:
            if fmt == tarfile.USTAR_FORMAT and len(name) > 100:
                continue
            info = tarfile.TarInfo(name)
            if kind in ("file", "exec"):
                info.size, info.mode = len(data), 0o755 if kind == "exec" else 0o644
                t.addfile(info, io.BytesIO(data))
            else:
                info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE}.get(
                    kind, tarfile.LNKTYPE
                )
                info.linkname = data.decode()
                t.addfile(info)
    return buf.getvalue()


_SEEDS = [
    archive_write.tar_bytes(
        [
            archive_write.Entry("t", "dir"),
            archive_write.bytes_entry("t/a.txt", b"alpha" * 30),
            archive_write.bytes_entry("t/" + "n" * 120 + "/deep.txt", b"long"),
            archive_write.bytes_entry("t/run.sh", b"#!/bin/sh\n", executable=True),
            archive_write.Entry("t/d", "dir"),
        ]
    ),
    _tarfile_tar(tarfile.PAX_FORMAT),
    _tarfile_tar(tarfile.GNU_FORMAT),
    _tarfile_tar(tarfile.USTAR_FORMAT),
    tc.member(b"t/a", b"x" * 700) + tc.member(b"t/d/", typeflag=b"\0") + tc.END,
]


def _headers(raw: bytes) -> list[int]:
    """Offsets of every header block of a well-formed seed (PAX and long-name included)."""
    out, pos = [], 0
    while pos + 512 <= len(raw) and raw[pos : pos + 512] != bytes(512):
        out.append(pos)
        size = int(raw[pos + 124 : pos + 136].split(b"\0")[0] or b"0", 8)
        pos += 512 + size + (-size % 512)
    return out


# Where a mutation matters: name end, mode, size, typeflag, linkname, magic, prefix.
_HOT = [*range(95, 100), *range(100, 108), *range(124, 136), 156, 157, *range(257, 265), 345, 346]
_VALUES = [
    0,
    0x20,
    ord("/"),
    ord("0"),
    ord("5"),
    ord("x"),
    ord("L"),
    ord("7"),
    0x80,
    0xFF,
    ord("."),
]


def _mutate(rng: random.Random, seed: bytes) -> bytes:
    raw = bytearray(seed)
    heads = _headers(seed)
    touched = set()
    for _ in range(rng.randint(1, 4)):
        h = rng.choice(heads)
        what = rng.random()
        if what < 0.6:
            at = h + rng.choice(_HOT)
        elif what < 0.8:  # inside a PAX record or a long name's data
            at = h + 512 + rng.randrange(64)
        else:
            at = h + rng.randrange(512)
        if at < len(raw):
            raw[at] = rng.choice(_VALUES) if rng.random() < 0.7 else rng.randrange(256)
            touched.add(h)
    if rng.random() < 0.9:
        tc.fix_checksums(raw, sorted(touched))
    if rng.random() < 0.1:
        raw = raw[: rng.randrange(len(raw))]
    return bytes(raw)


def test_mutated_streams_get_one_verdict():
    rng = random.Random(29)
    n = int(os.environ.get("APEXRL_TAR_FUZZ_N", "6000"))
    taken = 0
    for i in range(n):
        raw = _mutate(rng, _SEEDS[i % len(_SEEDS)])
        try:
            check_one_verdict(raw, "t" if i % 3 else None)
        except AssertionError as e:
            raise AssertionError(f"mutation {i} ({len(raw)} bytes, seed 29): {e}") from None
        taken += _fasttar.members(raw, "t") is not None
    assert taken > n // 20  # the loop reaches the C path, not only its refusals


@pytest.mark.parametrize("seed", range(len(_SEEDS)))
def test_the_seeds_agree_unmutated(seed):
    check_one_verdict(_SEEDS[seed])
    check_one_verdict(_SEEDS[seed], None)


# --- the gzip layer ------------------------------------------------------------------------------


def _tree(root) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_mutated_gzip_gets_one_verdict(tmp_path):
    """C inflates task binaries itself (zlib); Python through ISA-L's gunzip. Mutated
    headers, flags, trailers and members: where C writes a tree, gunzip reads the bytes
    that give that very tree."""
    import gzip

    rng = random.Random(2029)
    raw = _SEEDS[0]
    blobs = [
        archive_write.gzip_fast(raw),
        archive_write.gzip_bytes(raw),
        gzip.compress(raw, mtime=0),
    ]
    blobs.append(gzip.compress(raw[:1024], mtime=0) + gzip.compress(raw[1024:], mtime=0))
    lim = archive_extract.native_limits(LIMITS)
    taken = 0
    for i in range(int(os.environ.get("APEXRL_GZ_FUZZ_N", "300"))):
        data = bytearray(rng.choice(blobs))
        for _ in range(rng.randint(1, 3)):
            at = rng.choice([3, 4, 8, 9, *range(10, 20), len(data) - 8, len(data) - 4,
                             len(data) - 1, rng.randrange(len(data))])  # fmt: skip
            data[at % len(data)] = rng.randrange(256)
        if rng.random() < 0.2:
            data += rng.choice([b"\0" * 8, b"\x1f\x8b", b"junk", bytes(data[:40])])
        data = bytes(data)
        fast = tmp_path / f"c{i}"
        fast.mkdir()
        try:
            done = _fasttar.extract_gz(data, os.fspath(fast), "t", lim)
        except OSError:
            done = None
        if done is None:
            continue
        taken += 1
        try:
            inflated = archive_extract.gunzip(data, "fuzz", LIMITS)
        except BadRecordError as e:
            raise AssertionError(f"gzip {i}: C inflates a stream gunzip refuses: {e}") from None
        slow = tmp_path / f"py{i}"
        slow.mkdir()
        archive_extract._extract_tar_python(
            inflated, slow, "fuzz", "none", LIMITS, "t", False, len(data)
        )
        assert _tree(fast) == _tree(slow), f"gzip {i}"
    assert taken > 10
