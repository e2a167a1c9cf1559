"""Redaction of secrets in anything staged for upload.

Two sources, both from `apexrl.secrets`: the values of every secret env key that
is set (`SECRET_ENV_KEYS`), and credential shapes (`CREDENTIAL_PATTERNS`: cloud
keys, Hub/OpenAI/GitHub tokens, private key blocks, bearer tokens). A match is
replaced by `[REDACTED:<kind>]` and recorded as a finding (never with its value).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

from apexrl import secrets
from apexrl.publish.models import RedactionFinding


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
        # longest first, so a value containing another is replaced whole
        self._values = sorted(named.items(), key=lambda kv: len(kv[0]), reverse=True)
        self._patterns = [(name, re.compile(p)) for name, p in secrets.CREDENTIAL_PATTERNS]
        self._counts: Counter[tuple[str, str]] = Counter()
        self.scanned: Counter[str] = Counter()  # files scanned, by how (text/office/binary)
        self._depth = 0

    @property
    def findings(self) -> list[RedactionFinding]:
        return [
            RedactionFinding(where=w, kind=k, count=n) for (w, k), n in sorted(self._counts.items())
        ]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def text(self, s: str, where: str) -> str:
        if not s:
            return s
        for value, key in self._values:
            if value in s:
                self._counts[(where, f"env:{key}")] += s.count(value)
                s = s.replace(value, f"[REDACTED:env:{key}]")
        for name, rx in self._patterns:

            def repl(m: re.Match, name: str = name) -> str:
                if m.group(0).startswith("[REDACTED"):
                    return m.group(0)
                self._counts[(where, name)] += 1
                if "v" in m.re.groupindex and m.group("v") is not None:
                    a, b = m.start("v") - m.start(), m.end("v") - m.start()
                    return m.group(0)[:a] + f"[REDACTED:{name}]" + m.group(0)[b:]
                return f"[REDACTED:{name}]"

            s = rx.sub(repl, s)
        return s

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

    def bytes_text(self, data: bytes, where: str) -> bytes | None:
        """Redacted bytes of any file (`data` itself when nothing matched):

        - office documents and other zips (.docx/.xlsx/.pptx): every member scanned
          (recursively) and the zip rebuilt with the same names and order;
        - text in UTF-8, UTF-16 (with a BOM) or any 8-bit encoding (read as Latin-1):
          matches replaced by `[REDACTED:<kind>]`;
        - binary (a NUL byte): matches masked with '*' of the same length, so the
          file's layout is kept."""
        if data[:4] == b"PK\x03\x04" and self._depth < 3:  # zips in zips: 3 levels
            self._depth += 1
            try:
                out = self._zip(data, where)
            finally:
                self._depth -= 1
            if out is not None:
                self.scanned["office/zip"] += 1
                return out
        for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
            if data.startswith(bom):
                try:
                    s = data[2:].decode(codec)
                except UnicodeDecodeError:
                    break
                self.scanned["text"] += 1
                out = self.text(s, where)
                return data if out == s else bom + out.encode(codec)
        if b"\0" not in data[:8192]:
            try:
                s, codec = data.decode("utf-8"), "utf-8"
            except UnicodeDecodeError:
                s, codec = data.decode("latin-1"), "latin-1"
            self.scanned["text"] += 1
            out = self.text(s, where)
            if out == s:
                return data
            try:
                return out.encode(codec)
            except UnicodeEncodeError:  # a marker cannot be unencodable, but be safe
                return out.encode("utf-8")
        self.scanned["binary"] += 1
        return self._mask(data, where)

    def _mask(self, data: bytes, where: str) -> bytes:
        s = data.decode("latin-1")
        hits: list[tuple[int, int, str]] = []
        for value, key in self._values:
            start = s.find(value)
            while start >= 0:
                hits.append((start, start + len(value), f"env:{key}"))
                start = s.find(value, start + len(value))
        for name, rx in self._patterns:
            hits.extend((m.start(), m.end(), name) for m in rx.finditer(s))
        if not hits:
            return data
        buf = bytearray(data)
        for a, b, kind in hits:
            if b"*" * (b - a) == buf[a:b]:
                continue  # already masked by an overlapping match
            self._counts[(where, kind)] += 1
            buf[a:b] = b"*" * (b - a)
        return bytes(buf)

    def _zip(self, data: bytes, where: str) -> bytes | None:
        import io
        import zipfile

        try:
            src = zipfile.ZipFile(io.BytesIO(data))
            infos = src.infolist()
            if sum(i.file_size for i in infos) > 512 * 1024 * 1024:
                return None  # too big to rewrite in memory: scanned as binary instead
            members = [(i, src.read(i)) for i in infos]
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
            return None
        changed = False
        out_members = []
        for info, body in members:
            if info.is_dir():
                out_members.append((info, body))
                continue
            new = self.bytes_text(body, f"{where}:{info.filename}")
            if new is not None and new != body:
                changed = True
                body = new
            out_members.append((info, body))
        if not changed:
            return data
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as dst:
            for info, body in out_members:
                dst.writestr(info, body)
        return buf.getvalue()
