"""A real multi-node Ray cluster on this machine, for tests and benchmarks.

Each node is its own `ray start --block` (its own raylet, object store and workers),
started in a new session so that it and everything it starts can be stopped by
process group and pid; `ray stop` is never used (it would stop every Ray on the
machine). A worker node can be isolated: it runs under bubblewrap with the host's
root but a private /tmp and /dev/shm and an empty folder over each path in `hide`,
so it cannot see the driver's tasks, worlds or run folder and a path leak fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OBJECT_STORE_BYTES = 80 * 2**20  # Ray's floor is 75 MiB; every node keeps to it
# a killed raylet is declared dead within a few seconds, not Ray's default ~30 s
HEAD_SYSTEM_CONFIG = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}


def node_env() -> dict[str, str]:
    """A loaded machine starts a node's dashboard agent slowly: the raylet waits for it
    longer than its 30 s default instead of failing a check."""
    return {**os.environ, "RAY_agent_register_timeout_ms": "300000"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start() -> list[str]:
    return [sys.executable, "-m", "ray.scripts.scripts", "start", "--block"]


def _common(num_cpus: int) -> list[str]:
    return [
        "--node-ip-address=127.0.0.1",
        f"--num-cpus={num_cpus}",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        f"--node-manager-port={free_port()}",
        f"--object-manager-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        "--disable-usage-stats",
        "--include-log-monitor=false",
    ]


def _under(p: Path, top: Path) -> bool:
    return p == top or top in p.parents


def isolation_argv(hide: list[Path]) -> list[str]:
    """bwrap over the host's root: private /tmp and /dev/shm, each `hide` path empty.
    What the node needs to run (this repo, the interpreter's folders) is bound back
    when it lives under /tmp."""
    bwrap = shutil.which("bwrap")
    assert bwrap, "bubblewrap is needed (make sysdeps installs it)"
    argv = [bwrap, "--dev-bind", "/", "/", "--cap-add", "ALL"]
    argv += ["--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    tmp = Path("/tmp")
    needed = {REPO, Path(sys.prefix), Path(sys.base_prefix)}
    needed |= {Path(p) for p in sys.path if "-packages" in p and Path(p).is_dir()}
    for p in sorted(needed):
        if _under(p.resolve(), tmp):
            argv += ["--ro-bind", str(p), str(p)]
    for p in hide:
        if p.exists() and not _under(p.resolve(), tmp):
            argv += ["--tmpfs", str(p.resolve())]
    return argv + ["--"]


class Node:
    """One `ray start --block` process group (a head or a worker node)."""

    def __init__(self, name: str, argv: list[str], log: Path, env: dict | None = None) -> None:
        self.name = name
        self.log = log
        self._fh = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            argv,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        self.pids: set[int] = {self.proc.pid}

    def wait_started(self, timeout_s: float = 300) -> None:
        """Until `ray start` says the node is up (read from its log: asking the cluster
        from a new Python each second would load the machine that is starting it)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if b"Ray runtime started" in self.log.read_bytes():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-3000:]}")
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: not up within {timeout_s}s")

    def descendants(self) -> set[int]:
        """Every live process of this node: its session, and children of those."""
        out = set()
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (d / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[3]) == self.proc.pid:  # session id
                    out.add(int(d.name))
        self.pids |= out
        return out

    def raylet_pid(self) -> int | None:
        for pid in sorted(self.descendants()):
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
                if cmd.endswith(b"/raylet"):
                    return pid
        return None

    def kill_raylet(self) -> int:
        pid = self.raylet_pid()
        assert pid is not None, f"{self.name}: no raylet"
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self) -> None:
        """SIGTERM the group, then SIGKILL whatever of ours is left (by pid)."""
        self.descendants()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.descendants():
            time.sleep(0.2)
        for pid in self.pids | self.descendants():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._fh.close()


class Cluster:
    """A head (no CPUs: no trial runs there) and worker nodes of one CPU each."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        # the head's session folder (a node in its own /tmp keeps its own): short, as Ray's
        # socket paths in it must fit a unix socket name
        self.temp_dir = Path(tempfile.mkdtemp(prefix="apexrl-rc-"))
        self.nodes: dict[str, Node] = {}
        self._ids: dict[str, str] = {}

    def start_head(self) -> Node:
        """The head: no CPUs, the custom resource `node_head`. Up to 3 tries, each on a
        fresh port (see start_worker)."""
        for attempt in range(3):
            self.port = free_port()
            self.address = f"127.0.0.1:{self.port}"
            argv = _ray_start() + ["--head", f"--port={self.port}", "--include-dashboard=false"]
            argv += _common(0) + [f"--temp-dir={self.temp_dir}"]
            argv += [f"--ray-client-server-port={free_port()}"]
            argv += ["--resources", json.dumps({"node_head": 1})]
            argv += ["--system-config", json.dumps(HEAD_SYSTEM_CONFIG)]
            node = self.nodes["head"] = Node("head", argv, self.root / "head.log", node_env())
            try:
                node.wait_started()
                return node
            except RuntimeError:
                node.stop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def start_worker(self, name: str, *, hide: list[Path] | None = None) -> Node:
        """A worker node of one CPU with the custom resource `node_<name>`; isolated
        (bubblewrap, see isolation_argv) when `hide` is given. Ray gives a starting
        node a fixed 30 s to register, which a loaded machine can miss: up to 3 tries."""
        for attempt in range(3):
            argv = _ray_start() + [f"--address={self.address}"] + _common(1)
            argv += ["--resources", json.dumps({f"node_{name}": 1})]
            if hide is not None:
                argv = isolation_argv(hide) + argv
            node = self.nodes[name] = Node(name, argv, self.root / f"{name}.log", node_env())
            try:
                node.wait_started()
                return node
            except RuntimeError:
                node.stop()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def alive(self) -> list[dict]:
        """Alive nodes as the GCS sees them (asked from a short-lived subprocess, so
        this process never holds a Ray connection of its own)."""
        code = (
            "import json, ray\n"
            f"ray.init(address={self.address!r}, log_to_driver=False)\n"
            "print('NODES=' + json.dumps([n for n in ray.nodes() if n['Alive']]))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        with open(self.root / "alive.log", "a") as fh:  # what the probe said, for a failure
            fh.write(f"--- rc {out.returncode}\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}\n")
        found = [x for x in out.stdout.splitlines() if x.startswith("NODES=")]
        return json.loads(found[-1][6:]) if found else []

    def node_id(self, name: str) -> str:
        """The Ray node id of node `name` (asked once, then remembered)."""
        if name not in self._ids:
            for _ in range(30):
                for n in self.alive():
                    for key in n["Resources"]:
                        if key.startswith("node_") and not key.startswith("node:"):
                            self._ids[key[5:]] = n["NodeID"]
                if name in self._ids:
                    break
                time.sleep(2)
        return self._ids[name]

    def stop(self) -> None:
        for node in reversed(list(self.nodes.values())):
            node.stop()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
