"""Records written by `apexrl publish`."""

from __future__ import annotations

from typing import Literal

from apexrl.artifacts.models import Record


class PublishFile(Record):
    """One file of a publish plan, and what happened to it."""

    path: str  # path in the repo
    size_bytes: int
    sha256: str
    source: str  # local file uploaded (the staged copy when it was redacted or generated)
    status: Literal["planned", "uploaded", "unchanged", "verified"] = "planned"


class RedactionFinding(Record):
    """A secret found (and replaced) in a file staged for upload. Never carries the value."""

    where: str  # path in the repo (and row / member inside it)
    kind: str  # env:<KEY> or a credential pattern name
    count: int = 1


class PublishResult(Record):
    repo: str
    repo_type: Literal["model", "dataset"]
    revision: str = "main"
    private: bool = True
    url: str | None = None
    commit: str | None = None
    n_files: int = 0
    size_bytes: int = 0
    uploaded: int = 0  # files sent in this run
    unchanged: int = 0  # files already on the Hub with the same content
    commits: int = 0
    redactions: int = 0
    dry_run: bool = False
