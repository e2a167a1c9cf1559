"""The commit a checkout is at, for run records: a user-named one (archipelago, the recipe)
or apexrl's own source tree (a training manifest's `git_revision`)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def checkout_commit(root: Path) -> str | None:
    """`git rev-parse HEAD` in ROOT; None when it is no git checkout or git is missing."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def checkout_revision(root: Path) -> tuple[str | None, bool | None]:
    """(commit, whether tracked files differ from it); (None, None) outside a checkout."""
    commit = checkout_commit(root)
    if commit is None:
        return None, None
    try:
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    return commit, bool(dirty.stdout.strip())
