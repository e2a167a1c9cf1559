"""An archipelago checkout and the runtimes built from it.

A checkout is any folder with archipelago's `mcp_servers/` layout. Its nine servers
are uv projects for Python 3.13 with frozen locks; each is copied out of the checkout
(which may be read-only) and synced with `uv sync --frozen --no-dev` into

    HOME/<key>/<server>/            the copy, its .venv, and a `.built` record

where `key` hashes the checkout's server folders, so two checkouts (or one edited)
never share runtimes and a checkout seen before is not built again. The environment
gateway (`environment/`, what Mercor's world images run) and the agent runner
(`agents/`) are built the same way into HOME/<folder>-<key of that folder>/
(`project_runtime`). The servers keep
one venv each: their locks pin different versions of 22 shared packages (fastmcp
3.2.4 against 3.3.1, pandas 2.3 against 3.0, starlette 0.51 against 1.3), so one shared
venv would not be the runtime their images run. uv hardlinks from its cache, so the
venvs share most of their disk.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts import archipelago_cache, toolchain
from apexrl.artifacts.dirlock import file_lock
from apexrl.artifacts.toolchain import (
    PEER_DIR_ENV,
    find_python313,
    peer_dir,
    run_build,
    synced_copy,
)
from apexrl.errors import ApexError, UsageError

PEER_ENV = archipelago_cache.CHECKOUT_ENV
HOME_ENV = PEER_DIR_ENV
PYTHON_ENV = "APEXRL_PEER_PYTHON"
PUBLIC_REPO = archipelago_cache.PUBLIC_REPO
PINNED_COMMIT = archipelago_cache.PINNED_COMMIT


@dataclass(frozen=True)
class PeerServer:
    """One of archipelago's servers under apexrl's name for it (the surface's prefix)."""

    name: str  # apexrl's archipelago-surface server name (tool prefix)
    folder: str  # mcp_servers/<folder> in the checkout


@functools.cache
def servers() -> tuple[PeerServer, ...]:
    """archipelago's servers, from the archipelago surface's declarations (each
    `Server`'s `peer_folder`), in its mount order."""
    from apexrl.worlds.surface import ARCHIPELAGO

    return tuple(PeerServer(s.name, s.peer_folder) for s in ARCHIPELAGO.servers)


def by_name() -> dict[str, PeerServer]:
    return {s.name: s for s in servers()}


_SKIP = {".venv", "__pycache__", ".git", ".pytest_cache", ".ruff_cache"}


def find_checkout(peer: str | Path | None = None) -> Path:
    """The checkout named by `peer`, else $APEXRL_ARCHIPELAGO, else the one `apexrl peer
    fetch` put in apexrl's cache; a usage error saying how to get one when there is none
    or it has no `mcp_servers/`."""
    path = Path(archipelago_cache.named_or_default(peer)).expanduser()
    if not (path / "mcp_servers").is_dir():
        raise UsageError(
            f"no archipelago checkout at {path} (no mcp_servers/ folder)",
            hint=archipelago_cache.missing_hint(),
        )
    return path.resolve()


def peer_home() -> Path:
    """Where runtimes are built: $APEXRL_PEER_DIR, else ~/.cache/apexrl/peer."""
    return peer_dir()


def _files(folder: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        for f in sorted(filenames):
            yield Path(dirpath) / f


def _hash_tree(update: Callable[[bytes], object], folder: Path, rel_to: Path) -> None:
    """Every file under `folder` into a hash: its path from `rel_to`, then its link
    target (a link) or the hash of its bytes."""
    for f in _files(folder):
        update(f.relative_to(rel_to).as_posix().encode() + b"\0")
        if f.is_symlink():
            update(b"L" + os.readlink(f).encode())
        else:
            update(hashlib.sha256(f.read_bytes()).digest())


def checkout_key(checkout: Path, chosen: tuple[PeerServer, ...] | None = None) -> str:
    """A hash of every file (path and bytes) of the checkout's server folders."""
    h = hashlib.sha256()
    for s in sorted(chosen or servers(), key=lambda s: s.folder):
        _hash_tree(h.update, checkout / "mcp_servers" / s.folder, checkout)
    return h.hexdigest()[:16]


def find_python() -> str:
    """A Python 3.13: $APEXRL_PEER_PYTHON, pyenv's 3.13.*, else python3.13 on PATH."""
    return find_python313(PYTHON_ENV, "archipelago's servers")


def find_uv() -> str:
    return toolchain.find_uv("building archipelago's servers")


@dataclass(frozen=True)
class Runtime:
    """One built server: its copy of the server folder, venv and entry module folder."""

    server: PeerServer
    root: Path

    @property
    def python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"

    @property
    def main_dir(self) -> Path:
        """The folder holding the server's main.py (mcp_servers/<x>_server/)."""
        found = sorted(p.parent for p in (self.root / "mcp_servers").glob("*/main.py"))
        if len(found) != 1:
            raise ApexError(f"{self.root}: expected one mcp_servers/*/main.py, found {found}")
        return found[0]

    @property
    def shim(self) -> Path | None:
        """The code server's LD_PRELOAD library (its image puts it at /app/lib)."""
        p = self.root / "sandbox_fs.so"
        return p if p.is_file() else None

    @property
    def built(self) -> bool:
        return toolchain.is_built(self.root)


def _build_one(
    checkout: Path, server: PeerServer, dest: Path, python: str, uv: str
) -> dict[str, float]:
    src = checkout / "mcp_servers" / server.folder
    if not (src / "uv.lock").is_file():
        raise UsageError(f"{src}: no uv.lock (is this an archipelago checkout?)")
    t0 = time.monotonic()
    what = f"uv sync for archipelago's {server.folder} server"
    synced_copy(src, dest, skip=_SKIP, python=python, uv=uv, what=what)
    shim = list((dest / "mcp_servers").glob("*/sandbox_fs.c"))
    if shim:
        cc = shutil.which("gcc") or shutil.which("cc")
        if not cc:
            raise UsageError("the code server's sandbox shim needs a C compiler (gcc)")
        run_build(
            [cc, "-shared", "-fPIC", "-O2", "-o", str(dest / "sandbox_fs.so"), str(shim[0])]
            + ["-ldl", "-lpthread"],
            dest,
            "building the code server's sandbox_fs.so",
        )
    compile_bytecode(dest, dest / ".venv" / "bin" / "python")
    took = round(time.monotonic() - t0, 2)
    record = {"server": server.name, "folder": server.folder, "seconds": took}
    toolchain.mark_built(dest, record)
    return record


BYTECODE = ".bytecode"  # marker: every module of the runtime compiled once


def compile_bytecode(root: Path, python: Path) -> None:
    """Compile every module of a runtime (its venv and server copy) with its own Python.
    Servers start with PYTHONDONTWRITEBYTECODE and the local sandbox shows runtimes
    read-only, so without this each start compiles all it imports again: one server's
    start took 20 s from source against 9-11 s compiled (mail, paired, loaded host)."""
    try:
        subprocess.run(
            [str(python), "-m", "compileall", "-q", "-j0", str(root)],
            capture_output=True,
            timeout=toolchain.BUILD_TIMEOUT_S,
            check=False,  # a few packages ship files for other Pythons: those stay uncompiled
        )
    except subprocess.TimeoutExpired:
        return  # what was compiled stays; the next `make peer` goes on
    (root / BYTECODE).write_text("1\n")


def runtimes(
    checkout: Path,
    *,
    servers: list[str] | None = None,
    home: Path | None = None,
    build: bool = True,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Runtime]:
    """The built runtimes of `servers` (apexrl names; default all nine) for `checkout`,
    building the missing ones first (unless `build` is false: then a usage error)."""
    known = by_name()
    chosen = [known[n] for n in (servers or known)]
    key = checkout_key(checkout)
    base = (home or peer_home()) / key
    say = on_progress or (lambda _m: None)
    out: dict[str, Runtime] = {}
    todo = [s for s in chosen if not Runtime(s, base / s.folder).built]
    if todo and not build:
        raise UsageError(
            f"archipelago runtimes for {checkout} (key {key}) are not built: "
            + ", ".join(s.folder for s in todo),
            hint="run `make peer` (or verify without --no-build)",
        )
    if todo:
        python, uv = find_python(), find_uv()
        with file_lock(base.with_suffix(".lock")):
            for i, s in enumerate(todo, 1):
                if Runtime(s, base / s.folder).built:  # another process built it meanwhile
                    continue
                say(f"building archipelago's {s.folder} server ({i}/{len(todo)}) in {base}")
                rec = _build_one(checkout, s, base / s.folder, python, uv)
                say(f"  {s.folder}: {rec['seconds']} s")
    for s in chosen:
        out[s.name] = Runtime(s, base / s.folder)
    return out


@dataclass(frozen=True)
class PeerProject:
    """One of the checkout's other uv projects, built like a server."""

    folder: str  # <checkout>/<folder>
    sync_args: tuple[str, ...]  # what `uv sync --frozen` gets besides
    entry: str  # the file that says the folder is this project


PROJECTS: dict[str, PeerProject] = {
    # the gateway's image syncs every dependency group (its runner imports a stub
    # package of the dev group at start), so this runtime does too
    "environment": PeerProject("environment", ("--all-groups",), "runner/main.py"),
    "agents": PeerProject("agents", ("--no-dev",), "runner/main.py"),
}


def project_key(folder: Path) -> str:
    h = hashlib.sha256()
    _hash_tree(h.update, folder, folder)
    return h.hexdigest()[:16]


def project_runtime(
    checkout: Path,
    name: str,
    *,
    home: Path | None = None,
    build: bool = True,
    on_progress: Callable[[str], None] | None = None,
) -> Path:
    """The built copy (with .venv) of the checkout's `name` project (environment,
    agents), built on first use unless `build` is false (then a usage error)."""
    proj = PROJECTS[name]
    src = checkout / proj.folder
    if not (src / proj.entry).is_file() or not (src / "uv.lock").is_file():
        raise UsageError(
            f"{src}: no {proj.entry} and uv.lock (is {checkout} an archipelago checkout?)",
            hint=f"clone {PUBLIC_REPO} (commit {PINNED_COMMIT})",
        )
    dest = (home or peer_home()) / f"{proj.folder}-{project_key(src)}"

    def make() -> dict:
        python, uv = find_python(), find_uv()
        (on_progress or (lambda _m: None))(f"building archipelago's {proj.folder} in {dest}")
        t0 = time.monotonic()
        what = f"uv sync for archipelago's {proj.folder}"
        args = proj.sync_args
        synced_copy(src, dest, skip=_SKIP, python=python, uv=uv, what=what, sync_args=args)
        return {"project": proj.folder, "seconds": round(time.monotonic() - t0, 2)}

    refuse = UsageError(
        f"archipelago's {proj.folder} for {checkout} is not built ({dest})",
        hint="run `make peer`",
    )
    return toolchain.build_once(
        dest, dest.with_suffix(".lock"), make, refuse=None if build else refuse
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m apexrl.peer.runtime [CHECKOUT]`: build every runtime (make peer)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        checkout = find_checkout(args[0] if args else None)
        t0 = time.monotonic()
        say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        rts = runtimes(checkout, on_progress=say)
        for rt in rts.values():  # runtimes built before builds compiled their modules
            if not (rt.root / BYTECODE).is_file():
                say(f"compiling archipelago's {rt.server.folder} server's modules (once)")
                compile_bytecode(rt.root, rt.python)
        projects = {n: project_runtime(checkout, n, on_progress=say) for n in PROJECTS}
    except ApexError as e:
        print(f"error: {e}", file=sys.stderr)
        return int(e.code)
    root = next(iter(rts.values())).root.parent
    print(
        f"archipelago runtimes for {checkout}: {root} "
        f"({len(rts)} servers ready in {time.monotonic() - t0:.1f} s); "
        + ", ".join(f"{n}: {p}" for n, p in projects.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
