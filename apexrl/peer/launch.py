"""Start one of archipelago's servers over stdio, in bubblewrap, over a world folder.

Its servers hard-wire the world at `/filesystem` and `/.apps_data`, so each runs in
its own mount namespace whose root is a fresh tmpfs: the host's top folders read-only,
the world's two folders bound read-write at those paths, private /tmp, /proc and
/dev, no network. Only the variables below reach it.
"""

from __future__ import annotations

import os
from pathlib import Path

from apexrl.errors import UsageError
from apexrl.host import BWRAP_INSTALL, find_bwrap
from apexrl.peer.runtime import Runtime

# top folders of the host never shown to a peer server (the sandbox makes its own)
_HIDDEN = {"proc", "dev", "tmp", "sys", "run", "filesystem", ".apps_data", "app", "lost+found"}


def bwrap_path() -> str:
    found = find_bwrap()
    if not found:
        raise UsageError(
            "bubblewrap (bwrap) is not installed; archipelago's servers run in it",
            hint=BWRAP_INSTALL,
        )
    return found


def server_env(rt: Runtime) -> dict[str, str]:
    env = {
        "PATH": f"{rt.python.parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "MCP_TRANSPORT": "stdio",
        "USE_INDIVIDUAL_TOOLS": "true",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if rt.shim is not None:
        env["SANDBOX_LIBRARY_PATH"] = str(rt.shim)
    return env


def bwrap_argv(bwrap: str, rt: Runtime, world: Path) -> list[str]:
    """bwrap ... -- python main.py, with `world` (holding filesystem/, .apps_data/)."""
    return sandbox_argv(bwrap, world, str(rt.main_dir), [str(rt.python), "main.py"])


def sandbox_argv(bwrap: str, world: Path, chdir: str, command: list[str]) -> list[str]:
    """bwrap ... -- command, in the layout archipelago's servers run in (see above)."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid"]
    argv += ["--unshare-ipc", "--unshare-uts", "--tmpfs", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--tmpfs", "/tmp"]
    for entry in sorted(os.listdir("/")):
        if entry in _HIDDEN:
            continue
        host = Path("/") / entry
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), str(host)]
    for sub, target in (("filesystem", "/filesystem"), (".apps_data", "/.apps_data")):
        (world / sub).mkdir(exist_ok=True)
        argv += ["--bind", str((world / sub).resolve()), target]
    argv += ["--chdir", chdir, "--", *command]
    return argv
