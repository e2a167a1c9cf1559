"""Preflight: an eval whose environment, worlds, engine or credentials would fail every
trial stops before the first one, with one message and exit code 2 or 3."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from apexrl.cli.app import app
from apexrl.errors import ExitCode
from apexrl.eval.preflight import (
    PreflightError,
    PreflightRequest,
    TaskNeeds,
    check_engine,
    run_preflight,
)


def path_without(tool: str, tmp_path: Path) -> str:
    """A PATH holding every command of the current PATH except TOOL (links in one dir)."""
    shadow = tmp_path / f"bin-without-{tool}"
    shadow.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            link = shadow / name
            if name != tool and not link.exists():
                link.symlink_to(Path(d) / name)
    assert shutil.which(tool, path=str(shadow)) is None
    return str(shadow)


def _trials_started(run_dir: Path) -> list[Path]:
    logs = run_dir / "logs"
    return list(logs.iterdir()) if logs.is_dir() else []


def test_missing_bwrap_stops_the_eval_before_any_trial(runner, example_dirs, tmp_path):
    expert, tasks = example_dirs
    run_dir = tmp_path / "run"
    r = runner.invoke(
        app,
        ["eval", "run", "--agent", "oracle", "--tasks", str(tasks)]
        + ["--worlds", str(expert / "world_files_zipped"), "-o", str(run_dir)],
        env={"PATH": path_without("bwrap", tmp_path)},
    )
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "preflight failed" in r.output and "no trial was started" in r.output
    assert "bubblewrap (bwrap)" in r.output and "apt-get install bubblewrap" in r.output
    assert "Traceback" not in r.output
    assert _trials_started(run_dir) == []
    assert not (run_dir / "results.parquet").exists()


def test_missing_worlds_are_named_with_their_tasks(runner, example_dirs, tmp_path):
    _, tasks = example_dirs
    empty = tmp_path / "worlds"
    empty.mkdir()
    r = runner.invoke(
        app,
        ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "--worlds", str(empty)]
        + ["-o", str(tmp_path / "run")],
    )
    assert r.exit_code == ExitCode.USAGE, r.output
    m = re.search(r"(\d+) world\(s\) needed by (\d+) task\(s\)", r.output)
    assert m and m.group(1) == "3" and m.group(2) == "14", r.output
    assert "world_" in r.output  # the world ids themselves are named
    assert _trials_started(tmp_path / "run") == []


def test_no_world_store_for_the_local_environment_is_a_usage_error(runner, example_dirs, tmp_path):
    _, tasks = example_dirs
    r = runner.invoke(
        app, ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(tmp_path / "r")]
    )
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "--worlds was not given" in r.output


def test_missing_task_credentials_exit_3_naming_the_keys(runner, example_dirs, tmp_path):
    expert, tasks = example_dirs
    mine = tmp_path / "tasks"
    shutil.copytree(tasks, mine)
    one = sorted(mine.iterdir())[0]
    toml = (one / "task.toml").read_text()
    toml = re.sub(r"(?m)^required_env_keys = .*$", 'required_env_keys = ["APEXRL_PF_KEY"]', toml)
    (one / "task.toml").write_text(toml)
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(mine)]
    args += ["--worlds", str(expert / "world_files_zipped"), "-o", str(tmp_path / "run")]
    env = {k: v for k, v in os.environ.items() if k != "APEXRL_PF_KEY"}
    r = runner.invoke(app, args, env={**env, "APEXRL_PF_KEY": ""})
    assert r.exit_code == ExitCode.AUTH, r.output
    assert "APEXRL_PF_KEY (1 task(s))" in r.output
    assert _trials_started(tmp_path / "run") == []


def test_problems_are_gathered_and_usage_wins_over_credentials(tmp_path):
    req = PreflightRequest(
        environment="local",
        tasks=[TaskNeeds("t1", "w_missing", ("SOME_KEY",))],
        worlds_dir=tmp_path,
        env={"PATH": str(tmp_path)},  # no bwrap on this PATH
    )
    with pytest.raises(PreflightError) as e:
        run_preflight(req)
    whats = [p.what for p in e.value.problems]
    assert len(whats) == 3, whats  # bwrap, world, key
    assert e.value.code == ExitCode.USAGE


def test_container_and_modal_environments_are_checked(tmp_path):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    for kind in ("podman", "docker"):
        with pytest.raises(PreflightError, match=f"needs the `{kind}` command"):
            run_preflight(PreflightRequest(environment=kind, tasks=[], env=env))
    with pytest.raises(PreflightError, match="Modal credentials") as e:
        run_preflight(
            PreflightRequest(
                environment="modal", tasks=[], env={**env, "MODAL_CONFIG_PATH": str(tmp_path / "x")}
            )
        )
    assert all("modal" in p.what.lower() for p in e.value.problems)


def test_local_engine_check_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    (p,) = check_engine("local")
    assert "torch" in p.what and "apexrl[local]" in p.fix
    assert check_engine(None) == [] and check_engine("vllm") == []


def test_a_working_local_setup_passes(example_dirs):
    expert, _ = example_dirs
    run_preflight(
        PreflightRequest(
            environment="local",
            tasks=[TaskNeeds("t", "none")][:0],
            worlds_dir=expert / "world_files_zipped",
        )
    )


def test_train_dry_run_checks_the_local_sandbox(runner, tmp_path):
    """`train --dry-run` of a recipe whose trials run in the local sandbox on this
    machine (no --ray-address) stops at the same preflight when bwrap is missing."""
    args = ["train", "smoke-1gpu", "--dry-run"]
    r = runner.invoke(app, args, env={"PATH": path_without("bwrap", tmp_path)})
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "preflight failed" in r.output and "bubblewrap (bwrap)" in r.output
    ok = runner.invoke(app, args)
    assert "preflight failed" not in ok.output, ok.output
    remote = runner.invoke(
        app, [*args, "--ray-address", "http://127.0.0.1:9"], env={"PATH": str(tmp_path)}
    )
    assert "preflight failed" not in remote.output  # the workers' machines matter then
