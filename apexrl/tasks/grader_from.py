"""`tasks convert --grader-from PATH`: tasks that grade with archipelago's own runner.

Each converted task's tests/ then holds what the recipe's tasks hold, from the user's
checkout at convert time (apexrl ships none of it):

  tests/test.sh                     finds a Python with the runner's dependencies, runs grade.py
  tests/grade.py                    drives the runner, writes /logs/verifier/reward.json
  tests/runner/                     the checkout's grading/ project (runner/, pyproject, uv.lock)
  tests/archipelago/verifiers.json  the rubric as the runner reads it (one output_llm verifier each)
  tests/archipelago/eval_configs.json, scoring.json   output_llm; the mean of the criteria
  tests/archipelago/task.json       task id and prompt (the first message the judge sees)
  tests/archipelago/initial_snapshot.zip   the world as the task starts (world + task
                                    files), only when a criterion reads files (needs_snapshot)
  tests/archipelago/source.json     where the runner came from: commit, content key

The judge's model, server and key come at run time from the verifier's environment
(task.toml [verifier.env] names them with ${...}); no value is written into the task.

The in-sandbox grading needs network (the judge; uv when no runtime is bound). Network
(`--grader-network`):
  verifier  (the default) only the verifier phase (`[verifier] network_mode = "public"`);
            the agent's code stays offline. Needs an environment that switches policy
            per phase (apexrl's local one); Harbor refuses it on one that cannot.
  public    the whole trial has it (`[environment] network_mode = "public"`), as the
            recipe's sandboxes do (its agent pip-installs at setup): the agent's code
            too (issue 42, finding 2). Runs on every environment, Modal and docker
            included, which keep one policy per trial.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from apexrl.errors import BadRecordError, UsageError

RUNNER_DIR = "runner"
INPUTS_DIR = "archipelago"
SNAPSHOT = "initial_snapshot.zip"
TOPS = ("filesystem/", ".apps_data/")
SKIP = {".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".git", ".tmp"}
# the verifier's environment, resolved by Harbor from the host at run time
VERIFIER_ENV = {
    "GRADING_MODEL": "${GRADING_MODEL:-gemini/gemini-2.5-flash}",
    "GRADING_API_BASE": "${GRADING_API_BASE:-}",
    "GRADING_API_KEY": "${GRADING_API_KEY:-}",
    "GRADING_EXTRA_ARGS": "${GRADING_EXTRA_ARGS:-}",
    "GOOGLE_API_KEY": "${GOOGLE_API_KEY:-}",
    "GEMINI_API_KEY": "${GEMINI_API_KEY:-}",
    "OPENAI_API_KEY": "${OPENAI_API_KEY:-}",
    "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY:-}",
}
VERIFIER_TIMEOUT_S = 3600.0  # the runner's judge may take minutes per criterion


@dataclass(frozen=True)
class GraderSource:
    """The checkout whose grading runner goes into every task."""

    root: Path
    commit: str | None
    key: str  # sha256 over grading/'s files
    network: str = "verifier"  # or "public" (see the module doc)

    @property
    def grading(self) -> Path:
        return self.root / "grading"


NETWORKS = ("public", "verifier")


def resolve_grader_source(path: Path, network: str = "verifier") -> GraderSource:
    """The checkout at `path`, or UsageError (exit 2) naming the fix."""
    from apexrl.artifacts.archipelago_runner import content_key
    from apexrl.artifacts.checkout import checkout_commit

    fix = "point --grader-from at a checkout of archipelago (the folder holding grading/)"
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"--grader-from {path}: no such folder", hint=fix)
    if not p.is_dir():
        raise UsageError(f"--grader-from {path}: not a folder", hint=fix)
    root = p.resolve()
    missing = [
        rel
        for rel in ("grading/runner/main.py", "grading/pyproject.toml", "grading/uv.lock")
        if not (root / rel).is_file()
    ]
    if missing:
        inner = root / "archipelago" / "grading" / "runner" / "main.py"
        hint = f"did you mean {root / 'archipelago'}?" if inner.is_file() else fix
        raise UsageError(
            f"--grader-from {path} is not a checkout of archipelago's grading runner "
            f"(missing {', '.join(missing)})",
            hint=hint,
        )
    if network not in NETWORKS:
        raise UsageError(
            f"--grader-network {network!r} is not one of {', '.join(NETWORKS)}",
            hint="verifier: only the grading has network (an environment that switches "
            "policy per phase); public: the whole trial (the recipe's way)",
        )
    return GraderSource(
        root=root, commit=checkout_commit(root), key=content_key(root / "grading"), network=network
    )


def _skip(name: str) -> bool:
    # a checkout's .env may hold the user's secrets: never copied into a dataset
    return name in SKIP or name == ".env" or name.startswith(".env.") or name.endswith(".pyc")


def write_grader_tests(
    grader: GraderSource,
    tests_dir: Path,
    *,
    task_id: str,
    prompt: str,
    criteria: list[dict],
    initial: Path | None,
) -> None:
    """Replace the stdlib runner in tests/ with archipelago's (see the module doc).
    `initial`: the initial snapshot zip to carry, or None for an answer-only task."""
    from apexrl.artifacts.archipelago_runner import EVAL_CONFIGS, SCORING, runner_verifiers

    vendored = resources.files("apexrl.tasks.vendored")
    for src, name in (("archipelago_test.sh", "test.sh"), ("archipelago_grade.py", "grade.py")):
        target = tests_dir / name
        target.write_bytes(vendored.joinpath(src).read_bytes())
        target.chmod(0o755)
    shutil.copytree(
        grader.grading,
        tests_dir / RUNNER_DIR,
        symlinks=False,
        ignore=lambda _d, names: [n for n in names if _skip(n)],
    )
    inputs = tests_dir / INPUTS_DIR
    inputs.mkdir()
    files = {
        "verifiers.json": runner_verifiers(criteria, task_id),
        "eval_configs.json": EVAL_CONFIGS,
        "scoring.json": SCORING,
        "task.json": {"task_id": task_id, "prompt": prompt},
        "source.json": {
            "grader": "archipelago",
            "commit": grader.commit,
            "content_key": grader.key,
            "initial_snapshot": initial is not None,
            "network": grader.network,
        },
    }
    for name, obj in files.items():
        (inputs / name).write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", "utf-8")
    if initial is not None:
        shutil.copyfile(initial, inputs / SNAPSHOT)


def initial_snapshot(world_zip: Path, task_files: Path | None, out: Path) -> Path:
    """The world as a task starts, as a snapshot zip (`filesystem/...`, `.apps_data/...`):
    the world zip's files (under any wrapping folders) with the task's input files
    (environment/task_files, laid out like a world) over them. Links are left out."""
    import stat

    overlay: dict[str, Path] = {}
    if task_files is not None and task_files.is_dir():
        for p in sorted(task_files.rglob("*")):
            if p.is_file() and not p.is_symlink():
                overlay[p.relative_to(task_files).as_posix()] = p
    try:
        zsrc = zipfile.ZipFile(world_zip)
    except (OSError, zipfile.BadZipFile) as e:
        raise BadRecordError(str(world_zip), f"not a readable world zip ({e})") from None
    with zsrc, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        prefix = _world_prefix([i.filename for i in zsrc.infolist()])
        for info in zsrc.infolist():
            name = info.filename
            if info.is_dir() or not name.startswith(prefix):
                continue
            rel = name[len(prefix) :]
            if not rel.startswith(TOPS) or rel in overlay:
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                continue
            parts = rel.split("/")
            if ".." in parts or "" in parts[:-1] or "\\" in rel:
                raise BadRecordError(str(world_zip), f"unsafe member name {name!r}")
            entry = zipfile.ZipInfo(rel, date_time=info.date_time)
            entry.compress_type = zipfile.ZIP_DEFLATED
            with zsrc.open(info) as src, zout.open(entry, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        for rel, p in overlay.items():
            zout.write(p, rel)
    return out


def _world_prefix(names: list[str]) -> str:
    """The wrapping folders before filesystem/ or .apps_data/ ('' when at the top)."""
    best: str | None = None
    for name in names:
        for top in TOPS:
            i = name.find(top)
            if i == 0 or (i > 0 and name[i - 1] == "/"):
                cand = name[:i]
                if best is None or len(cand) < len(best):
                    best = cand
    return best or ""
