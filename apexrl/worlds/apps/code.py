"""Code execution: one shell command with cwd = the world's filesystem/, a time limit
and an output cap (head 2/3, tail 1/3).

Isolation comes first from the environment the gateway runs in (a container or the
`local` bubblewrap environment). Inside it, each command is a sandbox of its own, not a
plain child of the gateway (issue 29: a child could ptrace the gateway and take its
host-network sockets): its own user namespace (root inside, no capability left after
the start), PID namespace (the gateway is not in it), mount namespace with its own
/proc (an empty one where the kernel refuses a new /proc: the gateway's processes are
never listed), network namespace when the task allows no network, and no_new_privs.
An online agent's command (`$APEXRL_CODE_EGRESS`, set by the local gateway) gets a
network namespace of its own too, holding only loopback and the trial's egress proxy
(started before the privileges go; `apexrl.envs.local.egress`), named by the
`HTTP(S)_PROXY` variables.
The `local` gateway also runs non-dumpable under a seccomp filter its commands inherit
(`apexrl.envs.local.seccomp`: no ptrace, pidfd_getfd, process_vm_*, kcmp or keyrings).
The local gateway sets $APEXRL_CODE_SANDBOX=1; elsewhere (a world image's container,
whose own isolation applies and which may forbid user namespaces) the command is a
plain shell, in a new network namespace when the task allows no network.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import sys
import time
from typing import Any

from apexrl.worlds.world import World

MAX_TIMEOUT_S = 600.0
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")


def _env(world: World) -> dict[str, str]:
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = str(world.fs_root)
    env["PWD"] = folder(world)
    return env


# where archipelago's images keep the world's files (and its code runs)
MERCOR_FOLDER = "/filesystem"


def folder(world: World) -> str:
    """The folder a command starts in, as `pwd` prints it: `/filesystem` where that is the
    world's files folder (a Mercor-profile image or environment shows the world there
    too), else the real folder of the world's files (a link, such as an image's
    /world/filesystem pointing at /filesystem, resolved)."""
    real = world.fs_root.resolve()
    with contextlib.suppress(OSError):
        if os.path.samefile(MERCOR_FOLDER, real):
            return MERCOR_FOLDER
    return str(real)


# Run by `unshare` as root of the command's new user namespace: a /proc of its own PID
# namespace (or an empty one), then every capability dropped, then the command.
_STAGE = (
    "mount -t proc -o nosuid,nodev,noexec proc /proc 2>/dev/null"
    " || mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=555 none /proc || exit 126; "
    'exec setpriv --no-new-privs --bounding-set=-all --inh-caps=-all -- /bin/sh -c "$1"'
)


def command_argv(command: str, *, network: bool, egress: str | None = None) -> list[str]:
    """The argv that runs `command` in its own sandbox (see the module doc). `egress`:
    the egress proxy's socket, the command's one way out (a sandboxed command only;
    elsewhere it runs with no network)."""
    sandboxed = os.environ.get("APEXRL_CODE_SANDBOX") == "1"
    if egress is not None and not sandboxed:
        network = False
    if not sandboxed:
        argv = ["/bin/sh", "-c", command]
        return argv if network else ["unshare", "--net", "--", *argv]
    ns = ["--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--mount"]
    stage = _STAGE
    if not network or egress is not None:
        ns.append("--net")  # fails closed if it cannot isolate
    if egress is not None:  # the proxy's bridge first, while lo may still be brought up
        bridge = f"{shlex.quote(sys.executable)} -I -m apexrl.envs.local.egress"
        stage = stage.replace(
            "exec setpriv", f"{bridge} {shlex.quote(egress)} || exit 126; exec setpriv"
        )
    return ["unshare", *ns, "--", "/bin/sh", "-c", stage, "apexrl-code", command]


def _egress() -> tuple[str | None, dict[str, str]]:
    """The egress socket an online agent's commands use, and the proxy variables."""
    sock, url = os.environ.get("APEXRL_CODE_EGRESS"), os.environ.get("APEXRL_CODE_EGRESS_PROXY")
    if not sock or not url or os.environ.get("APEXRL_CODE_SANDBOX") != "1":
        return None, {}
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    local = "localhost,127.0.0.1,::1"
    return sock, {**dict.fromkeys(names, url), "NO_PROXY": local, "no_proxy": local}


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_command(
    world: World, command: str, timeout_s: float, output_cap: int
) -> dict[str, Any]:
    timeout_s = max(0.1, min(float(timeout_s), MAX_TIMEOUT_S))
    t0 = time.monotonic()
    # the task allows no network: the command gets none (or only the egress proxy)
    sock, proxy = _egress()
    online = os.environ.get("APEXRL_CODE_NO_NETWORK") != "1"
    argv = command_argv(command, network=online, egress=sock)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=folder(world),
        env={**_env(world), **proxy},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group: a timeout kills all of it
    )
    bufs: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}
    limit = max(4 * output_cap, 1 << 20)  # keep memory bounded; the cap cuts further

    async def pump(stream: asyncio.StreamReader | None, buf: bytearray) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            if len(buf) < limit:
                buf.extend(chunk[: limit - len(buf)])

    readers = asyncio.gather(pump(proc.stdout, bufs["out"]), pump(proc.stderr, bufs["err"]))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout=timeout_s)
    except TimeoutError:
        timed_out = True
        _kill(proc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout=5)
    except asyncio.CancelledError:
        _kill(proc)
        readers.cancel()
        raise
    finally:
        if proc.returncode is None:
            _kill(proc)
    try:
        # Grandchildren may hold the pipes open; output is complete once they go.
        await asyncio.wait_for(readers, timeout=2)
    except TimeoutError:
        readers.cancel()
    out, err = bytes(bufs["out"]), bytes(bufs["err"])
    return {
        "exit_code": None if timed_out else proc.returncode,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - t0, 3),
        "stdout": cap_text(out.decode("utf-8", "replace"), output_cap),
        "stderr": cap_text(err.decode("utf-8", "replace"), output_cap),
    }


def probe(world: World) -> str:
    if not world.fs_root.is_dir():
        raise NotADirectoryError(str(world.fs_root))
    return "shell ready"


def cap_text(text: str, limit: int) -> str:
    """Keep head 2/3 and tail 1/3 of `text` when it is longer than `limit` chars."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit * 2) // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters omitted ...]\n{text[-tail:] if tail else ''}"
