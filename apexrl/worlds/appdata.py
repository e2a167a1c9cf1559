"""Finding an app's data under `.apps_data/<app>/` at the depths real worlds use.

Real worlds do not always keep `mail/*.mbox`, `calendar/*.ics` and `chat/Groups/` at
the top of the app's folder: exports nest them one or two folders down (per user, per
account, under the export's own folder name). The servers find their data anywhere up
to MAX_DEPTH folders below the app's folder (links are never followed), and a server
whose app folder exists but holds none of its data fails readiness instead of serving
an empty app.
"""

from __future__ import annotations

import os
from pathlib import Path

from apexrl.errors import BadRecordError

MAX_DEPTH = 4  # folders below .apps_data/<app>/


def find_files(base: Path, *, suffixes: tuple[str, ...] = (), names: tuple[str, ...] = ()):
    """Regular files under `base` (down to MAX_DEPTH folders) whose name ends with one of
    `suffixes` or equals one of `names` (case-insensitive), shallowest first, then by path."""
    if not base.is_dir():
        return []
    found: list[tuple[int, str, Path]] = []
    base_depth = len(base.parts)
    for dirpath, dirnames, filenames in os.walk(base):
        depth = len(Path(dirpath).parts) - base_depth
        dirnames[:] = sorted(
            d
            for d in dirnames
            if depth < MAX_DEPTH and not os.path.islink(os.path.join(dirpath, d))
        )
        for f in filenames:
            low = f.lower()
            if low.endswith(suffixes) or low in names:
                p = Path(dirpath) / f
                if p.is_file() and not p.is_symlink():
                    found.append((depth, p.as_posix(), p))
    return [p for _, _, p in sorted(found)]


def find_dir(base: Path, name: str) -> Path | None:
    """The shallowest folder called `name` under `base` (base itself when it is called so)."""
    if not base.is_dir():
        return None
    if base.name == name:
        return base
    frontier = [base]
    for _ in range(MAX_DEPTH + 1):
        nxt = []
        for d in frontier:
            try:
                kids = sorted(k for k in d.iterdir() if k.is_dir() and not k.is_symlink())
            except OSError:
                continue
            for k in kids:
                if k.name == name:
                    return k
            nxt += kids
        frontier = nxt
    return None


def require_data(app_dir: Path, n_found: int, what: str) -> None:
    """Readiness: the world has the app's folder but none of its data was found."""
    if app_dir.is_dir() and n_found == 0:
        raise BadRecordError(
            str(app_dir),
            f"the folder exists but holds no {what} (searched {MAX_DEPTH} folders deep)",
            hint="put the app's data there, or leave the server out with --apps",
        )
