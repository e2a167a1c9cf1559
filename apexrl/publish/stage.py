"""Staging: turn a checkpoint, an eval run or a task dataset into a `Plan`.

A plan is the exact list of files that would be uploaded (path in the repo, local
file, size, sha256) plus the card. Every text file that leaves the machine is
redacted first and the redacted copy is written to the stage folder; large binary
files (weights, packed task shards without findings) are uploaded from where
they are.

This module holds the plan and what every stager shares (hashing, Hub limits, staged
text); the stagers are `stage_model` (a checkpoint), `stage_traces` (an eval run) and
`stage_dataset` (a packed task dataset).
"""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from apexrl.errors import UsageError
from apexrl.publish.models import PublishFile
from apexrl.publish.redact import Redactor

# Hub limits (docs/facts.md section 9)
MAX_REPO_FILES = 100_000
MAX_FOLDER_FILES = 10_000


@dataclass
class PlanFile:
    path: str  # in the repo
    local: Path
    size: int
    sha256: str


@dataclass
class Plan:
    repo: str
    repo_type: str  # model | dataset
    private: bool
    revision: str
    card: str
    stage_dir: Path
    files: list[PlanFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (local file, why)
    redactor: Redactor = field(default_factory=Redactor)

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def records(self, status: str = "planned") -> list[PublishFile]:
        return [
            PublishFile(
                path=f.path, size_bytes=f.size, sha256=f.sha256, source=str(f.local), status=status
            )
            for f in self.files
        ]


def new_plan(
    repo: str,
    repo_type: str,
    *,
    private: bool,
    stage_dir: Path,
    revision: str = "main",
    redactor: Redactor | None = None,
) -> Plan:
    """An empty plan (no card yet) staging into `stage_dir`; a caller's redactor (tests,
    shared findings) replaces the default one."""
    plan = Plan(repo, repo_type, private, revision, "", Path(stage_dir))
    if redactor is not None:
        plan.redactor = redactor
    return plan


def finish_with_card(plan: Plan, entries: list[tuple[str, Path]], card: str) -> Plan:
    """Redact the card, stage it as README.md beside `entries`, then `finish`."""
    plan.card = plan.redactor.text(card, "README.md")
    entries.append(("README.md", stage_text(plan, "README.md", plan.card.encode())))
    return finish(plan, entries)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(8 * 1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def finish(plan: Plan, entries: list[tuple[str, Path]]) -> Plan:
    """Hash the files (in parallel: hashlib releases the GIL), check Hub limits."""
    paths = [p for _, p in entries]
    with ThreadPoolExecutor(max_workers=4) as ex:
        digests = list(ex.map(sha256_file, paths))
    plan.files = sorted(
        (
            PlanFile(rp, lp, lp.stat().st_size, d)
            for (rp, lp), d in zip(entries, digests, strict=True)
        ),
        key=lambda f: f.path,
    )
    check_limits([f.path for f in plan.files])
    return plan


def check_limits(paths: list[str]) -> None:
    if len(paths) >= MAX_REPO_FILES:
        raise UsageError(
            f"{len(paths)} files: a Hub repo holds fewer than {MAX_REPO_FILES:,}",
            hint="pack small files into larger shards",
        )
    per = Counter(str(PurePosixPath(p).parent) for p in paths)
    folder, n = per.most_common(1)[0] if per else ("", 0)
    if n >= MAX_FOLDER_FILES:
        raise UsageError(
            f"folder {folder!r} would hold {n} files: a Hub folder holds fewer than "
            f"{MAX_FOLDER_FILES:,}",
            hint="use larger shards or spread files over subfolders",
        )


def stage_text(plan: Plan, rel: str, data: bytes) -> Path:
    out = plan.stage_dir / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def redacted_copy(plan: Plan, rel: str, src: Path) -> Path:
    data = src.read_bytes()
    red = plan.redactor.bytes_text(data, rel)
    return stage_text(plan, rel, red if red is not None else data)


def clear_stage(stage_dir: Path) -> None:
    shutil.rmtree(stage_dir, ignore_errors=True)
