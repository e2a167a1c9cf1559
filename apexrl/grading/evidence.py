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


# Multi-part files archipelago presents as one item per sheet or slide (its readers
# cover .xlsx and .pptx; .xls and .ppt it splits too, apexrl reads neither).
MULTI_PART = {".xlsx": "sheet", ".pptx": "slide"}
WORKBOOKS = (".xlsx", ".xlsm")

# The evidence choices of apexrl's own that archipelago's grader does not make (grader
# options, off by default; apexrl.grading.grader.GRADER_OPTIONS describes each).
EVIDENCE_OPTIONS = (
    "show_hidden_sheets",
    "show_hidden_paths",
    "sniff_text",
    "deleted_paths_only",
    "workbook_whole",
)


@dataclass
class FileEvidence:
    """One item the judge reads: a created/changed/deleted file, or one sheet or slide of
    a workbook or deck (part), as archipelago's grader presents them."""

    change: str  # created | modified | deleted
    path: str  # as shown: relative to filesystem/ (or .apps_data/...)
    text: str  # readable text: after the change; a deleted item's text before it
    diff: str = ""  # modified items: a unified diff of the readable text, before -> after
    part: str = ""  # "sheet" | "slide" for one part of a multi-part file; "" a whole file
    title: str = ""  # the sheet's or slide's title
    before_path: Path | None = None  # .db files: the two databases the tool judge diffs
    after_path: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.path} :: {self.part} {self.title}" if self.part else self.path


def collect_files(
    state: WorldState, changes: FileChangeSummary | None, options=frozenset()
) -> list[FileEvidence]:
    """The items the judge may be shown, as archipelago's grader presents a trial's
    changes: hidden paths and build detritus left out; each sheet of a workbook and each
    slide of a deck its own item (a changed file only its changed parts), hidden sheets
    left out; a deleted file's former text shown; files archipelago reads no text from
    listed by path. `options`: EVIDENCE_OPTIONS names restoring apexrl's own choices."""
    out: list[FileEvidence] = []
    if changes is None:
        return out
    opts = frozenset(options)
    before = state.before or {}
    for kind, rels in (
        ("created", changes.created),
        ("modified", changes.modified),
        ("deleted", changes.deleted),
    ):
        for rel in rels:
            if "show_hidden_paths" not in opts and _peer_skips(rel):
                continue
            old = before.get(rel) if kind != "created" else None
            new = state.after_root / rel if kind != "deleted" else None
            out += _items(kind, rel, old, new, opts)
    return out


def _items(
    kind: str, rel: str, old: Path | None, new: Path | None, opts: frozenset[str]
) -> list[FileEvidence]:
    shown = _shown(rel)
    suffix = Path(rel).suffix.lower()
    if suffix == ".db":  # SQLite: shown as its row diff (and judged with tools, db_judge)
        text = _db_text(shown, old, new)
        return [FileEvidence(kind, shown, text, before_path=old, after_path=new)]
    part = MULTI_PART.get(suffix)
    if part and not (part == "sheet" and "workbook_whole" in opts):
        parts = _part_items(kind, shown, part, old, new, opts)
        if parts is not None:
            return parts
    if kind == "deleted":
        if "deleted_paths_only" in opts or old is None:
            return [FileEvidence(kind, shown, "")]
        return [FileEvidence(kind, shown, _read(old, opts, trusted=True))]
    text = _read(new, opts) if new is not None else ""
    diff = ""
    if kind == "modified" and old is not None:
        diff = text_diff(_read(old, opts, trusted=True), text, rel)
    return [FileEvidence(kind, shown, text, diff)]


def _part_items(
    kind: str, shown: str, part: str, old: Path | None, new: Path | None, opts: frozenset[str]
) -> list[FileEvidence] | None:
    """One item per sheet/slide that was created, changed or removed (matched by title);
    None when either side cannot be split (then the file is shown whole)."""
    before = _parts(old, part, opts, trusted=True) if old is not None else []
    after = _parts(new, part, opts) if new is not None else []
    if before is None or after is None:
        return None
    if kind == "deleted" and "deleted_paths_only" in opts:
        before = [(t, "") for t, _ in before]
    old_by_title = dict(before)
    items: list[FileEvidence] = []
    for title, text in after:
        prior = old_by_title.pop(title, None)
        if prior is None:
            items.append(FileEvidence("created", shown, text, part=part, title=title))
        elif prior != text:
            diff = text_diff(prior, text, f"{shown} :: {title}")
            items.append(FileEvidence("modified", shown, text, diff, part=part, title=title))
    for title, text in old_by_title.items():
        items.append(FileEvidence("deleted", shown, text, part=part, title=title))
    if not items and kind == "modified":
        return None  # no part changed as text (formatting): the file as a whole
    return items


def _parts(p: Path, part: str, opts: frozenset[str], trusted: bool = False):
    from apexrl.grading.readers import pptx_slides, workbook_sheets

    def read(path: Path):
        if part == "sheet":
            return workbook_sheets(path, READ_CHARS, hidden="show_hidden_sheets" in opts)
        return pptx_slides(path, READ_CHARS)

    try:
        if trusted:
            return read(p)
        with pinned(p) as fd_path:
            return read(_SuffixedPath(fd_path, p.suffix))
    except Exception:  # unreadable or refused: shown whole, the reader says why
        return None


def _db_text(shown: str, old: Path | None, new: Path | None) -> str:
    from apexrl.grading.db_diff import diff_databases, diff_text, private_dir

    with private_dir() as tmp:
        try:
            return diff_text(diff_databases([(shown, old, new)], Path(tmp)), READ_CHARS)
        except Exception as e:  # not SQLite, malformed, oversized or a planted link
            return f"(not shown: not a database apexrl can diff: {type(e).__name__})"


def _peer_skips(rel: str) -> bool:
    """Paths archipelago's grader never shows: any dot-named folder or file under
    filesystem/; a dot-named file or the harness's .coordinator/ under .apps_data/;
    __pycache__ folders and compiled Python anywhere."""
    top, _, rest = rel.partition("/")
    parts = rest.split("/")
    if top == FS_TOP and any(x.startswith(".") for x in parts):
        return True
    if top != FS_TOP and (parts[-1].startswith(".") or parts[0] == ".coordinator"):
        return True
    return "__pycache__" in parts or rel.endswith((".pyc", ".pyo"))


FS_TOP = "filesystem"


def _read(p: Path, opts=frozenset(), trusted: bool = False) -> str:
    from apexrl.grading.readers import file_text, workbook_text

    sniff = "sniff_text" in opts

    def read(path: Path) -> str:
        if path.suffix.lower() in WORKBOOKS and "show_hidden_sheets" not in opts:
            try:
                return workbook_text(path, READ_CHARS, hidden=False)
            except Exception:
                pass  # file_text names the failure
        return file_text(path, READ_CHARS, sniff=sniff)

    if trusted:  # the pristine world's copy, outside the sandbox
        return read(p)
    try:  # the world copy is sandbox-written: never follow a link planted there
        with pinned(p) as fd_path:
            return read(_SuffixedPath(fd_path, p.suffix))
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


def select_files(files: list[FileEvidence], suffixes: tuple[str, ...] = ()) -> list[FileEvidence]:
    """The items of files with one of `suffixes` (empty: all)."""
    if not suffixes:
        return list(files)
    return [f for f in files if Path(f.path).suffix.lower() in suffixes]


def item_body(f: FileEvidence, file_cap: int | None = None) -> str:
    """What the judge reads of one item: its text (a deleted item's former text), then a
    modified item's diff; `file_cap` cuts each (the `evidence_caps` option)."""
    if f.change == "deleted":
        return f"(its content before it was deleted)\n{_cut(f.text, file_cap)}" if f.text else ""
    body = _cut(f.text, file_cap) if f.text else "(no text shown for this file type)"
    if f.diff:
        body += f"\n<DIFF>\n{_cut(f.diff, file_cap)}\n</DIFF>"
    return body


def file_block(f: FileEvidence, body: str) -> str:
    where = f' {f.part}="{f.title}"' if f.part else ""
    head = f'<FILE path="{f.path}"{where} change="{f.change}">'
    return f"{head}\n{body}\n</FILE>" if body else f"{head}</FILE>"


def render_files(
    files: list[FileEvidence] | None,
    suffixes: tuple[str, ...] = (),
    total: int | None = None,
    file_cap: int | None = None,
    bodies: list[str] | None = None,
) -> str:
    """FILE blocks for the judge, only files with one of `suffixes` (empty: all): each
    item's text (a modified one's diff after it), whole unless caps are given (the
    `evidence_caps` option: `file_cap` per file, `total` for all). `bodies`: each selected
    item's body as already fitted to the judge's budget (apexrl.grading.budget)."""
    if files is None:
        return "(the before-state of the world is unknown: no file changes are shown)"
    chosen = select_files(files, suffixes)
    blocks: list[str] = []
    budget = total
    for i, f in enumerate(chosen):
        body = bodies[i] if bodies is not None else item_body(f, file_cap)
        if budget is not None:
            body = _cut(body, budget)
            budget -= len(body)
        blocks.append(file_block(f, body))
    return "\n".join(blocks)


def changes_text(state: WorldState, changes: FileChangeSummary | None) -> str:
    """What the judge sees of the files: each created/changed/deleted item's text, whole."""
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
