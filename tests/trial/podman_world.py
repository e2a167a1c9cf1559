"""A world image podman can run, built offline, for Harbor's own podman environment.

No registry is reachable here, so the base is assembled from this machine's own
binaries: a shell, coreutils, find/tar and Python 3 with its standard library
(what the task's tests/grade.py needs), plus their shared libraries. `apexrl world
pack --base` puts the world and the apexrl runtime on top, exactly as for a
production image; `podman load` makes it runnable under the image ref the task
names (task.toml [environment] docker_image).

podman itself is configured through CONTAINERS_CONF (cgroupfs, runc, explicit
nofile/nproc ulimits: what this kind of machine needs), never the system's files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TOOLS = [
    "bash",
    "sh",
    "dash",
    "sleep",
    "mkdir",
    "cat",
    "rm",
    "cp",
    "mv",
    "chmod",
    "chown",
    "ls",
    "ln",
    "env",
    "tr",
    "tee",
    "test",
    "true",
    "false",
    "dirname",
    "basename",
    "pwd",
    "find",
    "tar",
    "gzip",
    "head",
    "tail",
    "wc",
    "sort",
    "uniq",
    "grep",
    "sed",
    "id",
    "touch",
    "stat",
    "readlink",
    "realpath",
    "mktemp",
    "date",
    "uname",
    "xargs",
    "printf",
    "echo",
]
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
pids_limit = 0

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
"""
LIB_RE = re.compile(r"(/\S+\.so[^\s]*)")


def podman_env(tmp: Path) -> dict[str, str]:
    conf = tmp / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def _libs(binary: str) -> set[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return {m.group(1) for m in LIB_RE.finditer(out)}


def _copy(src: str, rootfs: Path) -> None:
    dst = rootfs / src.lstrip("/")
    if dst.exists():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    real = os.path.realpath(src)
    if real != src:
        _copy(real, rootfs)
        dst.symlink_to(real)
    else:
        shutil.copy2(src, dst)


def build_rootfs(rootfs: Path) -> None:
    py = os.path.realpath("/usr/bin/python3")
    bins = [shutil.which(t) for t in TOOLS] + [py]
    libs: set[str] = set()
    for b in filter(None, bins):
        _copy(b, rootfs)
        libs |= _libs(os.path.realpath(b))
    stdlib = Path("/usr/lib") / Path(py).name
    for lib in libs:
        _copy(lib, rootfs)
    shutil.copytree(
        stdlib,
        rootfs / stdlib.relative_to("/"),
        symlinks=True,
        ignore=shutil.ignore_patterns("test", "__pycache__", "idlelib", "tkinter", "ensurepip"),
    )
    for so in (stdlib / "lib-dynload").glob("*.so"):
        for lib in _libs(str(so)):
            _copy(lib, rootfs)
    (rootfs / "usr/bin/python3").unlink(missing_ok=True)
    (rootfs / "usr/bin/python3").symlink_to(Path(py).name)
    for d in ("bin", "sbin", "lib", "lib64"):
        target = rootfs / d
        if not target.exists() and (rootfs / "usr" / d).exists():
            target.symlink_to(f"usr/{d}")
    if not (rootfs / "bin").exists():
        (rootfs / "bin").symlink_to("usr/bin")
    etc = rootfs / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (etc / "group").write_text("root:x:0:\n")
    (etc / "os-release").write_text('ID=apexrl-test-base\nNAME="apexrl test base"\n')
    for d in ("tmp", "root", "logs", "proc", "dev", "sys"):
        (rootfs / d).mkdir(exist_ok=True)
    (rootfs / "tmp").chmod(0o1777)


def run(cmd: list[str], env: dict | None = None) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


def build_world_image(world_zip: Path, work: Path, ref: str) -> str:
    """Build and load `ref` (repo:tag) for the world; returns the image's digest."""
    env = podman_env(work)
    rootfs = work / "rootfs"
    build_rootfs(rootfs)
    base_tar = work / "base.tar"
    run(["tar", "-C", str(rootfs), "-cf", str(base_tar), "."])
    layout = work / "base-layout"
    run(["umoci", "init", "--layout", str(layout)])
    run(["umoci", "new", "--image", f"{layout}:base"])
    run(
        [
            "umoci",
            "raw",
            "add-layer",
            "--image",
            f"{layout}:base",
            str(base_tar),
        ]
    )
    run(
        [
            "umoci",
            "config",
            "--image",
            f"{layout}:base",
            "--os",
            "linux",
            "--architecture",
            "amd64",
            "--config.env",
            "PATH=/usr/local/bin:/usr/bin:/bin",
        ]
    )
    out = work / "images"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "apexrl",
            "world",
            "pack",
            str(world_zip),
            "-o",
            str(out),
            "--base",
            f"oci:{layout}:base",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        raise RuntimeError(f"world pack failed: {p.stderr[-2000:]}")
    rec = json.loads(p.stdout.splitlines()[0])
    loaded = run(["podman", "load", "-i", rec["archive"]], env=env)
    image_id = loaded.strip().split()[-1]
    run(["podman", "tag", image_id, ref], env=env)
    return rec["digest"]
