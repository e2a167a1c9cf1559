"""Absolute host paths out of published traces (issue 42, finding 5).

A run folder's records name host folders: the run itself (its logs, trajectories), the
task and world folders it read (run.json), and what trials logged (a username under
/home). Published, they tell where and as whom the run ran. `HostPaths` rewrites every
text that goes out: a path inside the run becomes relative to it (`logs/t1/agent.log`,
`.` for the run folder), a folder the run names outside it becomes relative to the run
when the two share a folder below the top (`../tasks`), else its own name, and any
other home folder (`/home/NAME`, `/root`) becomes `~`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_HOMES = re.compile(r"/home/[^/\s\"'`<>|:;,]+|/root(?=/|\b)")
_TOPS = {"/", "/home", "/Users"}


class HostPaths:
    def __init__(self, run_dir: Path, named: list[str] = ()) -> None:
        run = Path(run_dir)
        runs = {str(run.absolute()), str(run.resolve())}
        pairs: dict[str, str] = {r: "." for r in runs}
        for p in named:
            if p.startswith("/") and p not in pairs and not any(_under(p, r) for r in runs):
                pairs[p.rstrip("/") or "/"] = _label(p, str(run.resolve()))
        pairs.pop("/", None)
        # longest first: a folder inside another is rewritten by its own rule
        self._rules = [
            (re.compile(re.escape(path) + r"(/|(?=$|[^\w.-]|\.(?![\w-])))"), label)
            for path, label in sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        ]

    @classmethod
    def for_run(cls, run_dir: Path, run_record: Any) -> HostPaths:
        """The run folder and every absolute path its run.json names."""
        return cls(run_dir, sorted(set(_strings(run_record))))

    def text(self, s: str) -> str:
        for rule, label in self._rules:
            if label == ".":  # the run's own paths: "RUN/x" -> "x", "RUN" -> "."
                s = rule.sub(lambda m: "" if m.group(1) else ".", s)
            else:
                s = rule.sub(lambda m, label=label: label + m.group(1), s)
        return _HOMES.sub("~", s)

    def obj(self, o: Any) -> Any:
        if isinstance(o, str):
            return self.text(o)
        if isinstance(o, list):
            return [self.obj(x) for x in o]
        if isinstance(o, tuple):
            return tuple(self.obj(x) for x in o)
        if isinstance(o, dict):
            return {k: self.obj(v) for k, v in o.items()}
        return o

    def bytes_text(self, data: bytes) -> bytes:
        if b"/" not in data:
            return data
        # bytes that are not UTF-8 (a cut character, another encoding) pass unchanged
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


def _under(p: str, root: str) -> bool:
    return p == root or p.startswith(root.rstrip("/") + "/")


def _label(p: str, run: str) -> str:
    """A folder outside the run: relative to it when both lie below a shared folder that
    is not a top (/, /home), else the folder's own name."""
    try:
        shared = os.path.commonpath([p, run])
    except ValueError:
        shared = "/"
    if shared in _TOPS:
        return os.path.basename(p.rstrip("/")) or "."
    return os.path.relpath(p, run)


def _strings(o: Any):
    if isinstance(o, str):
        if o.startswith("/") and "\n" not in o and len(o) < 4096:
            yield o
    elif isinstance(o, dict):
        for v in o.values():
            yield from _strings(v)
    elif isinstance(o, list):
        for v in o:
            yield from _strings(v)
