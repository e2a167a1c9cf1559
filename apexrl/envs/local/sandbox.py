"""The bubblewrap command line of the local sandbox, and what it promises.

Every process of a trial (the world's gateway and each exec) starts as

    bwrap [namespaces, read-only system, the trial's rw binds] --
      prlimit [per-process limits] --
      setpriv --reuid U --regid U --clear-groups --no-new-privs --bounding-set -all --
      unshare --user --map-root-user --  CMD

so it runs as root *inside* a user namespace whose root is the unprivileged host
uid U (one per trial): kernel knobs are out of reach (/proc/sys is also mounted
read-only), files of the host are only what the binds show, and the trial's own
folders are chowned to U. When apexrl itself is not root, bwrap's own user
namespace maps the caller's (unprivileged) uid to root inside instead.

bwrap and the helpers after it (all host programs, bwrap running as root before any
namespace exists) start with `base_env()` only, a fixed environment. A task's or an
exec's own values go to the final command inside the sandbox through a file
descriptor (`with_env`), never as arguments (values do not show in the host's
process list) and never in a host program's environment (issue 29: `LD_PRELOAD` from
a task ran a library inside bwrap as root).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from apexrl.host import BWRAP_INSTALL, env_int, find_bwrap

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/mime.types",
    "/etc/bash.bashrc",
    "/etc/profile",
)
ROOT_LINKS_OR_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# kernel knobs: mounted read-only over the sandbox's own /proc
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
UID_BASE = 200_000  # sandbox uids: UID_BASE .. UID_BASE + UID_SPAN - 1, one per trial
UID_SPAN = 100_000


class SandboxStartError(RuntimeError):
    pass


class SandboxError(RuntimeError):
    """The sandbox could not start, or died. `kind`: start, gateway, died."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class SandboxDiedError(SandboxError):
    def __init__(self, message: str) -> None:
        super().__init__(message, kind="died")


def bwrap_path() -> str:
    found = find_bwrap()
    if not found:
        raise SandboxStartError(
            f"bubblewrap (bwrap) is not installed; the local environment needs it ({BWRAP_INSTALL})"
        )
    return found


@dataclass(frozen=True)
class SandboxLimits:
    """Per-process limits (prlimit) inside each trial's sandbox. `nproc` counts every
    process of the trial's uid, so it bounds the trial as a whole (a fork bomb stops
    there); memory and CPU are per process (RLIMIT_AS / RLIMIT_CPU)."""

    nproc: int | None = 1024
    nofile: int | None = 4096
    address_space_bytes: int | None = 16 * 1024**3
    cpu_seconds: int | None = None
    file_bytes: int | None = 8 * 1024**3
    # bytes, not per process: each /dev/shm of the trial (a tmpfs of this size), and the
    # trial folder (/world, /tmp, /root, /tests, /solution) when it is in RAM (a tmpfs
    # of its own, `trial_tmpfs`)
    shm_bytes: int | None = 512 * 1024**2
    scratch_bytes: int | None = 4 * 1024**3
    # bytes, for the whole trial: a memory cgroup of its own (apexrl.envs.local.memcg)
    # where the host gives apexrl one; RAM of all its processes and the tmpfs pages
    # they write
    trial_memory_bytes: int | None = 8 * 1024**3

    @classmethod
    def from_env(cls) -> SandboxLimits:
        d = cls()
        return cls(
            nproc=env_int("APEXRL_SANDBOX_NPROC", d.nproc, lift=True),
            nofile=env_int("APEXRL_SANDBOX_NOFILE", d.nofile, lift=True),
            address_space_bytes=env_int(
                "APEXRL_SANDBOX_MEMORY_BYTES", d.address_space_bytes, lift=True
            ),
            cpu_seconds=env_int("APEXRL_SANDBOX_CPU_SECONDS", d.cpu_seconds, lift=True),
            file_bytes=env_int("APEXRL_SANDBOX_FILE_BYTES", d.file_bytes, lift=True),
            shm_bytes=env_int("APEXRL_SANDBOX_SHM_BYTES", d.shm_bytes, lift=True),
            scratch_bytes=env_int("APEXRL_SANDBOX_SCRATCH_BYTES", d.scratch_bytes, lift=True),
            trial_memory_bytes=env_int(
                "APEXRL_SANDBOX_TRIAL_MEMORY_BYTES", d.trial_memory_bytes, lift=True
            ),
        )

    def rlimits(self) -> dict[str, int]:
        """The same limits by resource name (the fork server's setrlimit)."""
        pairs = {
            "nproc": self.nproc,
            "nofile": self.nofile,
            "as": self.address_space_bytes,
            "cpu": self.cpu_seconds,
            "fsize": self.file_bytes,
            "core": 0,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    def prlimit_args(self) -> list[str]:
        out = []
        for flag, value in (
            ("--nproc", self.nproc),
            ("--nofile", self.nofile),
            ("--as", self.address_space_bytes),
            ("--cpu", self.cpu_seconds),
            ("--fsize", self.file_bytes),
            ("--core", 0),
        ):
            if value is not None:
                out.append(f"{flag}={value}:{value}")
        return out


def drops_privileges() -> bool:
    """True when apexrl runs as root: sandboxes then switch to a per-trial host uid."""
    return os.geteuid() == 0


def new_sandbox_uid() -> int | None:
    """A host uid for one trial's sandbox, unique among live trials on this host, this
    process's and other apexrl processes' (None when apexrl is not root). Two trials on
    one uid would share its process limit and could signal each other's processes.
    Give it back with `release_uid` when the trial's sandbox is gone."""
    if not drops_privileges():
        return None
    claims = _claims_dir()
    start = secrets.randbelow(UID_SPAN)
    for i in range(UID_SPAN):  # from a random point: the first free one
        uid = UID_BASE + (start + i) % UID_SPAN
        if _claim(claims, uid):
            return uid
    raise SandboxError(
        f"no free sandbox uid: all {UID_SPAN} of {UID_BASE}-{UID_BASE + UID_SPAN - 1} are "
        f"held by live trials (claims in {claims})",
        kind="start",
    )


def release_uid(uid: int | None) -> None:
    """Give back a uid from `new_sandbox_uid` (idempotent)."""
    if uid is None:
        return
    with _UID_LOCK:
        if uid not in _LIVE_UIDS:
            return
        _LIVE_UIDS.discard(uid)
    path = _claims_dir() / str(uid)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


UID_CLAIMS = ("/run", "apexrl-uids")  # host-wide, root's: one file per live trial uid
_UID_LOCK = threading.Lock()
_LIVE_UIDS: set[int] = set()


def _claims_dir() -> Path:
    parent = Path(UID_CLAIMS[0]) if os.path.isdir(UID_CLAIMS[0]) else Path(tempfile.gettempdir())
    d = parent / UID_CLAIMS[1]
    with contextlib.suppress(FileExistsError):
        d.mkdir(mode=0o700)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise SandboxError(
            f"{d} (sandbox uid claims) is not a folder only this user can use "
            f"(mode {stat.filemode(st.st_mode)}, uid {st.st_uid}); remove it",
            kind="start",
        )
    return d


def _claim(claims: Path, uid: int) -> bool:
    with _UID_LOCK:
        if uid in _LIVE_UIDS:
            return False
        me = json.dumps({"pid": os.getpid(), "start": _start_of(os.getpid())})
        for _ in range(2):
            try:
                fd = os.open(claims / str(uid), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                if not _stale(claims / str(uid)):
                    return False
                with contextlib.suppress(FileNotFoundError):
                    (claims / str(uid)).unlink()
                continue
            with os.fdopen(fd, "w") as f:
                f.write(me)
            _LIVE_UIDS.add(uid)
            return True
    return False


def _stale(path: Path) -> bool:
    """A claim whose process is gone (or was replaced by another with its pid)."""
    try:
        owner = json.loads(path.read_text())
        pid = int(owner["pid"])
    except FileNotFoundError:
        return True
    except (OSError, ValueError, KeyError, TypeError):
        try:  # half-written by a process that died mid-write, or being written now
            return time.time() - path.stat().st_mtime > 60
        except OSError:
            return True
    return _start_of(pid) is None or _start_of(pid) != owner.get("start")


def _start_of(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def chown_tree(root: Path, uid: int | None) -> None:
    """Give the sandbox uid the trial's writable folders (no link followed)."""
    if uid is None:
        return
    os.chown(root, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def base_env(env: dict[str, str]) -> dict[str, str]:
    """The sandbox's whole environment: a fixed base plus `env` (nothing of the host)."""
    base = {
        "PATH": DEFAULT_PATH,
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return {**base, **{k: str(v) for k, v in env.items()}}


# Run inside the sandbox by a bash started with base_env() only: read NAME=VALUE records
# (NUL-terminated) from the descriptor, export them, close it, run the command.
_ENV_LOADER = (
    'while IFS= read -r -d "" kv; do export "$kv" || exit 125; done <&{fd}; exec {fd}<&-; exec "$@"'
)


def with_env(command: list[str], env: dict[str, str] | None) -> tuple[list[str], int | None]:
    """`command` wrapped to receive `env` from a file descriptor inside the sandbox, and
    that descriptor (the caller passes it with pass_fds and closes it after the start).
    (command, None) when `env` is empty. Names are checked by `check_env` first."""
    if not env:
        return command, None
    data = bytearray()
    for name, value in env.items():
        record = f"{name}={value}".encode("utf-8", "surrogateescape")
        if b"\0" in record or not _NAME.match(name):
            raise ValueError(f"environment variable {name!r}: not a plain name, or a NUL byte")
        data += record + b"\0"
    fd = os.memfd_create("apexrl-env", os.MFD_CLOEXEC)
    try:
        _write_all(fd, bytes(data))
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    loader = _ENV_LOADER.format(fd=fd)
    return ["/bin/bash", "-c", loader, "apexrl-env", *command], fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def system_binds() -> list[str]:
    """bwrap arguments for the host's root links/folders and the /etc files a sandbox
    reads, read-only (the trial sandbox and the fork server's sandbox share them)."""
    argv: list[str] = []
    for p in ROOT_LINKS_OR_DIRS:
        if os.path.islink(p):
            argv += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            argv += ["--ro-bind", p, p]
    # /etc readable by the sandbox's uid (bwrap would make it 0700, owned by its own root:
    # then no sandbox process could read a file bound below it)
    argv += ["--perms", "0755", "--dir", "/etc"]
    for p in ETC_FILES:
        if os.path.exists(p):
            argv += ["--ro-bind", p, p]
    return argv


def bwrap_argv(
    rw: list[tuple[str, Path]],
    *,
    cwd: str,
    network: bool,
    uid: int | None = None,
    limits: SandboxLimits | None = None,
    ro: tuple[str, ...] | list[str] = (),
    ro_binds: list[tuple[str, Path]] | None = None,
) -> list[str]:
    """bubblewrap's command line up to the command: read-only system, `rw` binds, the
    privilege drop and limits. `ro`: more host folders bound read-only at their own
    paths (e.g. a grading runtime's venv and interpreter); `ro_binds`: (target, source)
    pairs bound read-only like `rw`'s (the world as a grader sees it). Run it with
    `subprocess(env=base_env(...))`."""
    argv = [
        bwrap_path(),
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    if uid is not None:  # only to switch to the trial's uid; setpriv drops them again
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    else:
        argv += ["--unshare-user", "--uid", "0", "--gid", "0"]
    argv += ["--hostname", "apexrl-sandbox"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/usr", "/usr"]
    argv += system_binds()
    argv += ["--proc", "/proc"]
    for p in PROC_READ_ONLY:
        if os.path.exists(p):
            argv += ["--ro-bind", p, p]
    argv += ["--dev", "/dev"]
    limits = limits if limits is not None else SandboxLimits.from_env()
    if limits.shm_bytes is not None:  # RAM: capped, not bwrap's unbounded /dev folder
        argv += ["--perms", "1777", "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"]
    made: set[str] = set()

    def mount_point(path: str, *, leaf: bool) -> None:
        # folders on the way readable by the sandbox uid (bwrap makes /logs, /root 0700)
        parts = Path(path).parts[1:]
        for i in range(1, len(parts) + (1 if leaf else 0)):
            d = "/" + "/".join(parts[:i])
            if d not in made:
                made.add(d)
                argv.extend(["--perms", "0755", "--dir", d])

    binds = [(t, s, "--bind") for t, s in rw] + [(t, s, "--ro-bind") for t, s in ro_binds or ()]
    for target, source, how in sorted(binds, key=lambda t: len(t[0])):  # parents first
        mount_point(target, leaf=False)
        argv += [how, str(source), target]
        made.add(target)
    bound = list(python_paths())
    for p in bound:
        mount_point(p, leaf=True)
        argv += ["--ro-bind", p, p]
    for p in ro:
        if any(p == b or p.startswith(b.rstrip("/") + "/") for b in bound):
            continue
        bound.append(p)
        mount_point(p, leaf=True)
        argv += ["--ro-bind", p, p]
    # with a uid switch, change folder after it (bwrap keeps no right to read the trial's)
    argv += ["--chdir", cwd if uid is None else "/", "--"]
    prl = limits.prlimit_args()
    if prl:
        argv += ["prlimit", *prl, "--"]
    if uid is not None:
        argv += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            "unshare",
            "--user",
            "--map-root-user",
            "--",
            "env",
            f"--chdir={cwd}",
            "--",
        ]
    return argv


TMPFS_MAGIC = 0x01021994
OPEN_TREE_CLONE = 1
AT_FDCWD = -100
MNT_DETACH = 2
_libc = None


def _c():
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _fail(what: str) -> OSError:
    import ctypes

    e = ctypes.get_errno()
    return OSError(e, f"{what}: {os.strerror(e)}")


def on_tmpfs(path: Path) -> bool:
    """Whether `path` is on a tmpfs (RAM): statfs's magic number."""
    import ctypes

    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type is its first field
    if _c().statfs(os.fsencode(path), buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value == TMPFS_MAGIC


def trial_tmpfs(root: Path, size: int) -> None:
    """Mount a tmpfs of `size` bytes on the (empty) trial folder `root`: what a trial
    writes in RAM stops there (apexrl as root). Undone by `remove_trial_folder`."""
    inodes = max(16384, size // 16384)  # inodes cost memory outside `size`: bounded too
    opts = f"size={size},mode=0700,nr_inodes={inodes}".encode()
    if _c().mount(b"apexrl-trial", os.fsencode(root), b"tmpfs", 2 | 4, opts) != 0:  # nosuid,nodev
        raise _fail(f"mount a tmpfs on {root}")


def remove_trial_folder(root: Path) -> None:
    """Remove a trial folder, unmounting its own tmpfs first (a sandbox still holding it
    keeps it until it exits)."""
    if os.path.ismount(root):
        _c().umount2(os.fsencode(root), MNT_DETACH)
    shutil.rmtree(root, ignore_errors=True)


def clone_tree(path: Path) -> int:
    """A detached bind mount of `path` (open_tree(OPEN_TREE_CLONE)), as a descriptor the
    fork server moves into a trial's mount namespace: a trial folder's own tmpfs, which
    the fork server's namespace (made before it) does not show."""
    fd = _c().syscall(428, AT_FDCWD, os.fsencode(path), OPEN_TREE_CLONE | os.O_CLOEXEC)
    if fd < 0:
        raise _fail(f"open_tree {path}")
    return int(fd)


# what the gateway fork server needs to build each trial's sandbox (forkserver.py)
ZYGOTE_CAPS = ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL")


def zygote_argv(trials_dir: Path) -> list[str]:
    """bubblewrap's command line for the gateway fork server (apexrl as root only): the
    read-only system and Python, `trials_dir` at /trials, a private /tmp, mount points
    /world and /root for its children, and only ZYGOTE_CAPS. It stays in the host's PID
    namespace (it reports its children's pids); each child gets its own namespaces."""
    argv = [
        bwrap_path(),
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-uts",
        "--cap-drop",
        "ALL",
    ]
    for cap in ZYGOTE_CAPS:
        argv += ["--cap-add", cap]
    argv += ["--hostname", "apexrl-sandbox", "--ro-bind", "/usr", "/usr"]
    argv += system_binds()
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    argv += ["--perms", "0755", "--dir", "/world", "--perms", "0755", "--dir", "/root"]
    argv += ["--bind", str(trials_dir), "/trials"]
    made: set[str] = set()
    for p in python_paths():
        parts = Path(p).parts[1:]
        for i in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:i])
            if d not in made and d not in ("/usr", "/tmp", "/world", "/root", "/trials"):
                made.add(d)
                argv += ["--perms", "0755", "--dir", d]
        argv += ["--ro-bind", p, p]
    for staged, p in zygote_rebinds():  # re-bound by each child over its own /root, /tmp
        argv += ["--ro-bind", p, staged]
    return argv + ["--chdir", "/", "--"]


def zygote_rebinds() -> list[tuple[str, str]]:
    """(staged copy in the fork server, target): the Python folders under the trial's own
    /root, /tmp or /world, which a child binds again over its trial's folders."""
    out = []
    for i, p in enumerate(python_paths()):
        if any(p == t or p.startswith(t + "/") for t in ("/root", "/tmp", "/world")):
            out.append((f"/.apexrl-py-{i}", p))
    return out


_PY_PATHS: list[str] | None = None


def python_paths() -> list[str]:
    """Folders the sandbox needs to run this Python and apexrl (read-only)."""
    global _PY_PATHS
    if _PY_PATHS is None:
        import apexrl

        cands = {
            sys.prefix,
            sys.base_prefix,
            os.path.dirname(os.path.abspath(apexrl.__file__)),  # the package only
        }
        exe = os.path.realpath(sys.executable)
        cands.add(os.path.dirname(os.path.dirname(exe)))
        # site folders a .pth file adds (a venv sharing another venv's packages)
        cands.update(p for p in sys.path if p and os.path.isabs(p) and "site-packages" in p)
        out = []
        for c in sorted(cands, key=len):
            if c.startswith(("/usr", "/bin", "/lib")) or not os.path.isdir(c):
                continue
            if any(c == o or c.startswith(o.rstrip("/") + "/") for o in out):
                continue
            out.append(c)
        _PY_PATHS = out
    return _PY_PATHS


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def pass_env_from_environment() -> set[str]:
    raw = os.environ.get("APEXRL_PASS_ENV", "")
    return {n.strip() for n in raw.replace(",", " ").split() if n.strip()}


def resolve_allowed(env: dict[str, str], allowed: set[str]) -> tuple[dict[str, str], list[str]]:
    """Interpolate `${NAME}` / `${NAME:-default}` from the host for allowed names only.
    Returns (values, names refused); a key whose variable is refused with no default
    is left out."""
    out: dict[str, str] = {}
    refused: list[str] = []
    for key, template in env.items():
        missing = False

        def sub(m: re.Match) -> str:
            nonlocal missing
            name, default = m.group(1), m.group(2)
            if name in allowed and name in os.environ:
                return os.environ[name]
            if name not in allowed:
                refused.append(name)
            if default is not None:
                return default
            missing = True
            return ""

        value = _VAR.sub(sub, str(template))
        if not missing:
            out[key] = value
    return out, sorted(set(refused))


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
