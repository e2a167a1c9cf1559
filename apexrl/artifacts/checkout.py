"""The commit a checkout is at, for run records: a user-named one (archipelago, the recipe)
or apexrl's own source tree (a training manifest's `git_revision`)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """`git -C ROOT ARGS`; None when git is missing or does not answer within 10 s."""
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None


def checkout_commit(root: Path) -> str | None:
    """`git rev-parse HEAD` in ROOT; None when it is no git checkout or git is missing."""
    out = _git(root, "rev-parse", "HEAD")
    if out is None or out.returncode != 0:
        return None
    return out.stdout.strip() or None


def checkout_revision(root: Path) -> tuple[str | None, bool | None]:
    """(commit, whether tracked files differ from it); (None, None) outside a checkout."""
    commit = checkout_commit(root)
    if commit is None:
        return None, None
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    if dirty is None:
        return None, None
    return commit, bool(dirty.stdout.strip())
