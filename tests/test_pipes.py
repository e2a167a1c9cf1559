"""Every command's piped stdout is NDJSON and a closed pipe is not an error (issue 32.4).

Each command runs as a user runs it in a script, `set -o pipefail; apexrl ... | head -1`,
and again into a reader that is already gone (`| head -n 0`): exit 0, nothing on stderr
about the pipe, and the first line a JSON record for every data command.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

APEXRL = str(Path(sys.executable).with_name("apexrl"))


def sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cmd}"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def apexrl(*args) -> str:
    return shlex.join([APEXRL, *map(str, args)])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """Example data, task dirs, a dataset, a snapshot, a tiny checkpoint and an eval run."""
    from typer.testing import CliRunner

    from apexrl.cli.app import app
    from apexrl.cli.eval import EvalDeps
    from tests.eval.conftest import passing_trial

    w = tmp_path_factory.mktemp("pipes")
    for cmd in (
        apexrl("tasks", "example", "-o", "ex"),
        apexrl("tasks", "convert", "ex", "-o", "tasks"),
        apexrl("tasks", "pack", "tasks", "-o", "ds"),
        apexrl("engine", "make-tiny", "tiny", "--layers", "1"),
    ):
        res = sh(cmd + " >/dev/null", w)
        assert res.returncode == 0, res.stderr
    world = sorted((w / "ex" / "world_files_zipped").glob("*.zip"))[0]
    shutil.copy(world, w / "world.zip")
    assert sh(apexrl("world", "snapshot", "world.zip", "-o", "snap.tar") + " >/dev/null", w)
    res = CliRunner().invoke(
        app,
        ["eval", "run", "--agent", "oracle", "-t", str(w / "tasks"), "-o", str(w / "run")],
        obj=EvalDeps(trial_fn=passing_trial),
    )
    assert res.exit_code == 0, res.output
    return w


# (args, stdout is NDJSON); {n} makes each run's output path its own
COMMANDS = [
    (["schema"], True),
    (["schema", "trial-result"], True),
    (["doctor"], True),
    (["tasks", "example", "-o", "ex{n}"], True),
    (["tasks", "convert", "ex", "-o", "conv{n}"], True),
    (["tasks", "ls", "ds"], True),
    (["tasks", "validate", "tasks"], False),  # no findings: nothing on stdout
    (["tasks", "pack", "tasks", "-o", "pack{n}"], True),
    (["tasks", "unpack", "ds", "-o", "unpack{n}"], True),
    (["tasks", "split", "ds", "-o", "split{n}"], True),
    (["world", "tools", "world.zip"], True),
    (["world", "snapshot", "world.zip", "-o", "snap{n}.tar"], True),
    (["world", "diff", "snap.tar", "snap.tar"], False),  # no change: nothing on stdout
    (["engine", "make-tiny", "tiny{n}", "--layers", "1"], True),
    (["plan", "concurrency", "--model-config", "tiny/config.json", "--gpu-memory", "80"], True),
    (
        [
            "tito",
            "verify",
            "-t",
            "qwen3",
            "--chat-template",
            "qwen3-verbatim",
            "--mode",
            "template",
        ],
        True,
    ),
    (["eval", "report", "run"], True),
    (["eval", "report", "run", "--format", "md"], False),
    (["eval", "report", "run", "--format", "html", "-o", "-"], False),
    (["eval", "view", "run", "-o", "view{n}.html"], True),
    (["eval", "view", "run", "-o", "-"], False),
    (["publish", "dataset", "ds", "--repo", "me/ds", "--dry-run"], True),
    (["train", "recipes/smoke-cpu.toml", "--data", "ds", "--dry-run"], True),
]


@pytest.mark.parametrize(("args", "ndjson"), COMMANDS, ids=[" ".join(a[:2]) for a, _ in COMMANDS])
def test_piped_into_head(work, args, ndjson):
    root = Path(__file__).resolve().parents[1]
    (work / "recipes").mkdir(exist_ok=True)
    shutil.copy(root / "recipes" / "smoke-cpu.toml", work / "recipes" / "smoke-cpu.toml")
    for n, reader in ((1, "head -1"), (2, "head -n 0")):
        cmd = apexrl(*[a.format(n=n) for a in args]) + f" | {reader}"
        res = sh(cmd, work)
        assert res.returncode == 0, f"{cmd}: exit {res.returncode}\n{res.stderr}"
        for bad in ("Broken pipe", "BrokenPipe", "Traceback", "error:", "Exception ignored"):
            assert bad not in res.stderr, f"{cmd}:\n{res.stderr}"
        if ndjson and n == 1:
            assert isinstance(json.loads(res.stdout), dict), f"{cmd}: {res.stdout!r}"
