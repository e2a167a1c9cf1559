"""Warm gateways for the local environment: one fork server per work folder.

The local environment's gateway used to be a fresh Python per trial (bubblewrap,
then ~1.5 CPU-seconds of imports). With apexrl running as root it instead asks a
fork server (`apexrl.envs.local.forkserver`, started once, in its own bubblewrap
sandbox) for a forked, pre-imported gateway that enters the trial's own sandbox
(mount/PID/IPC/UTS namespaces, the trial's uid, a user namespace, limits). The
trial's token and world id go down the trial's own pipe, never through the fork
server.

`ForkedGateway` looks like the `subprocess.Popen` the local environment keeps for
a gateway: pid, stdin, stdout, poll(), kill().
$APEXRL_LOCAL_FORKSERVER=0 turns the fork server off (a fresh sandboxed Python per
trial, as before).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from apexrl.envs.local import memcg, sandbox


def enabled() -> bool:
    """The fork server is used when apexrl runs as root (it sets per-trial uids) and
    $APEXRL_LOCAL_FORKSERVER is not 0/off."""
    raw = os.environ.get("APEXRL_LOCAL_FORKSERVER", "1").strip().lower()
    return raw not in ("0", "false", "no", "off") and sandbox.drops_privileges()


class ForkServerError(RuntimeError):
    pass


class ForkedGateway:
    """One trial's gateway, forked by the fork server (Popen-like)."""

    def __init__(self, pid: int, stdin, stdout, lifeline: int, status: int) -> None:
        self.pid = pid  # the trial's outer process (host PID namespace)
        self.stdin = stdin
        self.stdout = stdout
        self._life = lifeline
        self._status = status
        self.returncode: int | None = None

    def poll(self, timeout: float = 0.0) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self._status < 0:  # killed and closed without an exit status in time
            self.returncode = -9
            return self.returncode
        ready, _, _ = select.select([self._status], [], [], timeout)
        if not ready:
            return None
        data = b""
        with contextlib.suppress(OSError):
            data = os.read(self._status, 64)
        try:
            self.returncode = int(data.strip() or b"-9")
        except ValueError:
            self.returncode = -9
        return self.returncode

    def kill(self, timeout: float = 5.0) -> None:
        """Close the lifeline: the outer process kills the gateway (PID 1 of the trial's
        namespace, so everything in it) and exits."""
        if self._life >= 0:
            with contextlib.suppress(OSError):
                os.close(self._life)
            self._life = -1
        self.poll(timeout)
        for f in (self.stdin, self.stdout):
            with contextlib.suppress(Exception):
                f.close()
        if self._status >= 0:
            with contextlib.suppress(OSError):
                os.close(self._status)
            self._status = -1

    def __del__(self) -> None:  # a lost handle still ends its trial's gateway
        with contextlib.suppress(Exception):
            if self._life >= 0:
                os.close(self._life)
            if self._status >= 0:
                os.close(self._status)


class ForkServer:
    """The fork server of one work folder. Start it from a long-lived thread (bwrap's
    --die-with-parent follows the starting thread)."""

    def __init__(self, work_dir: Path, ready_timeout_s: float) -> None:
        self.work_dir = Path(work_dir)
        self.timeout = ready_timeout_s
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        argv = sandbox.zygote_argv(self.work_dir) + [
            sys.executable,
            "-I",  # isolated, as the fresh gateway (`pool.ISOLATED`)
            "-u",
            "-B",
            "-m",
            "apexrl.envs.local.forkserver",
            str(theirs.fileno()),
            str(self.timeout),
        ]
        # its own errors go to a file that is only read (then removed) when it fails to
        # start; each trial's gateway writes to the trial's gateway.log
        fd, log_path = tempfile.mkstemp(prefix="apexrl-forkserver-", suffix=".log")
        with os.fdopen(fd, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                env=sandbox.base_env({"PYTHONUNBUFFERED": "1"}),
            )
        theirs.close()
        self.sock = ours
        try:
            line = self._readline(self.timeout)
            if not line or not json.loads(line).get("ready"):
                self.close()
                raise ForkServerError(
                    f"the gateway fork server did not start: {log_tail(Path(log_path))}"
                )
        finally:
            os.unlink(log_path)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and self.sock is not None

    def _readline(self, timeout: float) -> bytes:
        assert self.sock is not None
        buf = b""
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return b""
            chunk = self.sock.recv(4096)
            if not chunk:
                return b""
            buf += chunk
        return buf

    def spawn(
        self,
        root: Path,
        uid: int,
        limits: sandbox.SandboxLimits,
        group: memcg.TrialGroup | None = None,
    ) -> ForkedGateway:
        """A gateway for the trial folder `root` (a child of the work folder), waiting for
        its world id and token on stdin like `gateway_main --wait`. Its /world, /tmp and
        /root go as detached mounts (`sandbox.clone_tree`): the trial folder may be a
        tmpfs mounted after the fork server started, which its namespace does not show."""
        if root.parent.resolve() != self.work_dir.resolve():
            raise ForkServerError(f"{root} is not in the fork server's folder {self.work_dir}")
        trees: list[int] = []
        try:
            for sub in ("world", "tmp", "home"):
                trees.append(sandbox.clone_tree(root / sub))
        except OSError as e:
            for fd in trees:
                os.close(fd)
            raise ForkServerError(str(e)) from None
        ctl_r, ctl_w = os.pipe()
        out_r, out_w = os.pipe()
        life_r, life_w = os.pipe()
        st_r, st_w = os.pipe()
        log = os.open(root / "gateway.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        theirs = [ctl_r, out_w, log, life_r, st_w, *trees]
        if group is not None:  # the child joins the trial's memory cgroup through it
            try:
                theirs.append(group.open_procs())
            except OSError as e:
                for fd in (*theirs, ctl_w, out_r, life_w, st_r):
                    os.close(fd)
                raise ForkServerError(f"the trial's memory cgroup: {e}") from None
        req = {
            "name": root.name,
            "uid": uid,
            "limits": limits.rlimits(),
            "shm_bytes": limits.shm_bytes,
            "rebinds": sandbox.zygote_rebinds(),
            "env": sandbox.base_env({"PYTHONUNBUFFERED": "1"}),
            "cgroup": group is not None,
        }
        try:
            with self.lock:
                if not self.alive():
                    raise ForkServerError("the gateway fork server is not running")
                assert self.sock is not None
                socket.send_fds(self.sock, [(json.dumps(req) + "\n").encode()], theirs)
                line = self._readline(self.timeout)
        except BaseException:
            for fd in (ctl_w, out_r, life_w, st_r):
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        reply = json.loads(line) if line else {"error": "no reply (the fork server died)"}
        if "pid" not in reply:
            for fd in (ctl_w, out_r, life_w, st_r):
                os.close(fd)
            raise ForkServerError(f"the gateway fork server refused: {reply.get('error')}")
        return ForkedGateway(
            int(reply["pid"]), os.fdopen(ctl_w, "wb"), os.fdopen(out_r, "rb"), life_w, st_r
        )

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def log_tail(path: Path, n: int = 1500) -> str:
    """The last `n` characters of a log (the pool's and the fork server's start errors)."""
    try:
        return path.read_text("utf-8", "replace")[-n:].strip()
    except OSError:
        return "(no log)"


_SERVERS: dict[str, ForkServer] = {}
_LOCK = threading.Lock()
_FAILED: dict[str, float] = {}


def server_for(work_dir: Path, ready_timeout_s: float) -> ForkServer | None:
    """The running fork server of `work_dir`, started on first use; None when it cannot
    start (the caller then starts a fresh gateway sandbox). Call from the spawner thread."""
    key = str(Path(work_dir).resolve())
    with _LOCK:
        failed = _FAILED.get(key, -1e9)
        if failed == float("inf"):
            return None  # disabled for this process
        srv = _SERVERS.get(key)
        if srv is not None and srv.alive():
            return srv
        if time.monotonic() - failed < 60:
            return None  # failed recently: do not pay a start per trial
        srv = ForkServer(Path(key), ready_timeout_s)
        try:
            srv.start()
        except Exception as e:
            _FAILED[key] = time.monotonic()
            print(f"apexrl: gateway fork server unavailable ({e}); fresh gateways", file=sys.stderr)
            return None
        _SERVERS[key] = srv
        return srv


def disable(work_dir: Path, why: str) -> None:
    """A forked gateway could not even start: this process starts fresh gateway sandboxes
    for `work_dir` from now on (its trials retry once: sandbox_gateway is retryable)."""
    key = str(Path(work_dir).resolve())
    with _LOCK:  # the server stays up: its other gateways serve running trials
        _FAILED[key] = float("inf")
    print(f"apexrl: forked gateway failed ({why}); fresh gateways from now on", file=sys.stderr)


def close_all() -> None:
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for srv in servers:
        srv.close()
