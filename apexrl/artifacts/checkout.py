"""The commit a user-named checkout (archipelago, the recipe) is at, for run records."""

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
