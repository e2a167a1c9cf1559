"""The evidence a trial is graded on: the final answer and what changed in the world.

The before-state is the pristine world (the world store's copy plus the task's
input files), which lives outside the sandbox; the after-state is the trial's
private copy (or a download of the container's /world). Unchanged files are
recognised by (size, mtime) against the stats taken when the copy was made, so a
diff costs one stat per file plus a byte comparison of the files that changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.nofollow import RefusedPath, open_regular, pinned
from apexrl.grading.models import FileChangeSummary
from apexrl.tasks.vendored import grade as runner

TOPS = ("filesystem", ".apps_data")
MAX_FILE_CHARS = 6_000
MAX_TOTAL_CHARS = 48_000


@dataclass
class WorldState:
    after_root: Path  # the world root after the run (filesystem/, .apps_data/)
    before: dict[str, Path] | None = None  # 'filesystem/x' -> pristine file; None: unknown
    before_stats: dict[str, tuple[int, int]] | None = None  # rel -> (size, mtime_ns) at start


def walk_files(root: Path) -> dict[str, Path]:
    """'filesystem/a/b.txt' -> path, for every regular file under the world's top folders."""
    out: dict[str, Path] = {}
    for top in TOPS:
        base = root / top
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in filenames:
                p = Path(dirpath) / name
                if p.is_symlink() or not p.is_file():
                    continue
                out[p.relative_to(root).as_posix()] = p
    return out


def stats_of(files: dict[str, Path]) -> dict[str, tuple[int, int]]:
    out = {}
    for rel, p in files.items():
        st = p.stat()
        out[rel] = (st.st_size, st.st_mtime_ns)
    return out


def diff_world(state: WorldState) -> FileChangeSummary | None:
    if state.before is None:
        return None
    after = walk_files(state.after_root)
    stats = state.before_stats or {}
    summary = FileChangeSummary()
    for rel in sorted(after):
        p = after[rel]
        src = state.before.get(rel)
        if src is None:
            summary.created.append(rel)
            continue
        st = p.stat()
        if stats.get(rel) == (st.st_size, st.st_mtime_ns):
            continue
        if not _same_bytes(src, p):
            summary.modified.append(rel)
    summary.deleted = sorted(rel for rel in state.before if rel not in after)
    return summary


def changes_text(state: WorldState, changes: FileChangeSummary | None) -> str:
    """What the judge sees of the files: each created/changed file's text (truncated)."""
    if changes is None:
        return "(the before-state of the world is unknown: no file changes are shown)"
    lines: list[str] = []
    budget = MAX_TOTAL_CHARS
    for kind, rels in (("created", changes.created), ("modified", changes.modified)):
        for rel in rels:
            p = state.after_root / rel
            try:  # the world copy is sandbox-written: never follow a link planted there
                with pinned(p) as fd_path:
                    text = runner.read_text(_SuffixedPath(fd_path, p.suffix))
            except RefusedPath:
                text = "(not shown: a link or special file, not followed)"
            except OSError as e:
                text = f"(unreadable: {e})"
            text = " ".join(text.split()) if p.suffix.lower() in (".docx", ".pptx") else text
            if len(text) > min(MAX_FILE_CHARS, budget):
                cut = max(0, min(MAX_FILE_CHARS, budget))
                text = text[:cut] + f"\n[... truncated, {len(text) - cut} more characters]"
            budget -= len(text)
            lines.append(f"### {kind}: {_shown(rel)}\n{text}\n")
    for rel in changes.deleted:
        lines.append(f"### deleted: {_shown(rel)}\n")
    return "\n".join(lines) if lines else "(no files were created, changed or deleted)"


class _SuffixedPath(type(Path())):  # type: ignore[misc]
    """/proc/self/fd/N of a pinned file, keeping the real name's suffix for type dispatch."""

    def __new__(cls, fd_path: str, suffix: str):
        self = super().__new__(cls, fd_path)
        self._real_suffix = suffix
        return self

    def __init__(self, fd_path: str, suffix: str) -> None:
        super().__init__(fd_path)

    @property
    def suffix(self) -> str:
        return self._real_suffix


def _same_bytes(trusted: Path, untrusted: Path) -> bool:
    try:
        with open(trusted, "rb") as a, open(open_regular(untrusted), "rb", closefd=True) as b:
            while True:
                x, y = a.read(1 << 20), b.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _shown(rel: str) -> str:
    return rel.removeprefix("filesystem/")
