"""The evidence a trial is graded on: the final answer and what changed in the world.

The before-state is the pristine world (the world store's copy plus the task's
input files), which lives outside the sandbox; the after-state is the trial's
private copy (or a download of the container's /world). The state and the diff are
`apexrl.worlds.store` (WorldState, diff_state); this module turns them into what the
judge reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.nofollow import RefusedPath, pinned
from apexrl.grading.models import FileChangeSummary
from apexrl.worlds.store import WorldState, diff_state

# The `evidence_caps` grader option: what the judge is shown of files, stated in its prompt.
# Without it (the default, as archipelago) every created or changed file is shown whole.
MAX_FILE_CHARS = 20_000  # of one file's text
MAX_TOTAL_CHARS = 60_000  # of all files' text in one judge prompt
READ_CHARS = 2_000_000  # what a reader extracts of one file at most (it says so when cut)


def diff_world(state: WorldState) -> FileChangeSummary | None:
    """What the trial changed (apexrl.worlds.store.diff_state); None: before-state unknown."""
    changes = diff_state(state)
    if changes is None:
        return None
    return FileChangeSummary(
        created=changes.created, modified=changes.modified, deleted=changes.deleted
    )


@dataclass
class FileEvidence:
    """One created/changed/deleted file as the judge reads it."""

    change: str  # created | modified | deleted
    path: str  # as shown: relative to filesystem/ (or .apps_data/...)
    text: str  # readable text (readers.py), "" for a deleted file
    diff: str = ""  # modified files: a unified diff of the readable text, before -> after


def collect_files(state: WorldState, changes: FileChangeSummary | None) -> list[FileEvidence]:
    """The readable text of every created and changed file, and a diff of each changed
    one (its before-state is the pristine world's copy, outside the sandbox)."""
    out: list[FileEvidence] = []
    if changes is None:
        return out
    for kind, rels in (("created", changes.created), ("modified", changes.modified)):
        for rel in rels:
            text = _read(state.after_root / rel)
            diff = ""
            if kind == "modified" and state.before is not None and rel in state.before:
                diff = text_diff(_read(state.before[rel]), text, rel)
            out.append(FileEvidence(kind, _shown(rel), text, diff))
    out += [FileEvidence("deleted", _shown(rel), "") for rel in changes.deleted]
    return out


def _read(p: Path) -> str:
    from apexrl.grading.readers import file_text

    try:  # the world copy is sandbox-written: never follow a link planted there
        with pinned(p) as fd_path:
            return file_text(_SuffixedPath(fd_path, p.suffix), READ_CHARS)
    except RefusedPath:
        return "(not shown: a link or special file, not followed)"
    except OSError as e:
        return f"(unreadable: {e})"


def text_diff(before: str, after: str, rel: str) -> str:
    import difflib

    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"before/{rel}", f"after/{rel}", lineterm=""
    )
    return "\n".join(lines)


def _cut(text: str, cap: int | None) -> str:
    if cap is None or len(text) <= cap:
        return text
    cut = len(text) - max(cap, 0)
    return text[: max(cap, 0)] + f"\n[... truncated: {cut} more characters ...]"


def render_files(
    files: list[FileEvidence] | None,
    suffixes: tuple[str, ...] = (),
    total: int | None = None,
    file_cap: int | None = None,
) -> str:
    """FILE blocks for the judge, only files with one of `suffixes` (empty: all): each
    file's text (a modified one's diff after it), whole unless caps are given (the
    `evidence_caps` option: `file_cap` per file, `total` for all)."""
    if files is None:
        return "(the before-state of the world is unknown: no file changes are shown)"
    blocks: list[str] = []
    budget = total
    for f in files:
        if suffixes and Path(f.path).suffix.lower() not in suffixes:
            continue
        text = _cut(f.text, file_cap)
        if budget is not None:
            text = _cut(text, budget)
            budget -= len(text)
        body = f"\n{text}\n" if f.change != "deleted" else "\n"
        if f.diff:
            body += f"<DIFF>\n{_cut(f.diff, file_cap)}\n</DIFF>\n"
        blocks.append(f'<FILE path="{f.path}" change="{f.change}">{body}</FILE>')
    return "\n".join(blocks)


def changes_text(state: WorldState, changes: FileChangeSummary | None) -> str:
    """What the judge sees of the files: each created/changed file's text, whole."""
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


def _shown(rel: str) -> str:
    return rel.removeprefix("filesystem/")
