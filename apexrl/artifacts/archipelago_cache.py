"""archipelago on demand: `apexrl peer fetch` clones Mercor's archipelago with git at a
pinned commit into apexrl's cache, verifies the commit, and records it; every command that
needs a checkout and was given none (no --peer / --archipelago, no $APEXRL_ARCHIPELAGO)
finds it there.

    CACHE/<commit>/        the checkout (a git work tree at that commit, detached)
    CACHE/current.json     {"commit", "remote", "path", "fetched_at"}: the one commands use

CACHE is $APEXRL_ARCHIPELAGO_CACHE, else $XDG_CACHE_HOME/apexrl/archipelago
(~/.cache/apexrl/archipelago). Standard library and apexrl.errors only (the grader's
runner and the peer's servers both resolve through it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from apexrl.errors import ApexError, ExitCode, RemoteError, UsageError

CHECKOUT_ENV = "APEXRL_ARCHIPELAGO"
CACHE_ENV = "APEXRL_ARCHIPELAGO_CACHE"
PUBLIC_REPO = "https://github.com/Mercor-Intelligence/archipelago"
# the commit apexrl is measured against (docs/facts.md section 11)
PINNED_COMMIT = "1c3dcd4694b313020cd626699c9c7cc1c0a2fc58"
CURRENT = "current.json"
GIT_TIMEOUT_S = 900.0
# what a checkout must hold for apexrl's uses of it (servers, grading runner)
REQUIRED = ("mcp_servers", "grading/runner/main.py")
_SHA = re.compile(r"^[0-9a-f]{4,40}$")


@dataclass
class Fetched:
    commit: str  # the full commit id, verified
    remote: str
    path: str
    fetched_at: str


def cache_dir() -> Path:
    raw = os.environ.get(CACHE_ENV)
    if raw:
        return Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "apexrl" / "archipelago"


def fetched() -> Fetched | None:
    """The checkout `peer fetch` recorded, if it is still there at its commit."""
    record = cache_dir() / CURRENT
    try:
        data = json.loads(record.read_text("utf-8"))
        rec = Fetched(**{k: str(data[k]) for k in ("commit", "remote", "path", "fetched_at")})
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = Path(rec.path)
    if not path.is_dir() or _head(path) != rec.commit:
        return None
    return rec


def default_checkout() -> str | None:
    """A checkout when none was named: $APEXRL_ARCHIPELAGO, else the fetched one."""
    env = os.environ.get(CHECKOUT_ENV)
    if env:
        return env
    rec = fetched()
    return rec.path if rec else None


def missing_hint() -> str:
    return (
        f"run `apexrl peer fetch` (clones {PUBLIC_REPO} at {PINNED_COMMIT[:7]} into "
        f"{cache_dir()}), or name a checkout with --peer/--archipelago DIR or {CHECKOUT_ENV}"
    )


def missing_checkout(message: str = "no archipelago checkout") -> UsageError:
    """The one error for "no checkout named, none in $APEXRL_ARCHIPELAGO, none fetched"."""
    return UsageError(message, hint=missing_hint())


def named_or_default(path: str | Path | None, *, missing: str = "no archipelago checkout") -> str:
    """The checkout `path` names, else default_checkout(); missing_checkout(missing) when
    there is none."""
    text = str(path) if path else default_checkout()
    if not text:
        raise missing_checkout(missing)
    return text


def _git(args: list[str], *, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S) -> str:
    git = shutil.which("git")
    if git is None:
        raise UsageError("git is not installed", hint="install git (e.g. apt-get install git)")
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "echo"}
    try:
        out = subprocess.run(
            [git, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise RemoteError(f"git {args[0]} took more than {timeout:.0f} s") from None
    if out.returncode != 0:
        raise _GitError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    return out.stdout.strip()


class _GitError(Exception):
    pass


def _head(path: Path) -> str | None:
    try:
        return _git(["-C", str(path), "rev-parse", "HEAD^{commit}"], timeout=30)
    except (_GitError, ApexError):
        return None


def fetch(commit: str = PINNED_COMMIT, remote: str = PUBLIC_REPO, *, say=lambda m: None) -> Fetched:
    """Clone `remote` at `commit` into the cache (nothing half-written: a temp folder
    renamed into place), verify HEAD is that commit and the tree holds what apexrl uses,
    and record it as the checkout commands use. A commit already there is reused."""
    commit = commit.strip().lower()
    if not _SHA.match(commit):
        raise UsageError(f"--commit {commit!r} is not a commit id", hint="give a hex commit id")
    if "://" not in remote and not remote.startswith("git@"):
        local = Path(remote).expanduser()
        if not local.exists():
            raise UsageError(f"--from {remote}: no such repository", hint="a git URL or path")
        remote = str(local.resolve())
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    existing = _existing(root, commit)
    if existing is not None:
        say(f"archipelago {existing.name[:12]} already in {root}")
        return _record(root, existing, _head(existing) or existing.name, remote)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
    try:
        say(f"cloning {remote} at {commit[:12]}")
        _clone_at(tmp, remote, commit)
        full = _head(tmp)
        if full is None or not full.startswith(commit):
            raise ApexError(
                f"{remote}: the checkout is at {full}, not {commit}",
                hint="check the commit id and the remote",
                code=ExitCode.CHECK_FAILED,
            )
        lacking = [p for p in REQUIRED if not (tmp / p).exists()]
        if lacking:
            raise ApexError(
                f"{remote} at {full[:12]} is not archipelago (no {', '.join(lacking)})",
                hint=f"fetch {PUBLIC_REPO} or a fork of it",
                code=ExitCode.CHECK_FAILED,
            )
        final = root / full
        if final.exists():  # fetched meanwhile by another process
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.rename(final)
        return _record(root, final, full, remote)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _existing(root: Path, commit: str) -> Path | None:
    for p in sorted(root.iterdir()):
        if p.is_dir() and p.name.startswith(commit) and _head(p) == p.name:
            return p
    return None


def _clone_at(dest: Path, remote: str, commit: str) -> None:
    """git init + fetch of that one commit (shallow where the remote allows it, else the
    whole history), then a detached checkout of it."""
    _git(["init", "-q", str(dest)])
    _git(["-C", str(dest), "remote", "add", "origin", remote])
    try:
        if len(commit) < 40:
            raise _GitError("a short id cannot be fetched by itself")
        _git(["-C", str(dest), "fetch", "-q", "--depth", "1", "origin", commit])
        target = "FETCH_HEAD"
    except _GitError:
        try:
            _git(["-C", str(dest), "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*"])
        except _GitError as e:
            raise RemoteError(f"git fetch from {remote} failed: {e}") from None
        target = commit
    try:
        _git(["-C", str(dest), "-c", "advice.detachedHead=false", "checkout", "-q",
              "--detach", f"{target}^{{commit}}"])  # fmt: skip
    except _GitError as e:
        raise ApexError(
            f"{remote} has no commit {commit}: {e}",
            hint="check the commit id (git log on the remote)",
            code=ExitCode.USAGE,
        ) from None


def _record(root: Path, path: Path, commit: str, remote: str) -> Fetched:
    rec = Fetched(
        commit=commit,
        remote=remote,
        path=str(path.resolve()),
        fetched_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    tmp = root / f".{CURRENT}.tmp"
    tmp.write_text(json.dumps(asdict(rec), indent=1) + "\n")
    tmp.replace(root / CURRENT)
    return rec
