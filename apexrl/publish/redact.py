"""Redaction of secrets in anything staged for upload: the one byte scanner.

Two sources, both from `apexrl.secrets`: the values of every secret env key that is set
(`SECRET_ENV_KEYS`), and credential shapes (`CREDENTIAL_PATTERNS`: cloud keys,
Hub/OpenAI/GitHub tokens, private key blocks, bearer tokens). Every byte publish stages
goes through `bytes_text` (files, archive members, log tails) or `text` (strings read
from JSON). What they find:

- credential shapes anywhere, glued to a prefix too (`MYKEY_hf_...`; see
  `secrets.GLUED_NEEDS_MIXED_CASE` for what keeps words out);
- a known secret's value as it is, split across lines (a line break, `\\r`, or a JSON
  `\\n` escape, then indentation, between any two characters), and in base64
  (standard or URL-safe, at any alignment, wrapped or not);
- in UTF-8, any 8-bit encoding (read as Latin-1), and UTF-16LE/BE with or without a BOM
  (runs of ASCII code units, at either byte alignment);
- in escaped text as it reads decoded (JSON, `\\xHH`; up to 3 levels: a tool result
  stored as JSON text inside a JSON trace), so `\\naws_secret_access_key=...` is a
  line that starts with the key name, not a word that ends in `naws`;
- inside zip, gzip and tar archives whatever the file is called (3 levels deep), the
  archive rebuilt with the matches redacted.

A match is replaced by `[REDACTED:<kind>]` in text, masked with '*' of the same length in
binary data, and recorded as a finding (never with its value).
"""

from __future__ import annotations

import base64
import bisect
import os
import re
from collections import Counter
from typing import Any

from apexrl import secrets
from apexrl.publish.models import RedactionFinding

# between any two characters of a known value: nothing, or one line break (a real one
# or a JSON escape) and the indentation or quoting that wrapped text starts lines with
_BREAK = r"(?:(?:\r\n|\r|\n|\\r\\n|\\n|\\r)[ \t>#*|]*)?"
# runs of ASCII code units of UTF-16 text, little- and big-endian (at least 8 units)
_UTF16_RUNS = (
    (re.compile(r"(?:[\t\n\r\x20-\x7e]\x00){8,}"), 0),
    (re.compile(r"(?:\x00[\t\n\r\x20-\x7e]){8,}"), 1),
)
_WORD = re.compile(r"[A-Za-z0-9_]")
# one escaped character of JSON (or Python) string text
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|[\\\"'/bfnrtv])")
_ESCAPED = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
MAX_ESCAPE_DEPTH = 3  # text escaped in text escaped in text
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024  # bigger archives are scanned as binary instead
MAX_DEPTH = 3  # archives in archives

Hit = tuple[int, int, str]  # (start, end, kind)


def _broken(text: str) -> str:
    """A regex for `text` with an optional line break between any two characters."""
    return _BREAK.join(re.escape(c) for c in text)


def base64_fragments(value: bytes) -> set[str]:
    """The base64 characters that depend on `value` alone, at each of the three byte
    alignments it can have in a longer stream; standard and URL-safe alphabets."""
    out: set[str] = set()
    for k in range(3):
        enc = base64.b64encode(bytes(k) + value + bytes(2)).decode()
        frag = enc[-(-8 * k // 6) : 8 * (k + len(value)) // 6]
        if len(frag) >= 8:
            out |= {frag, frag.translate(str.maketrans("+/", "-_"))}
    return out


_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{16,}")
_DIGITS = re.compile(r"[0-9]+")


def _random_looking(s: str, digits: bool) -> bool:
    """A run of 16+ letters and digits that mixes cases (and holds digits in two places
    or more, with `digits`): what a token glued to a word must show (secrets.py)."""
    return any(
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and (not digits or len(_DIGITS.findall(run)) >= 2)
        for run in _ALNUM_RUN.findall(s)
    )


class _Unescaped:
    """`raw` with one level of escapes decoded, and the way back: a decoded offset to the
    raw offset it starts at (an escape is one decoded character)."""

    def __init__(self, raw: str) -> None:
        parts: list[str] = []
        self._dec: list[int] = []  # where each segment starts, decoded and raw
        self._raw: list[int] = []
        at = d = 0
        for m in _ESCAPE.finditer(raw):
            if m.start() > at:
                self._segment(parts, raw[at : m.start()], d, at)
                d += m.start() - at
            self._segment(parts, _unescape_one(m[0]), d, m.start())
            d += 1
            at = m.end()
        if at < len(raw):
            self._segment(parts, raw[at:], d, at)
        self.text = "".join(parts)
        self._len_raw = len(raw)

    def _segment(self, parts: list[str], text: str, d: int, r: int) -> None:
        parts.append(text)
        self._dec.append(d)
        self._raw.append(r)

    def raw(self, p: int) -> int:
        """The raw offset of decoded offset `p` (0 to len(text))."""
        if p >= len(self.text):
            return self._len_raw
        i = bisect.bisect_right(self._dec, p) - 1
        return self._raw[i] + (p - self._dec[i])


def _unescape_one(esc: str) -> str:
    c = esc[1]
    if c in "ux":
        return chr(int(esc[2:], 16))
    return _ESCAPED.get(c, c)


class Redactor:
    def __init__(self, extra_values: dict[str, str] | None = None) -> None:
        named: dict[str, str] = {}
        for key in secrets.SECRET_ENV_KEYS:
            v = os.environ.get(key)
            if v and len(v) >= 6:
                named.setdefault(v, key)
        for key, v in (extra_values or {}).items():
            if v and len(v) >= 6:
                named.setdefault(v, key)
        self._known, self._known_kinds = self._known_regex(named)
        self._patterns = [
            (
                name,
                re.compile(p),
                name in secrets.GLUED_NEEDS_MIXED_CASE,
                name in secrets.GLUED_NEEDS_DIGITS,
            )
            for name, p in secrets.CREDENTIAL_PATTERNS
        ]
        self._counts: Counter[tuple[str, str]] = Counter()
        self.scanned: Counter[str] = Counter()  # files scanned, by how (text/office/binary)
        self._depth = 0

    @staticmethod
    def _known_regex(named: dict[str, str]) -> tuple[re.Pattern | None, dict[str, str]]:
        """One alternation of every known value (longest first, a value containing
        another is matched whole) and its base64 fragments; group name -> kind."""
        alts: list[str] = []
        kinds: dict[str, str] = {}
        for value, key in sorted(named.items(), key=lambda kv: len(kv[0]), reverse=True):
            kinds[f"k{len(alts)}"] = f"env:{key}"
            alts.append(f"(?P<k{len(alts)}>{_broken(value)})")
        for value, key in named.items():
            if len(value) < 8:
                continue  # too short to tell from chance in base64
            for frag in sorted(base64_fragments(value.encode())):
                kinds[f"k{len(alts)}"] = f"env:{key}:base64"
                alts.append(f"(?P<k{len(alts)}>{_broken(frag)})")
        return (re.compile("|".join(alts)) if alts else None), kinds

    @property
    def findings(self) -> list[RedactionFinding]:
        return [
            RedactionFinding(where=w, kind=k, count=n) for (w, k), n in sorted(self._counts.items())
        ]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def note(self, where: str, kind: str) -> None:
        """A finding that is not a match (what was withheld because of one)."""
        self._counts[(where, kind)] += 1

    # --- finding -------------------------------------------------------------------------

    def _find(self, s: str) -> list[Hit]:
        """Known values and credential shapes in `s` (overlaps resolved by the caller)."""
        hits: list[Hit] = []
        if self._known is not None:
            for m in self._known.finditer(s):
                hits.append((m.start(), m.end(), self._known_kinds[m.lastgroup or ""]))
        for name, rx, check_glued, digits in self._patterns:
            for m in rx.finditer(s):
                at = m.start()
                glued = check_glued and at and _WORD.match(s[at - 1])
                if glued and not _random_looking(m[0], digits):
                    continue  # glued to a word and not random-looking: a word, not a key
                if "v" in rx.groupindex and m.group("v") is not None:
                    hits.append((m.start("v"), m.end("v"), name))
                else:
                    hits.append((at, m.end(), name))
        return hits

    def _find_decoded(self, s: str, depth: int = 0) -> list[Hit]:
        """Matches in `s` and in `s` read with its escapes decoded (recursively), each
        given as the raw span it covers (whole escapes)."""
        hits = self._find(s)
        if depth < MAX_ESCAPE_DEPTH and "\\" in s:
            dec = _Unescaped(s)
            if dec.text != s:
                found = self._find_decoded(dec.text, depth + 1)
                hits += [(dec.raw(a), dec.raw(b), k) for a, b, k in found]
        return hits

    def _hits(self, s: str) -> list[Hit]:
        """Every match in `s`, in its escaped text decoded and in the UTF-16 text inside
        it, without overlaps, in order."""
        hits = self._find_decoded(s)
        if "\x00" in s:
            for rx, off in _UTF16_RUNS:
                for run in rx.finditer(s):
                    units = run[0][off::2]
                    base = run.start()
                    found = self._find_decoded(units)
                    hits += [(base + 2 * a, base + 2 * b, k) for a, b, k in found]
        hits.sort(key=lambda h: (h[0], h[0] - h[1]))  # stable: known values win ties
        out: list[Hit] = []
        end = -1
        for a, b, kind in hits:
            if a >= end and not s.startswith("[REDACTED", a):
                out.append((a, b, kind))
                end = b
        return out

    # --- redacting ----------------------------------------------------------------------

    def text(self, s: str, where: str) -> str:
        if not s:
            return s
        hits = self._hits(s)
        if not hits:
            return s
        parts = []
        at = 0
        for a, b, kind in hits:
            self._counts[(where, kind)] += 1
            parts += [s[at:a], f"[REDACTED:{kind}]"]
            at = b
        parts.append(s[at:])
        return "".join(parts)

    def obj(self, o: Any, where: str) -> Any:
        """Redact every string in a JSON-like value (keys included)."""
        if isinstance(o, str):
            return self.text(o, where)
        if isinstance(o, dict):
            return {
                self.text(k, where) if isinstance(k, str) else k: self.obj(v, where)
                for k, v in o.items()
            }
        if isinstance(o, list | tuple):
            return [self.obj(v, where) for v in o]
        return o

    def bytes_text(self, data: bytes, where: str) -> bytes:
        """Redacted bytes of any file (`data` itself when nothing matched):

        - archives by their first bytes, whatever the name (zip, office documents, gzip,
          tar): every member scanned (recursively) and the archive rebuilt;
        - text in UTF-8, UTF-16 (with a BOM) or any 8-bit encoding (read as Latin-1):
          matches replaced by `[REDACTED:<kind>]`;
        - binary (a NUL byte; UTF-16 without a BOM too): matches masked with '*' of
          the same length, so the file's layout is kept."""
        inner = self._archive(data, where)
        if inner is not None:
            return inner
        for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
            if data.startswith(bom):
                try:
                    s = data[2:].decode(codec)
                except UnicodeDecodeError:
                    break
                self.scanned["text"] += 1
                out = self.text(s, where)  # strict UTF-16 holds no lone surrogate
                return data if out == s else bom + out.encode(codec)
        if b"\0" not in data[:8192]:
            try:
                s, codec = data.decode("utf-8"), "utf-8"
            except UnicodeDecodeError:
                s, codec = data.decode("latin-1"), "latin-1"
            self.scanned["text"] += 1
            out = self.text(s, where)  # markers are ASCII: `codec` encodes them
            return data if out == s else out.encode(codec)
        self.scanned["binary"] += 1
        return self._mask(data, where)

    def _mask(self, data: bytes, where: str) -> bytes:
        hits = self._hits(data.decode("latin-1"))
        if not hits:
            return data
        buf = bytearray(data)
        for a, b, kind in hits:
            self._counts[(where, kind)] += 1
            buf[a:b] = b"*" * (b - a)
        return bytes(buf)

    # --- archives -------------------------------------------------------------------------

    def _archive(self, data: bytes, where: str) -> bytes | None:
        """The archive with every member redacted, or None when `data` is no archive
        (or one that cannot be read or rebuilt here: then scanned as binary)."""
        if self._depth >= MAX_DEPTH or len(data) > MAX_ARCHIVE_BYTES:
            return None
        if data[:4] == b"PK\x03\x04":
            rebuild = self._zip
        elif data[:2] == b"\x1f\x8b":
            rebuild = self._gzip
        elif data[257:262] == b"ustar":
            rebuild = self._tar
        else:
            return None
        self._depth += 1
        try:
            out = rebuild(data, where)
        finally:
            self._depth -= 1
        if out is not None:
            self.scanned["office/zip"] += 1
        return out

    def _zip(self, data: bytes, where: str) -> bytes | None:
        import io
        import zipfile

        try:
            src = zipfile.ZipFile(io.BytesIO(data))
            infos = src.infolist()
            if sum(i.file_size for i in infos) > MAX_ARCHIVE_BYTES:
                return None
            members = [(i, src.read(i)) for i in infos]
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
            return None
        changed = False
        out_members = []
        for info, body in members:
            if not info.is_dir():
                new = self.bytes_text(body, f"{where}:{info.filename}")
                changed |= new != body
                body = new
            out_members.append((info, body))
        if not changed:
            return data
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as dst:
            for info, body in out_members:
                dst.writestr(info, body)
        return buf.getvalue()

    def _gzip(self, data: bytes, where: str) -> bytes | None:
        from apexrl.artifacts.archive_extract import Limits, gunzip
        from apexrl.artifacts.archive_write import gzip_bytes
        from apexrl.errors import BadRecordError

        try:
            raw = gunzip(data, where, Limits(max_total_bytes=MAX_ARCHIVE_BYTES))
        except BadRecordError:
            return None
        new = self.bytes_text(raw, f"{where}:gunzip")
        return data if new == raw else gzip_bytes(new)

    def _tar(self, data: bytes, where: str) -> bytes | None:
        from apexrl.artifacts.archive_extract import tar_members
        from apexrl.artifacts.archive_write import Entry, bytes_entry, tar_bytes
        from apexrl.errors import BadRecordError

        try:
            members, bad = tar_members(data, where)
        except BadRecordError:
            return None
        if bad:
            return None
        changed = False
        entries: list[Entry] = []
        for m in members:
            if m.kind == "file":
                with m.open() as fh:
                    body = fh.read()
                new = self.bytes_text(body, f"{where}:{m.name}")
                changed |= new != body
                entries.append(bytes_entry(m.name, new, executable=bool(m.mode & 0o100)))
            else:
                entries.append(Entry(m.name, m.kind, linkname=m.linkname))
        return tar_bytes(entries) if changed else data
