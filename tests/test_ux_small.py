"""What a user trips on (issue 32.9-32.14): honest splits, outputs that follow the umask,
progress off a terminal, doctor's findings, and the smaller ones."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app

runner = CliRunner()


@pytest.fixture
def dataset(tmp_path) -> Path:
    """The example data (14 tasks in 3 worlds of 5, 5 and 4 tasks), packed."""
    for args in (
        ["tasks", "example", "-o", str(tmp_path / "ex")],
        ["tasks", "convert", str(tmp_path / "ex"), "-o", str(tmp_path / "tasks")],
        ["tasks", "pack", str(tmp_path / "tasks"), "-o", str(tmp_path / "ds")],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
    return tmp_path / "ds"


def test_split_is_honest_about_the_fraction(dataset, tmp_path):
    got = {}
    for frac in ("0.2", "0.34", "0.9"):
        out = tmp_path / f"split{frac}"
        res = runner.invoke(
            app, ["tasks", "split", str(dataset), "--eval-fraction", frac, "-o", str(out)]
        )
        assert res.exit_code == 0, res.output
        train, evl = (orjson.loads(x) for x in res.stdout.splitlines())
        got[frac] = evl["fraction"]
        assert evl["fraction"] == round(evl["n_tasks"] / 14, 4)
        assert not set(train["worlds"]) & set(evl["worlds"])
        if frac == "0.34":
            assert "warning" not in res.stderr  # 5 of 14 = 0.36: as near as worlds allow
        else:
            assert "the nearest a world-disjoint split gets is" in res.stderr
    assert got["0.2"] < got["0.34"] < got["0.9"]  # the fraction asked for matters
    # -o into a folder apexrl did not write is refused
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    res = runner.invoke(app, ["tasks", "split", str(dataset), "-o", str(mine)])
    assert res.exit_code == 2 and "not written by `tasks split`" in res.stderr


def test_outputs_follow_the_umask(dataset, tmp_path):
    from tests.eval.conftest import eval_runner, passing_trial

    old = os.umask(0o022)
    try:
        res = runner.invoke(app, ["tasks", "unpack", str(dataset), "-o", str(tmp_path / "un")])
        assert res.exit_code == 0, res.output
        res = runner.invoke(
            app, ["tasks", "pack", str(tmp_path / "un"), "-o", str(tmp_path / "ds2")]
        )
        assert res.exit_code == 0, res.output
        run = tmp_path / "run"
        res = eval_runner(passing_trial).invoke(
            app,
            [
                "eval",
                "run",
                "--agent",
                "oracle",
                "-t",
                str(dataset),
                "-o",
                str(run),
                "--limit",
                "2",
            ],
        )
        assert res.exit_code == 0, res.output
        res = runner.invoke(
            app, ["eval", "report", str(run), "-f", "md", "-o", str(tmp_path / "r.md")]
        )
        assert res.exit_code == 0, res.output
    finally:
        os.umask(old)

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    unpacked = next(p for p in (tmp_path / "un").iterdir() if not p.name.startswith("."))
    for d in (tmp_path / "un", unpacked, tmp_path / "ds2", run):
        assert mode(d) == 0o755, (d, oct(mode(d)))
    for f in (run / "run.json", run / "summary.json", run / "results.parquet", tmp_path / "r.md"):
        assert mode(f) == 0o644, (f, oct(mode(f)))
    assert all(mode(f) == 0o644 for f in (tmp_path / "ds2").rglob("*.parquet"))


def test_progress_lines_off_a_terminal_and_bars_know_totals(dataset, tmp_path):
    import subprocess

    env = {**os.environ, "APEXRL_PROGRESS_EVERY": "0", "NO_COLOR": "1"}
    apexrl = str(Path(sys.executable).with_name("apexrl"))
    res = subprocess.run(
        [apexrl, "tasks", "unpack", str(dataset), "-o", str(tmp_path / "un")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    lines = [x for x in res.stderr.splitlines() if x.startswith("unpack: ")]
    assert lines and lines[-1].startswith("unpack: 14/14 (100%)"), res.stderr
    assert all("/14" in x for x in lines)  # the total is known up front, never passed
    # libraries' own bars are off when stderr is not a terminal
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "from apexrl.cli.app import quiet_third_party_bars as q; q();"
            "import os; e = os.environ.get;"
            "print(e('TQDM_DISABLE'), e('HF_HUB_DISABLE_PROGRESS_BARS'))",
        ],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if "TQDM" not in k and "PROGRESS_BARS" not in k},
    )
    assert res.stdout.split() == ["1", "1"], res.stderr


def test_doctor_docker_needs_a_daemon_and_finds_tools_beside_python(tmp_path, monkeypatch):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    docker = bin_ / "docker"  # the client with no daemon, as on a machine without dockerd
    docker.write_text(
        "#!/bin/sh\n"
        "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\n"
        "exit 1\n"
    )
    venv = tmp_path / "venv" / "bin"  # apexrl run by path: its venv's bin/ is not on PATH
    venv.mkdir(parents=True)
    harbor = venv / "harbor"
    harbor.write_text("#!/bin/sh\nexit 0\n")
    for f in (docker, harbor):
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    from apexrl.doctor import _docker_daemon, find_tool

    ok, detail = _docker_daemon()
    assert not ok and "no daemon" in detail
    assert find_tool("harbor") == str(harbor)


def test_smaller_ones(dataset, tmp_path, monkeypatch):
    from tests.eval.conftest import eval_runner, passing_trial

    monkeypatch.chdir(tmp_path)
    # a failed eval leaves no RUN_DIR it created; a failed unpack no folder either
    res = eval_runner(passing_trial).invoke(
        app,
        ["eval", "run", "--agent", "oracle", "-t", str(dataset), "-o", "run", "--domain", "nope"],
    )
    assert res.exit_code == 2 and not (tmp_path / "run").exists(), res.output
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not parquet")
    res = runner.invoke(app, ["tasks", "unpack", str(bad), "-o", "un"])
    assert res.exit_code == 1 and not (tmp_path / "un").exists(), res.output
    # a malformed engine URL is a usage error
    res = runner.invoke(app, ["engine", "check", "--endpoint", "notaurl"])
    assert res.exit_code == 2 and "not an http(s) URL" in res.stderr
    # eval report -o into a folder that does not exist: refused, nothing created
    run = tmp_path / "run2"
    assert (
        eval_runner(passing_trial)
        .invoke(
            app,
            [
                "eval",
                "run",
                "--agent",
                "oracle",
                "-t",
                str(dataset),
                "-o",
                str(run),
                "--limit",
                "1",
            ],
        )
        .exit_code
        == 0
    )
    res = runner.invoke(app, ["eval", "report", str(run), "-o", "/nonexistent/dir/r.html"])
    assert res.exit_code == 2 and not Path("/nonexistent").exists()
    md = runner.invoke(app, ["eval", "report", str(run), "-f", "md"]).stdout
    assert "max_tokens None" not in md and "max_tokens engine default" in md
    # records carry absolute paths; tasks ls takes a folder of task dirs
    res = runner.invoke(app, ["tasks", "ls", str(tmp_path / "tasks")])
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 14
    assert all(json.loads(x)["task_dir"].startswith("/") for x in res.stdout.splitlines())
    cfg = json.loads((run / "run.json").read_text())
    assert cfg["dataset"]["source"] == str(dataset)
    # tito verify on stdin names stdin, not a temp file
    res = runner.invoke(
        app,
        ["tito", "verify", "-t", "qwen3", "--mode", "replay", "--trajectories", "-"],
        input='{"messages": [}\n',
    )
    assert res.exit_code == 1 and "stdin:1" in res.stderr and "/tmp" not in res.stderr
    # world pack output given to tasks convert --images: says what it wants
    packed = tmp_path / "images.jsonl"
    packed.write_text('{"world_id": "w", "archive": "/x/w.oci.tar", "digest": "sha256:0"}\n')
    res = runner.invoke(
        app, ["tasks", "convert", str(tmp_path / "ex"), "-o", "t2", "--images", str(packed)]
    )
    assert res.exit_code == 1 and "`world pack` output" in res.stderr and "image push" in res.stderr


def test_publish_gives_up_on_a_host_name_that_does_not_resolve():
    import httpx

    from apexrl.errors import RemoteError
    from apexrl.publish.hub import with_retries

    waits: list[float] = []
    with pytest.raises(RemoteError, match="cannot resolve") as e:
        with_retries(
            "read me/x",
            lambda: httpx.get("http://apexrl-no-such-host.invalid/", timeout=10),
            sleep=waits.append,
            on_warn=lambda m: None,
        )
    assert len(waits) <= 1 and not e.value.retryable  # not six attempts over minutes
