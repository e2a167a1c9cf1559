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
        """Redacted bytes of a UTF-8 text file; None when `data` is not text."""
        if b"\0" in data[:8192]:
            return None
        try:
            s = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        out = self.text(s, where)
        return data if out == s else out.encode("utf-8")
