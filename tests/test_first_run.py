"""First run on a fresh machine: README's `make demo` from a clean copy of the project in
a fresh venv, on a machine whose PATH lacks bubblewrap, stops at the eval preflight with
one clear message instead of starting trials that all fail.

The fresh venv gets apexrl itself installed from the copy (`pip install --no-deps -e`),
and reuses this environment's third-party packages through a .pth file: a full
`make install` downloads ~1 GB and is what `.ci/run` does on a fresh machine anyway.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.integration


def clean_copy(dst: Path) -> Path:
    """The project's files as a clean clone would have them (tracked + new, not ignored)."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in filter(None, names):
        rel = raw.decode()
        src = REPO / rel
        if not src.is_file():
            continue  # deleted in the working tree
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(src.read_bytes())
        out.chmod(src.stat().st_mode & 0o777)
    return dst


def fresh_venv(venv: Path, project: Path) -> Path:
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python3.*/site-packages"))
    # every site folder this interpreter sees (a venv may reach its packages through a .pth)
    dirs = [sysconfig.get_paths()["purelib"]]
    dirs += [p for p in sys.path if p.endswith("-packages") and os.path.isdir(p)]
    (site / "zz_deps.pth").write_text("".join(f"{d}\n" for d in dict.fromkeys(dirs)))
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps"]
        + ["--no-build-isolation", "-e", str(project)],
        check=True,
        capture_output=True,
    )
    (venv / ".installed").touch()  # `make install` is done: the Makefile's own stamp
    return venv


def path_without(tool: str, where: Path) -> str:
    where.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if os.path.isdir(d):
            for name in os.listdir(d):
                if name != tool and not (where / name).exists():
                    (where / name).symlink_to(Path(d) / name)
    return str(where)


def test_make_demo_without_bwrap_stops_at_the_preflight(tmp_path):
    project = clean_copy(tmp_path / "apexrl")
    venv = fresh_venv(project / ".venv", project)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APEXRL_", "PYTEST"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{path_without('bwrap', tmp_path / 'bin')}"
    p = subprocess.run(
        ["make", "demo"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "== 8/11 tito verify" in out  # the steps before the eval ran
    assert "preflight failed" in out and "no trial was started" in out, out[-3000:]
    assert "bubblewrap (bwrap)" in out and "apt-get install bubblewrap" in out
    assert "demo stopped" in out
    assert "the oracle passed" not in out  # not the misleading end of the old demo
    logs = project / "demo-out" / "eval-oracle" / "logs"
    assert not logs.exists() or not any(logs.iterdir())
    assert "Traceback" not in out
