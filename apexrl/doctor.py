"""Machine checks behind `apexrl doctor`."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import subprocess
import sys

from apexrl import __version__, secrets

EXTRAS = {
    "train": ("skyrl", "ray"),
    "serve": ("vllm",),
    "local": ("torch", "transformers"),
    "dev": ("pytest", "hypothesis", "moto"),
}
TOOLS = ("bwrap", "skopeo", "umoci", "podman", "docker-registry", "harbor", "git")
CREDENTIALS = {
    "aws": secrets.AWS_KEYS[:2],
    "modal": secrets.MODAL_KEYS,
    "hf": ("HF_TOKEN",),
}


def collect_checks() -> list[dict]:
    rows: list[dict] = [
        _row("apexrl", "version", True, __version__),
        _row("python", "version", sys.version_info >= (3, 12), platform.python_version()),
        _row("python", "platform", True, f"{platform.system()} {platform.machine()}"),
    ]
    for extra, modules in EXTRAS.items():
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        detail = "installed" if not missing else f"missing {', '.join(missing)}"
        rows.append(_row("extra", extra, not missing, detail))
    rows.append(_gpu_row())
    for tool in TOOLS:
        path = shutil.which(tool)
        rows.append(_row("tool", tool, path is not None, "found" if path else "not found"))
    for name, keys in CREDENTIALS.items():
        have = secrets.present(keys)
        missing = [k for k, ok in have.items() if not ok]
        detail = "set" if not missing else f"not set: {', '.join(missing)}"
        rows.append(_row("credentials", name, not missing, detail))
    return rows


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
