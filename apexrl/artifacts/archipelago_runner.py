"""archipelago's grading runner as a thing on disk: a user's checkout, its runner built
into a venv (uv, Python 3.13) keyed by the content of grading/, that venv as a runtime a
sandbox can bind read-only, and the input formats the runner reads (verifiers, eval
configs, scoring). Standard library and apexrl.errors only: apexrl.grading (which runs
the runner), apexrl.tasks (which vendors it into converted tasks) and apexrl.envs
(which gives a sandbox its runtime) all build on it.

Venvs live in APEXRL_PEER_DIR (default ~/.cache/apexrl/peer), one per content key,
built on first use under a lock; `make peer-grader` builds the project's own.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.checkout import checkout_commit
from apexrl.artifacts.file_types import CURRENT_SPELLING, file_scope
from apexrl.artifacts.toolchain import (  # noqa: F401  (PEER_DIR_ENV, BUILD_TIMEOUT_S re-exported)
    BUILD_TIMEOUT_S,
    PEER_DIR_ENV,
    build_once,
    find_python313,
    find_uv,
    peer_dir,
    synced_copy,
)
from apexrl.errors import UsageError

DEFAULT_CHECKOUT_ENV = "APEXRL_ARCHIPELAGO"
PYTHON313_ENV = "APEXRL_PYTHON313"
SKIP_NAMES = {".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".git"}
EVAL_CONFIG_ID = "ec_output_llm"


@dataclass(frozen=True)
class Checkout:
    """A checkout of archipelago: its root, the content key of grading/ and the commit."""

    root: Path
    key: str  # sha256 over grading/'s files (names and bytes)
    commit: str | None

    @property
    def grading(self) -> Path:
        return self.root / "grading"


def resolve_checkout(path: str | Path | None) -> Checkout:
    """The checkout at `path` (else $APEXRL_ARCHIPELAGO, else the one `apexrl peer fetch`
    put in apexrl's cache); UsageError naming the fix."""
    from apexrl.artifacts.archipelago_cache import named_or_default

    text = named_or_default(path, missing="--grader archipelago needs a checkout of archipelago")
    root = Path(text).expanduser().resolve()
    if not (root / "grading" / "runner" / "main.py").is_file():
        raise UsageError(
            f"{root} is not a checkout of archipelago (no grading/runner/main.py)",
            hint="point --archipelago at the folder holding grading/, mcp_servers/, agents/",
        )
    return Checkout(root=root, key=content_key(root / "grading"), commit=checkout_commit(root))


def content_key(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(_files(folder)):
        rel = p.relative_to(folder).as_posix()
        h.update(rel.encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _files(folder: Path):
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in SKIP_NAMES]
        for name in filenames:
            if not name.endswith(".pyc"):
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    yield p


# --- the runner's venv ---------------------------------------------------------------


def python313() -> str:
    """An interpreter for the runner (its project needs Python 3.13)."""
    return find_python313(PYTHON313_ENV, "archipelago's grading runner")


def uv_binary() -> str:
    return find_uv("building archipelago's grading runner")


def runner_dir(checkout: Checkout, *, build: bool = True, log=None) -> Path:
    """The built copy of the checkout's grading/ (with .venv); built on first use."""
    base = peer_dir()
    target = base / f"grading-{checkout.key[:16]}"

    def make() -> dict:
        if log:
            log(f"building archipelago's grading runner from {checkout.grading} (uv, Python 3.13)")
        # built in place (the venv's editable install names its folder)
        synced_copy(
            checkout.grading,
            target,
            skip=SKIP_NAMES,
            python=python313(),
            uv=uv_binary(),
            what=f"uv sync of archipelago's grading project ({checkout.grading})",
            # compiled once: a sandbox binds the venv read-only (grading_runtime) and
            # could not write the bytecode of what each grading imports
            sync_args=("--no-dev", "--compile-bytecode"),
        )
        return {"key": checkout.key, "commit": checkout.commit}

    refuse = UsageError(
        f"archipelago's grading runner for {checkout.root} is not built",
        hint="run `make peer-grader` (or any --grader archipelago command builds it)",
    )
    lock = base / f".grading-{checkout.key[:16]}.lock"
    return build_once(target, lock, make, refuse=None if build else refuse)


# --- the runner's runtime inside a sandbox ------------------------------------------------

RUNTIME_ENV = "APEXRL_GRADING_RUNTIME"
SANDBOX_PYTHON_ENV = "ARCHIPELAGO_GRADING_PYTHON"  # what a task's tests/test.sh looks for


@dataclass(frozen=True)
class GradingRuntime:
    """A built runner venv a sandbox can use read-only: its Python and the host folders
    that Python needs (the venv and its base interpreter), bound at their own paths."""

    python: str
    paths: tuple[str, ...]


def grading_runtime(path: str | Path, *, log=None) -> GradingRuntime:
    """The runtime at `path`: an archipelago checkout (its runner is built on first use,
    as for --grader archipelago) or a built runner folder (`make peer-grader` prints it).
    UsageError naming the fix otherwise."""
    p = Path(path).expanduser().resolve()
    if (p / "grading" / "runner" / "main.py").is_file():
        p = runner_dir(resolve_checkout(p), log=log)
    py = p / ".venv" / "bin" / "python"
    if not py.exists():
        raise UsageError(
            f"{p} is neither an archipelago checkout nor a built grading runner "
            "(no grading/runner/main.py, no .venv/bin/python)",
            hint="pass the checkout (its runner is built on first use) or the folder "
            "`make peer-grader` printed",
        )
    real = Path(os.path.realpath(py))
    folders = [str(p), str(real.parent.parent)]  # <prefix>/bin/python3.13 -> <prefix>
    cfg = p / ".venv" / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text("utf-8", "replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                folders.append(str(Path(os.path.realpath(value.strip())).parent))
    out: list[str] = []
    for f in sorted(set(folders), key=len):
        if f.startswith(("/usr/", "/bin/", "/lib")) or f in ("/usr", "/bin", "/"):
            continue  # the sandbox has the system folders already
        if not any(f == o or f.startswith(o.rstrip("/") + "/") for o in out):
            out.append(f)
    return GradingRuntime(python=str(py), paths=tuple(out))


# --- the runner's input formats ---------------------------------------------------------


def runner_verifiers(criteria: list[dict], task_id: str) -> list[dict]:
    """Each criterion as one output_llm verifier (the first is the primary objective)."""
    out = []
    for i, c in enumerate(criteria):
        values: dict = {"criteria": str(c.get("criteria") or "")}
        kind = expected_file_type(c)
        if kind:
            file_scope(kind)  # an unknown label is refused, not widened by the runner
            values["expected_file_type"] = CURRENT_SPELLING.get(kind, kind)
        values["is_primary_objective"] = bool(c.get("is_primary_objective", i == 0))
        out.append(
            {
                "verifier_id": str(c.get("verifier_id") or f"criterion_{i}"),
                "verifier_version": 1,
                "world_id": None,
                "task_id": task_id or None,
                "eval_config_id": EVAL_CONFIG_ID,
                "verifier_values": values,
                "verifier_index": i,
                "verifier_dependencies": None,
            }
        )
    return out


def expected_file_type(c: dict) -> str | None:
    """A criterion's expected_file_type, flat (apexrl's) or in verifier_values (archipelago's)."""
    kind = c.get("expected_file_type")
    values = c.get("verifier_values")
    if not kind and isinstance(values, dict):
        kind = values.get("expected_file_type")
    return str(kind) if kind else None


EVAL_CONFIGS = [
    {
        "eval_config_id": EVAL_CONFIG_ID,
        "eval_config_name": "output_llm",
        "eval_defn_id": "output_llm",
        "eval_config_values": {},
    }
]
SCORING = {
    "scoring_config_id": "sc_mean",
    "scoring_config_name": "mean",
    "scoring_defn_id": "template",
    "scoring_config_values": {},
}
