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

TOPS = ("filesystem", ".apps_data")
MAX_FILE_CHARS = 20_000  # of one file's text shown to the judge (stated in its prompt)
MAX_TOTAL_CHARS = 60_000  # of all files' text in one judge prompt


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


@dataclass
class FileEvidence:
    """One created/changed/deleted file as the judge reads it."""

    change: str  # created | modified | deleted
    path: str  # as shown: relative to filesystem/ (or .apps_data/...)
    text: str  # readable text (readers.py), "" for a deleted file


def collect_files(state: WorldState, changes: FileChangeSummary | None) -> list[FileEvidence]:
    """The readable text of every created and changed file (each cut to MAX_FILE_CHARS)."""
    from apexrl.grading.readers import file_text

    out: list[FileEvidence] = []
    if changes is None:
        return out
    for kind, rels in (("created", changes.created), ("modified", changes.modified)):
        for rel in rels:
            p = state.after_root / rel
            try:  # the world copy is sandbox-written: never follow a link planted there
                with pinned(p) as fd_path:
                    text = file_text(_SuffixedPath(fd_path, p.suffix), MAX_FILE_CHARS)
            except RefusedPath:
                text = "(not shown: a link or special file, not followed)"
            except OSError as e:
                text = f"(unreadable: {e})"
            if len(text) > MAX_FILE_CHARS:
                cut = len(text) - MAX_FILE_CHARS
                text = text[:MAX_FILE_CHARS] + f"\n[... truncated: {cut} more characters ...]"
            out.append(FileEvidence(kind, _shown(rel), text))
    out += [FileEvidence("deleted", _shown(rel), "") for rel in changes.deleted]
    return out


def render_files(
    files: list[FileEvidence] | None, suffixes: tuple[str, ...] = (), total: int = MAX_TOTAL_CHARS
) -> str:
    """FILE blocks for the judge, only files with one of `suffixes` (empty: all), within
    `total` characters."""
    if files is None:
        return "(the before-state of the world is unknown: no file changes are shown)"
    blocks: list[str] = []
    budget = total
    for f in files:
        if suffixes and Path(f.path).suffix.lower() not in suffixes:
            continue
        text = f.text
        if len(text) > budget:
            cut = len(text) - max(budget, 0)
            text = text[: max(budget, 0)] + f"\n[... truncated: {cut} more characters ...]"
        budget -= len(text)
        body = f"\n{text}\n" if f.change != "deleted" else "\n"
        blocks.append(f'<FILE path="{f.path}" change="{f.change}">{body}</FILE>')
    return "\n".join(blocks)


def changes_text(state: WorldState, changes: FileChangeSummary | None) -> str:
    """What the judge sees of the files: each created/changed file's text (truncated)."""
    if changes is None:
        return render_files(None)
    return (
        render_files(collect_files(state, changes)) or "(no files were created, changed or deleted)"
    )


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
