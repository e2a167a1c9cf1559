"""The local environment's warm pool: trial folders and their gateway sandboxes, started
ahead of their trials from one long-lived thread.

A slot is a trial folder (work_dir/apexrl-trial-<pid>-*, its owner recorded for the
stale sweep) and, with a gateway, a sandboxed gateway waiting for its world: forked
from the fork server (`apexrl.envs.local.warm`) when apexrl runs as root, else a fresh
`python -m apexrl.envs.local.gateway_main --wait` in bubblewrap. `POOL` keeps
$APEXRL_LOCAL_PREWARM (default 2) of them ready per work folder.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from apexrl.envs.local import memcg, sandbox, warm
from apexrl.envs.local.sandbox import SandboxError, base_env, chown_tree

DIR_PREFIX = "apexrl-trial-"
OWNER_FILE = ".owner"
GATEWAY_LOG = "gateway.log"
ISOLATED = ("-I", "-u", "-B", "-m")  # Python isolated, unbuffered, no bytecode written


def _proc_start(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def prewarm_count() -> int:
    """Warm sandboxes kept ready for the next trials: $APEXRL_LOCAL_PREWARM (default 2, 0 = off)."""
    raw = os.environ.get("APEXRL_LOCAL_PREWARM", "2").strip().lower()
    if raw in ("false", "no", "off"):
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        return 2


class Slot:
    """A trial folder and its gateway sandbox, possibly started before its trial."""

    def __init__(
        self,
        root: Path,
        proc: subprocess.Popen | None,
        uid: int | None = None,
        group: memcg.TrialGroup | None = None,
    ) -> None:
        self.root = root
        self.proc = proc
        self.uid = uid  # the host uid the sandbox runs as (None: apexrl is not root)
        self.group = group  # the trial's memory cgroup (None: the host gives none)
        self.started = False  # told which world to serve

    def handshake(
        self,
        world_id: str,
        *,
        token: str | None = None,
        code_network: bool = True,
        code_egress: bool = False,
        peer: dict | None = None,
    ) -> dict | None:
        """Tell the waiting gateway its world (and its per-trial token, the code tool's
        network, archipelago's servers to run); its ready line (None if it died)."""
        assert self.proc is not None and self.proc.stdin is not None
        ready = self.read_json()
        if not ready or not ready.get("warm"):
            if isinstance(self.proc, warm.ForkedGateway):  # the next trials start fresh ones
                warm.disable(self.root.parent, warm.log_tail(self.root / GATEWAY_LOG, 300))
            raise SandboxError(
                f"the gateway sandbox did not start: {warm.log_tail(self.root / GATEWAY_LOG)}",
                kind="gateway",
            )
        told = {"world_id": world_id, "token": token, "code_network": code_network}
        if code_egress:  # the code tool goes out through the trial's egress proxy
            told["code_egress"] = True
        if peer is not None:  # archipelago's servers instead of apexrl's (runtime archipelago)
            told["peer"] = peer
        self.proc.stdin.write((json.dumps(told) + "\n").encode())
        self.proc.stdin.flush()
        self.started = True
        return self.read_json()

    def read_json(self) -> dict | None:
        assert self.proc is not None and self.proc.stdout is not None
        line = self.proc.stdout.readline()
        try:
            return json.loads(line) if line.strip() else None
        except ValueError:
            return None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        try:
            self._kill()
        finally:
            if self.group is not None:  # and whatever the trial left running
                self.group.remove()
            sandbox.release_uid(self.uid)  # the trial's processes are gone: uid free

    def _kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if isinstance(proc, warm.ForkedGateway):
            proc.kill()
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=3)
        for f in (proc.stdin, proc.stdout):
            with contextlib.suppress(Exception):
                if f is not None:
                    f.close()


def new_slot(
    work_dir: Path, ready_timeout_s: float, gateway: bool = True, peer_ro: tuple[str, ...] = ()
) -> Slot:
    """A fresh trial folder and, with `gateway`, its gateway sandbox waiting for a world.
    `peer_ro`: archipelago's runtimes (runtime archipelago): the gateway is then a fresh
    sandbox that shows them read-only and the world also at /filesystem and /.apps_data."""
    work_dir.mkdir(parents=True, exist_ok=True)
    # the owner's pid is in the name, so a crash between mkdtemp and the owner file
    # still leaves a folder the next sweep can attribute
    root = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=work_dir))
    uid = None
    group = None
    try:
        limits = sandbox.SandboxLimits.from_env()
        cap = limits.scratch_bytes
        if cap is not None and sandbox.drops_privileges() and _in_ram(work_dir):
            sandbox.trial_tmpfs(root, cap)  # what the trial writes in RAM stops at `cap`
        (root / OWNER_FILE).write_text(
            json.dumps({"pid": os.getpid(), "start": _proc_start(os.getpid())})
        )
        uid = sandbox.new_sandbox_uid()
        group = memcg.group_for(root.name, limits.trial_memory_bytes)
        return _fill_slot(root, uid, work_dir, ready_timeout_s, gateway, group, peer_ro)
    except BaseException:
        if group is not None:
            group.remove()
        sandbox.release_uid(uid)
        sandbox.remove_trial_folder(root)
        raise


_RAM: dict[str, bool] = {}


def _in_ram(work_dir: Path) -> bool:
    key = str(work_dir)
    if key not in _RAM:
        _RAM[key] = sandbox.on_tmpfs(work_dir)
    return _RAM[key]


def peer_binds(root: Path) -> list[tuple[str, Path]]:
    """Where archipelago's servers find the world: the trial's world copy, again."""
    return [
        ("/filesystem", root / "world" / "filesystem"),
        ("/.apps_data", root / "world" / ".apps_data"),
    ]


def _fill_slot(
    root: Path,
    uid: int | None,
    work_dir: Path,
    ready_timeout_s: float,
    gateway: bool,
    group: memcg.TrialGroup | None = None,
    peer_ro: tuple[str, ...] = (),
) -> Slot:
    for name in ("tmp", "home", "tests", "solution", "world"):
        (root / name).mkdir()
        if name in ("tmp", "home", "world"):
            chown_tree(root / name, uid)
    if peer_ro:  # bound before the world is copied in (the copy merges into them)
        for _, d in peer_binds(root):
            d.mkdir()
            chown_tree(d, uid)
    if not gateway:
        return Slot(root, None, uid, group)
    forked = uid is not None and warm.enabled() and not peer_ro
    srv = warm.server_for(work_dir, ready_timeout_s) if forked else None
    if srv is not None:
        for _staged, target in sandbox.zygote_rebinds():  # mount points, as bwrap makes them
            top, _, rest = target.lstrip("/").partition("/")
            (root / {"root": "home", "tmp": "tmp", "world": "world"}[top] / rest).mkdir(
                parents=True, exist_ok=True
            )
        try:
            limits = sandbox.SandboxLimits.from_env()
            return Slot(root, srv.spawn(root, uid, limits, group), uid, group)
        except warm.ForkServerError:
            pass  # a fresh gateway sandbox below
    rw = [("/world", root / "world"), ("/tmp", root / "tmp"), ("/root", root / "home")]
    if peer_ro:
        rw += peer_binds(root)
    # isolated (-I: no PYTHON* variables, no user site, and -P: not even the working
    # folder on sys.path) and started in /: a module the trial writes into /world never
    # shadows one the gateway imports (issue 29, finding 3)
    cmd = [sys.executable, *ISOLATED, "apexrl.envs.local.gateway_main", "--wait", "/world"]
    argv = sandbox.bwrap_argv(rw, cwd="/", network=True, uid=uid, ro=peer_ro)
    argv += cmd + [str(ready_timeout_s)]
    if group is not None:
        argv = group.join_argv(argv)
    with open(root / GATEWAY_LOG, "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            env=base_env({}),
        )
    return Slot(root, proc, uid, group)


class _Pool:
    """Warm slots per work dir, refilled in the background after each take."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slots: dict[str, list[Slot]] = {}
        self.filling: dict[str, int] = {}

    def take(self, work_dir: Path) -> Slot | None:
        with self.lock:
            slots = self.slots.get(str(work_dir), [])
            while slots:
                slot = slots.pop(0)  # the oldest: the most likely to be warm
                if slot.alive():
                    return slot
                slot.kill()
                sandbox.remove_trial_folder(slot.root)
        return None

    def refill(self, work_dir: Path, ready_timeout_s: float, target: int) -> None:
        key = str(work_dir)
        with self.lock:
            n = target - len(self.slots.get(key, [])) - self.filling.get(key, 0)
            if n <= 0:
                return
            self.filling[key] = self.filling.get(key, 0) + n

        def fill() -> None:
            try:
                slot = new_slot(work_dir, ready_timeout_s)
                with self.lock:
                    self.slots.setdefault(key, []).append(slot)
            except Exception:  # a warm slot is an optimisation: a start makes its own
                pass
            finally:
                with self.lock:
                    self.filling[key] -= 1

        for _ in range(n):
            SPAWNER.submit(fill)

    def wait_filled(self, timeout_s: float) -> bool:
        """Wait until no background refill is under way (every refill has made its slot
        or failed; a fresh gateway's imports may still be running in it); False when
        `timeout_s` passed first."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                if not any(self.filling.values()):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def drain(self) -> None:
        with self.lock:
            slots = [s for v in self.slots.values() for s in v]
            self.slots.clear()
        for slot in slots:
            slot.kill()
            sandbox.remove_trial_folder(slot.root)


POOL = _Pool()


class _Spawner:
    """One long-lived thread starts every gateway sandbox.

    bwrap's --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that
    started the process exits; sandboxes started from short-lived threads (asyncio's
    to_thread workers, a pool refill thread) would die with them."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def submit(self, fn, *args) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self.jobs.put((fn, args, fut))
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self._run, name="apexrl-sandbox-spawner", daemon=True
                )
                self.thread.start()
        return fut

    def _run(self) -> None:
        while True:
            fn, args, fut = self.jobs.get()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as e:  # handed to the caller
                fut.set_exception(e)


SPAWNER = _Spawner()
