"""The gateway fork server (zygote): warm world gateways without a Python start per trial.

    python -m apexrl.envs.local.forkserver CONTROL_FD READY_TIMEOUT_S

runs inside one bubblewrap sandbox per driver process (see `sandbox.zygote_argv`):
the read-only system and Python, the trial folders' parent at /trials, and only
the capabilities it needs to build per-trial sandboxes (mount, set uid, drop the
bounding set). It imports the gateway stack once (`gateway_main._preload`), then
for each request on CONTROL_FD (a unix socket: one JSON line and five file
descriptors from the local environment) forks a trial's gateway and enters, in the
child, the same sandbox a `bwrap ... prlimit ... setpriv ... unshare --user
--map-root-user` chain builds for a fresh gateway:

    C1 (host pid ns)   unshare mount, PID, IPC, UTS (and cgroup) namespaces;
                       /world, /tmp, /root bind the trial's own folders, a fresh
                       /dev/shm and /dev/pts, /trials unmounted, / read-only;
                       then waits for its child and kills it when the local
                       environment closes the lifeline (or dies)
    C2 (PID 1 of its own namespace)
                       a fresh /proc (nothing over it, see become_trial), the trial's limits,
                       no supplementary groups, the trial's host uid, an empty
                       bounding set, then a user namespace mapping root to that
                       uid, an environment of `sandbox.base_env` only, not
                       dumpable, the seccomp filter (`apexrl.envs.local.seccomp`), and the
                       gateway (`gateway_main.wait_and_serve`)

The fork server never sees a trial's token or world id: the local environment
writes them to the trial's own pipe, which only C2 reads. It holds no thread, so a
fork copies nothing half-locked.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import re
import resource
import select
import signal
import socket
import stat
import sys

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
AT_FDCWD = -100
MOVE_MOUNT_F_EMPTY_PATH = 4
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
TRIALS = "/trials"
NAME = re.compile(r"^apexrl-trial-[A-Za-z0-9_-]+$")
# ctl (read), out (write), log (append), lifeline (read), status (write), and detached
# mounts of the trial's world, tmp and home folders (`sandbox.clone_tree`)
N_FDS = 8
RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(
    src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    def enc(s):
        return s.encode() if s is not None else None

    _check(_libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def bind(src: str, target: str, *, read_only: bool = False) -> None:
    mount(src, target, None, MS_BIND)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (MS_RDONLY if read_only else 0)
    mount(None, target, None, flags)


def prctl(op: int, arg: int) -> None:
    _check(_libc.prctl(op, arg, 0, 0, 0), f"prctl {op}")


def _close_all_but(keep: set[int]) -> None:
    for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")):
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def move_mount(tree: int, target: str) -> None:
    """Attach a detached mount (an open_tree descriptor) at `target`, nosuid and nodev."""
    if _libc.syscall(429, tree, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"move_mount {target}: {os.strerror(e)}")
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV)


def enter_trial_namespaces(
    name: str, uid: int, rebinds: list, trees: list[int], shm_bytes: int | None = None
) -> None:
    """C1: the trial's own mount, PID, IPC and UTS namespaces and its folders (`trees`:
    its world, tmp and home folders as detached mounts from the local environment)."""
    os.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)
    with contextlib.suppress(OSError):  # like bwrap's --unshare-cgroup-try
        os.unshare(CLONE_NEWCGROUP)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    for target, tree in zip(("/world", "/tmp", "/root"), trees, strict=True):
        st = os.fstat(tree)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            raise OSError(f"{target}: not the trial's own folder")
        move_mount(tree, target)
        os.close(tree)
    for staged, target in rebinds:  # the Python under /root: bound over the trial's home
        if not staged.startswith("/.apexrl-py-") or ".." in target.split("/"):
            raise ValueError(f"bad rebind {staged} -> {target}")
        bind(staged, target, read_only=True)  # the mount point: made by the local env
    # what the fork server's /dev holds is shared by its children: give each its own
    size = f",size={int(shm_bytes)}" if shm_bytes else ""  # RAM: capped
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" + size)
    mount(
        "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620"
    )
    _check(_libc.umount2(TRIALS.encode(), MNT_DETACH), f"umount {TRIALS}")  # no other trial
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    socket.sethostname("apexrl-sandbox")


def become_trial(uid: int, limits: dict[str, int]) -> None:
    """C2 (PID 1 of the new namespace): /proc, limits, the trial's uid, a user namespace."""
    # a fresh /proc with nothing mounted over it: the code tool's commands, in user
    # namespaces of their own, may then mount their own /proc (the kernel refuses a new
    # /proc where the visible one has locked mounts over parts of it). /proc/sys and
    # the like stay writable only by the host's root: the gateway's user namespace owns
    # none of their knobs.
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for key, value in limits.items():
        hard = resource.getrlimit(RLIMITS[key])[1]
        v = int(value) if hard == resource.RLIM_INFINITY else min(int(value), hard)
        resource.setrlimit(RLIMITS[key], (v, v))
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.setresuid(uid, uid, uid)  # every capability of the host is gone here
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not switch to the trial's uid")
    prctl(PR_SET_DUMPABLE, 1)  # as after an exec: /proc/self is its own again (uid_map)
    os.unshare(CLONE_NEWUSER)  # root inside, the trial's uid outside (unshare --map-root-user)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1")
    _write("/proc/self/gid_map", f"0 {uid} 1")
    # a change of credentials clears the parent-death signal: set it again, last
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child(req: dict, fds: list[int], timeout: float) -> int:
    """C1: namespaces, then C2 (the gateway), then wait; never returns into the server."""
    if req.get("cgroup"):  # the trial's memory cgroup, joined before anything else runs
        cgroup = fds.pop()
        os.write(cgroup, b"0")
        os.close(cgroup)
    ctl, out, log, life, status, *trees = fds
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _close_all_but(set(fds) | {2})
    os.dup2(log, 2)
    name, uid = str(req["name"]), int(req["uid"])
    if not NAME.match(name):
        raise ValueError(f"bad trial folder name {name!r}")
    shm = req.get("shm_bytes")
    enter_trial_namespaces(name, uid, list(req.get("rebinds") or []), trees, shm)
    pid = os.fork()
    if pid == 0:
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.close(life)
            os.close(status)
            become_trial(uid, dict(req.get("limits") or {}))
            from apexrl.envs.local import gateway_main

            gateway_main.harden()  # not dumpable, the seccomp filter
            os.environ.clear()
            os.environ.update({str(k): str(v) for k, v in dict(req["env"]).items()})
            os.dup2(ctl, 0)
            os.dup2(out, 1)
            os.dup2(log, 2)
            for fd in (ctl, out, log):
                if fd > 2:
                    os.close(fd)
            os.chdir("/world")
            rc = gateway_main.wait_and_serve("/world", timeout)
        except BaseException as e:  # reported in the trial's gateway log
            with contextlib.suppress(OSError):
                os.write(2, f"forkserver: {type(e).__name__}: {e}\n".encode())
            rc = 70
        os._exit(rc)
    for fd in (ctl, out, log):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([life, pidfd], [], [])
    if life in ready:  # closed by the local environment (stop, or its process died)
        os.kill(pid, signal.SIGKILL)  # PID 1: the whole namespace goes with it (CAP_KILL)
    rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with contextlib.suppress(OSError):
        os.write(status, f"{rc}\n".encode())
    return 0


def serve(sock: socket.socket, timeout: float) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    gc.collect()
    gc.freeze()  # forks share the imported heap instead of touching it
    sock.sendall(b'{"ready": true}\n')
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 65536, N_FDS + 1)
        except (ConnectionError, OSError):
            return
        if not msg:
            return  # the local environment is gone
        try:
            req = json.loads(msg)
            want = N_FDS + (1 if req.get("cgroup") else 0)  # + the memory cgroup's procs
            if len(fds) != want:
                raise ValueError(f"expected {want} descriptors, got {len(fds)}")
            pid = os.fork()
            if pid == 0:
                code = 70
                try:
                    sock.close()
                    code = _child(req, fds, timeout)
                except BaseException as e:
                    with contextlib.suppress(OSError):
                        os.write(fds[2], f"forkserver: {type(e).__name__}: {e}\n".encode())
                os._exit(code)
            reply = {"pid": pid}
        except Exception as e:
            reply = {"error": f"{type(e).__name__}: {e}"}
        finally:
            for fd in fds:
                os.close(fd)
        sock.sendall((json.dumps(reply) + "\n").encode())


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    timeout = float(argv[1]) if len(argv) > 1 else 60.0
    from apexrl.envs.local import gateway_main

    gateway_main._preload(serve_once=True)
    serve(sock, timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
