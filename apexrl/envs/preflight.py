"""Environment checks: what each environment needs from the host before any trial.

Each environment's registry entry (apexrl.envs.registry) names its check here
("apexrl.envs.preflight:check_local", ...): `bwrap` that can create a sandbox and a
place for trial folders (local, apexrl.envs.local.scratch), `podman` / `docker` with a
daemon, Modal's credentials; the package an entry's extra installs is checked for every
environment (`extra`, `modules`). A check returns the problems it found
(`Problem`: what is wrong, the fix, the exit code); eval's preflight (apexrl.eval.preflight),
`train` and each Ray node gather them into one `PreflightError` (exit 2, or 3 when only
credentials are missing).

Adding an environment's check: a function `(name, env) -> list[Problem]` here (or in the
environment's own module) named by its registry entry's `preflight`.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from apexrl.errors import ApexError, ExitCode

PROBE_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Problem:
    what: str
    fix: str
    code: ExitCode = ExitCode.USAGE


class PreflightError(ApexError):
    def __init__(self, problems: list[Problem]) -> None:
        lines = [f"preflight failed ({len(problems)} problem(s)); no trial was started:"]
        for p in problems:
            lines.append(f"  - {p.what}\n    fix: {p.fix}")
        codes = {p.code for p in problems}  # one kind of problem: its own code
        code = codes.pop() if len(codes) == 1 else ExitCode.USAGE
        super().__init__("\n".join(lines), code=code)
        self.problems = problems


def check_environment(environment: str, env: dict[str, str]) -> list[Problem]:
    """The environment's own check, named by its registry entry (apexrl.envs.registry)."""
    from apexrl.envs.registry import ENVIRONMENTS
    from apexrl.importpath import load

    entry = ENVIRONMENTS.get(environment)
    if entry is None:
        return [
            Problem(f"unknown environment {environment!r}", f"use --env {'|'.join(ENVIRONMENTS)}")
        ]
    problems = [
        Problem(
            f"--env {environment} needs the {m} package", f"pip install 'apexrl[{entry.extra}]'"
        )
        for m in entry.modules
        if importlib.util.find_spec(m) is None
    ]
    return problems + (load(entry.preflight)(environment, env) if entry.preflight else [])


def _which(tool: str, env: dict[str, str]) -> str | None:
    return shutil.which(tool, path=env.get("PATH"))


def check_local(name: str, env: dict[str, str]) -> list[Problem]:
    """The local environment: a bubblewrap that works, and a place for trial folders."""
    return check_bwrap(name, env) + check_scratch(env)


def check_scratch(env: dict[str, str]) -> list[Problem]:
    from apexrl.envs.local.scratch import ScratchError, choose, own_folder

    try:
        chosen = choose(env)
        if chosen.kind != "set":  # apexrl's own folder in a shared parent: this user's?
            own_folder(chosen.path)
    except ScratchError as e:
        return [
            Problem(
                f"the local environment's trial folders: {e}",
                "APEXRL_LOCAL_SCRATCH=auto|ram|disk, or APEXRL_LOCAL_WORKDIR=DIR",
            )
        ]
    return []


def check_bwrap(name: str, env: dict[str, str]) -> list[Problem]:
    from apexrl.host import find_bwrap

    bwrap = find_bwrap(env.get("PATH"))
    if bwrap is None:
        return [
            Problem(
                "the local environment needs bubblewrap (bwrap), and it is not on PATH",
                "install it (`apt-get install bubblewrap`, or `make sysdeps`), "
                "or run trials elsewhere with --env podman|modal",
            )
        ]
    # A sandbox that cannot be created (user namespaces off, seccomp) fails every trial.
    argv = [bwrap, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    failure = _probe(argv, env)
    if failure:
        return [
            Problem(
                f"bubblewrap cannot create a sandbox here: {failure}",
                "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) "
                "or run as root, or use --env podman|modal",
            )
        ]
    return []


def check_container_cli(tool: str, env: dict[str, str]) -> list[Problem]:
    exe = _which(tool, env)
    if exe is None:
        return [
            Problem(
                f"--env {tool} needs the `{tool}` command, and it is not on PATH",
                f"install {tool} (`apt-get install {tool}`) or use --env local",
            )
        ]
    failure = _probe([exe, "info"], env)
    if failure:
        return [
            Problem(
                f"`{tool} info` fails, so {tool} cannot run containers: {failure}",
                f"start the {tool} service (or fix its configuration), or use --env local",
            )
        ]
    return []


def check_modal(name: str, env: dict[str, str]) -> list[Problem]:
    """Modal's credentials (its package: the entry's extra, checked by check_environment)."""
    problems = []
    has_token = env.get("MODAL_TOKEN_ID") and env.get("MODAL_TOKEN_SECRET")
    config = Path(env.get("MODAL_CONFIG_PATH") or Path.home() / ".modal.toml")
    if not has_token and not config.is_file():
        problems.append(
            Problem(
                "--env modal needs Modal credentials: MODAL_TOKEN_ID and MODAL_TOKEN_SECRET "
                "are not set and there is no ~/.modal.toml",
                "run `modal token new`, or export MODAL_TOKEN_ID and MODAL_TOKEN_SECRET",
                ExitCode.AUTH,
            )
        )
    return problems


def _probe(argv: list[str], env: dict[str, str]) -> str | None:
    """None when ARGV exits 0 within the timeout, else a one-line reason."""
    try:
        p = subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{' '.join(argv[:2])}` did not answer within {PROBE_TIMEOUT_S:.0f} s"
    except OSError as e:
        return str(e)
    if p.returncode == 0:
        return None
    text = (p.stderr or p.stdout).decode("utf-8", "replace").strip().splitlines()
    return (text[-1] if text else f"exit code {p.returncode}")[:300]
