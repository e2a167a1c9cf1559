"""Machine checks behind `apexrl doctor`."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from apexrl import __version__, secrets
from apexrl.engine.registry import ENGINES
from apexrl.envs.registry import ENVIRONMENTS

# What each extra must make importable: the modules apexrl's own code paths import (the
# train extra: `train --dry-run` with SkyRL's validate_cfg, `--check-only`, the job
# entrypoint). Checked by importing them in a child interpreter, not by package presence.
# The engines' and environments' extras come from their registries
# (apexrl.engine.registry.ENGINES, apexrl.envs.registry.ENVIRONMENTS).
EXTRAS = {
    "train": (
        "skyrl.train.config",
        "skyrl.train.utils.utils",  # validate_cfg: torch, ray, loguru, omegaconf, jaxtyping
        "skyrl.backends.skyrl_train.utils.ppo_utils",  # the policy-loss registry
        "skyrl.train.entrypoints.main_base",
        "skyrl.train.entrypoints.main_generate",
        "skyrl.train.fully_async_trainer",
        "skyrl.train.generators.base",
        "ray.job_submission",
    ),
    **{e.extra: e.modules for e in ENGINES.values() if e.extra},
    "jax": ("jax", "flax", "optax", "skyrl.backends.jax"),  # training.backend = "jax"
    "aws": ("boto3",),  # image push to ECR
    **{e.extra: e.modules for e in ENVIRONMENTS.values() if e.extra},  # e.g. modal
    "ray": ("ray",),  # eval run --ray-address
    "dev": ("pytest", "hypothesis", "moto"),
}
IMPORT_TIMEOUT_S = 180.0
# host tools: what each environment runs (apexrl.envs.registry.ENVIRONMENTS), then the
# image and Harbor tooling
TOOLS = tuple(
    dict.fromkeys(
        [t for e in ENVIRONMENTS.values() for t in e.tools]
        + ["skopeo", "umoci", "podman", "docker-registry", "harbor", "git"]
    )
)
CREDENTIALS = {
    "aws": secrets.AWS_KEYS[:2],
    **{e.name: e.credentials for e in ENVIRONMENTS.values() if e.credentials},
    "hf": ("HF_TOKEN",),
}


def collect_checks(use_cache: bool = True) -> list[dict]:
    rows: list[dict] = [
        _row("apexrl", "version", True, __version__),
        _row("python", "version", sys.version_info >= (3, 12), platform.python_version()),
        _row("python", "platform", True, f"{platform.system()} {platform.machine()}"),
    ]
    from concurrent.futures import ThreadPoolExecutor

    # the slow checks (child interpreters importing torch & co., nvidia-smi, docker's
    # daemon) run side by side: doctor takes the slowest, not their sum
    with ThreadPoolExecutor(max_workers=len(EXTRAS) + 2) as pool:
        cache = ImportCache.load() if use_cache else ImportCache.empty()
        extras = {extra: pool.submit(cache.check, mods) for extra, mods in EXTRAS.items()}
        gpu = pool.submit(_gpu_row)
        docker = pool.submit(_docker_daemon)
        rows.append(_native_row())
        rows.append(_scratch_row())
        rows.append(_memcg_row())
        for extra, fut in extras.items():
            ok, detail = fut.result()
            rows.append(_row("extra", extra, ok, detail))
        cache.save()
        rows.append(gpu.result())
        for tool in TOOLS:
            path = find_tool(tool)
            if tool == "docker" and path is not None:
                ok, detail = docker.result()
                rows.append(_row("tool", tool, ok, detail))
                continue
            rows.append(_row("tool", tool, path is not None, path or "not found"))
    for name, keys in CREDENTIALS.items():
        have = secrets.present(keys)
        missing = [k for k, ok in have.items() if not ok]
        detail = "set" if not missing else f"not set: {', '.join(missing)}"
        rows.append(_row("credentials", name, not missing, detail))
    return rows


def find_tool(name: str) -> str | None:
    """A tool on PATH, or beside this interpreter (apexrl run by path from its venv,
    whose bin/ is not on PATH, still finds the venv's harbor)."""
    import os

    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))


def _docker_daemon() -> tuple[bool, str]:
    """docker counts only with a daemon that answers (the client alone runs nothing)."""
    path = find_tool("docker")
    if path is None:
        return False, "not found"
    try:
        out = subprocess.run(
            [path, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"{path}: no daemon answered ({type(e).__name__})"
    if out.returncode != 0 or not out.stdout.strip():
        why = (out.stderr.strip().splitlines() or ["no daemon"])[-1][:160]
        return False, f"{path}: client only, no daemon ({why})"
    return True, f"{path} (daemon {out.stdout.strip()})"


def _native_row() -> dict:
    """The C fast path of pack/unpack (apexrl/artifacts/_fasttar.c), built when apexrl is
    installed on a machine with a C compiler (the manylinux wheel carries it); without it
    apexrl runs its Python code, slower, with the same results."""
    import os

    from apexrl.artifacts.archive_extract import native_tar

    if native_tar() is not None:
        return _row("native", "fasttar", True, "built: pack, unpack and the world copy in C")
    if os.environ.get("APEXRL_NATIVE_TAR", "1") == "0":
        return _row("native", "fasttar", True, "off (APEXRL_NATIVE_TAR=0): the Python code runs")
    return _row(
        "native",
        "fasttar",
        False,
        "not built (Python fallback): pack, unpack and the world copy run in Python"
        " (reinstall with a C compiler and zlib's headers, or from the manylinux wheel)",
    )


def _scratch_row() -> dict:
    """Where the local environment puts trial folders (RAM or disk) and why."""
    from apexrl.envs.local.scratch import ScratchError, choose

    try:
        s = choose()
    except ScratchError as e:
        return _row("local", "scratch", False, str(e))
    return _row("local", "scratch", True, f"{s.kind}: {s.why}")


def _memcg_row() -> dict:
    from apexrl.envs.local import memcg

    if os.geteuid() != 0:
        return _row("local", "trial memory cap", False, "not root: per-process limits only")
    found = memcg.parent()
    if found is None:
        return _row(
            "local", "trial memory cap", False, "no writable memory cgroup: per-process limits only"
        )
    return _row("local", "trial memory cap", True, f"a cgroup v{found[1]} group per trial")


def import_check(modules: tuple[str, ...], timeout_s: float = IMPORT_TIMEOUT_S) -> tuple[bool, str]:
    """Import `modules` in a child interpreter (a crash or a slow native import cannot take
    doctor down); (ok, "importable" or the first failure with its error)."""
    top = modules[0].split(".")[0]
    if importlib.util.find_spec(top) is None:
        return False, f"not installed (no module {top!r})"
    code = (
        "import importlib, sys\n"
        "for m in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except BaseException as e:\n"
        "        print(f'import {m}: {type(e).__name__}: {e}'.splitlines()[0]); sys.exit(1)\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code, *modules],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return False, f"importing {', '.join(modules)} took over {timeout_s:.0f}s"
    if out.returncode == 0:
        return True, "importable"
    lines = (out.stdout or out.stderr).strip().splitlines()
    return False, (lines[-1] if lines else f"import failed (exit {out.returncode})")[:300]


class ImportCache:
    """Successful import checks, remembered for one state of the environment.

    Importing torch, transformers, Ray and SkyRL in child interpreters is most of doctor's
    time (5-9 s). A check that passed is reused while nothing was installed or removed
    since: the key is the interpreter plus the modification times of every folder on its
    module path (pip, uv and conda add or remove a `*.dist-info` entry there on each
    install). Failures are never cached, so a fix shows at once; `doctor --no-cache`
    imports everything again.
    """

    def __init__(self, path: Path | None, key: str, passed: set[str]) -> None:
        self.path, self.key, self.passed, self.dirty = path, key, passed, False

    @classmethod
    def empty(cls) -> ImportCache:
        return cls(None, "", set())

    @classmethod
    def load(cls) -> ImportCache:
        path = _cache_root() / "doctor-imports.json"
        key = environment_key()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            passed = set(data["passed"]) if data.get("key") == key else set()
        except (OSError, ValueError, KeyError, TypeError):
            passed = set()
        return cls(path, key, passed)

    def check(self, modules: tuple[str, ...]) -> tuple[bool, str]:
        name = ",".join(modules)
        if name in self.passed:
            return True, "importable"
        ok, detail = import_check(modules)
        if ok and self.path is not None:
            self.passed.add(name)
            self.dirty = True
        return ok, detail

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"key": self.key, "passed": sorted(self.passed)}))
            tmp.replace(self.path)
        except OSError:
            pass  # a read-only home only costs the next doctor its speed


def environment_key() -> str:
    """The interpreter and the modification time of each folder on its module path."""
    h = hashlib.sha256(sys.executable.encode())
    for entry in sys.path:
        try:
            h.update(f"\0{entry}\0{os.stat(entry or '.').st_mtime_ns}".encode())
        except OSError:
            h.update(f"\0{entry}\0-".encode())
    return h.hexdigest()


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "apexrl"


def _gpu_row() -> dict:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return _row("gpu", "cuda", False, "no nvidia-smi: CPU only")
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return _row("gpu", "cuda", False, f"nvidia-smi failed: {e}")
    gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return _row("gpu", "cuda", bool(gpus), f"{len(gpus)} x {gpus[0]}" if gpus else "no GPUs")


def _row(section: str, name: str, ok: bool, detail: str) -> dict:
    return {"section": section, "name": name, "ok": ok, "detail": detail}
