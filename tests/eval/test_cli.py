"""`apexrl eval run` / `apexrl eval report` through the CLI (scripted trials)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from apexrl.cli.app import app
from tests.eval.conftest import eval_runner, passing_trial, scripted_trial


@pytest.fixture
def scripted():
    return {"fn": scripted_trial}


@pytest.fixture
def runner(scripted):
    return eval_runner(lambda task_dir, config: scripted["fn"](task_dir, config))


def run_args(tasks: Path, run_dir: Path, *extra: str) -> list[str]:
    return ["eval", "run", "--agent", "oracle", "--tasks", str(tasks), "-o", str(run_dir), *extra]


def test_bad_model_and_dataset(runner, task_dirs, tmp_path, scripted):
    res = runner.invoke(app, ["eval", "run", "./no/such/ckpt", "-t", str(task_dirs), "-o", "r"])
    assert res.exit_code == 2 and "no such checkpoint directory" in res.stderr
    notckpt = tmp_path / "notckpt"
    notckpt.mkdir()
    res = runner.invoke(app, ["eval", "run", str(notckpt), "-t", str(task_dirs), "-o", "r"])
    assert res.exit_code == 2 and "no config.json" in res.stderr
    res = runner.invoke(app, ["eval", "run", "-t", str(task_dirs), "-o", str(tmp_path / "r")])
    assert res.exit_code == 2 and "MODEL is required" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, run_args(empty, tmp_path / "r"))
    assert res.exit_code == 1 and "has no tasks" in res.stderr
    res = runner.invoke(app, run_args(task_dirs, tmp_path / "r", "-k", "0"))
    assert res.exit_code == 2 and "--attempts" in res.stderr
    res = runner.invoke(
        app,
        ["eval", "run", "m", "-t", str(task_dirs), "-o", "r", "--endpoint", "http://127.0.0.1:9"],
    )
    assert res.exit_code == 4 and "unreachable" in res.stderr
    assert "Traceback" not in res.output


def test_run_resume_refuse_force(runner, task_dirs, tmp_path, scripted):
    run_dir = tmp_path / "run"
    scripted["fn"] = passing_trial
    res = runner.invoke(app, run_args(task_dirs, run_dir, "--limit", "4", "-n", "2"))
    assert res.exit_code == 0, res.output
    s = orjson.loads(res.stdout)
    assert s["n_trials"] == 4 and s["pass_at_1"]["value"] == 1.0
    res = runner.invoke(app, run_args(task_dirs, run_dir, "--limit", "4", "--temperature", "0.5"))
    assert res.exit_code == 2
    assert "different configuration (sampling.temperature: 1.0 -> 0.5)" in res.stderr
    assert "--force" in res.stderr
    res = runner.invoke(
        app, run_args(task_dirs, run_dir, "--limit", "4", "--temperature", "0.5", "--force")
    )
    assert res.exit_code == 0 and "4 trial(s) run, 0 already done" in res.stderr
    run_json = orjson.loads((run_dir / "run.json").read_bytes())
    assert run_json["sampling"]["temperature"] == 0.5
    for key in ("model", "engine", "chat_template_hash", "judge", "budgets", "apexrl_version"):
        assert key in run_json
    assert run_json["dataset"]["digest"].startswith("sha256:")


def test_oracle_below_100_percent_fails_the_check(runner, task_dirs, tmp_path, scripted):
    def no_infra(task_dir, config):  # the scripted outcomes without its engine errors
        out = scripted_trial(task_dir, config)
        if out.result.status == "error":
            out.result.status, out.result.error_class = "complete", None
        return out

    scripted["fn"] = no_infra
    res = runner.invoke(app, run_args(task_dirs, tmp_path / "run", "-k", "2"))
    assert res.exit_code == 1 and "the oracle passed" in res.stderr
    assert (tmp_path / "run" / "results.parquet").is_file()  # results are still written


def test_infrastructure_errors_exit_4_and_name_the_ungraded_trials(
    runner, task_dirs, tmp_path, scripted
):
    """The scripted outcomes include engine errors (llm_transient): never a score, never
    exit 0, whatever the rest; the summary names them and the code."""
    res = runner.invoke(app, run_args(task_dirs, tmp_path / "run", "-k", "2"))
    assert res.exit_code == 4, res.output
    s = orjson.loads((tmp_path / "run" / "summary.json").read_bytes())
    assert s["exit_code"] == 4 and s["trials_ungraded"] == len(s["ungraded_trials"]) > 0
    assert s["n_trials"] + s["trials_ungraded"] == 28 and not s["complete"]
    assert "infrastructure error (llm_transient" in res.stderr
    assert all(t in res.stderr for t in s["ungraded_trials"])
    md = runner.invoke(app, ["eval", "report", str(tmp_path / "run"), "-f", "md"]).stdout
    assert "| ungraded (infrastructure) |" in md and "--retry-errors" in md


@pytest.fixture
def two_runs(runner, task_dirs, tmp_path, scripted) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    assert runner.invoke(app, run_args(task_dirs, a, "-k", "3")).exit_code == 4
    scripted["fn"] = passing_trial
    assert runner.invoke(app, run_args(task_dirs, b, "-k", "3")).exit_code == 0
    return a, b


def test_report_formats(runner, two_runs):
    a, b = two_runs
    res = runner.invoke(app, ["eval", "report", str(a), "--format", "json"])
    assert res.exit_code == 5  # run a has ungraded trials: the report is partial
    data = orjson.loads(res.stdout)
    assert data["summary"] == orjson.loads((a / "summary.json").read_bytes())
    assert data["config"]["attempts"] == 3
    res = runner.invoke(app, ["eval", "report", str(a)])  # piped: JSON by default
    assert orjson.loads(res.stdout) == data
    md = runner.invoke(app, ["eval", "report", str(a), "-f", "md"]).stdout
    assert md.startswith("# Eval: a (oracle)") and "| Pass^3 |" in md and "## Per domain" in md
    table = runner.invoke(app, ["eval", "report", str(a), "-f", "table"]).stdout
    assert "Pass@1" in table and "management-consulting" in table
    cmp = runner.invoke(app, ["eval", "report", str(a), str(b), "-f", "json"])
    c = orjson.loads(cmp.stdout)["comparison"]
    d = c["overall"]["metrics"]["pass_at_1"]
    assert c["overall"]["paired"] and c["overall"]["n_shared_tasks"] == 14
    assert d["b"] == 1.0 and d["delta"] == pytest.approx(1.0 - d["a"])
    assert d["ci_low"] <= d["delta"] <= d["ci_high"]
    md = runner.invoke(app, ["eval", "report", str(a), str(b), "-f", "md"]).stdout
    assert "delta (B - A)" in md and "paired over 14 shared tasks" in md
    bad = runner.invoke(app, ["eval", "report", str(a / "nope")])
    assert bad.exit_code == 2


def test_html_report_is_self_contained_and_renders_in_chromium(runner, two_runs, tmp_path):
    a, b = two_runs
    cmp = tmp_path / "cmp.html"
    res = runner.invoke(app, ["eval", "report", str(a), str(b), "-f", "html", "-o", str(cmp)])
    assert res.exit_code == 5 and cmp.is_file()  # written, though run a is partial
    res = runner.invoke(app, ["eval", "report", str(a), "-f", "html", "--allow-incomplete"])
    assert res.exit_code == 0
    assert orjson.loads(res.stdout)["path"] == str((a / "report.html").absolute())
    page = (a / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert "http://" not in page and "https://" not in page  # nothing to fetch
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            "/usr/bin/chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--window-size=1000,1800",
            f"--screenshot={shot}",
            (a / "report.html").resolve().as_uri(),
        ],
        capture_output=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import matplotlib.image as mpimg

    img = mpimg.imread(shot)
    assert img.shape[0] >= 1000 and img.shape[1] >= 800
    # not a blank page: the plots put plenty of non-white pixels on it
    assert (img[..., :3].mean(axis=2) < 0.9).mean() > 0.02


def test_runtime_archipelago_needs_the_local_environment(runner, tmp_path):
    from apexrl.cli.app import app

    res = runner.invoke(
        app,
        ["eval", "run", "--agent", "oracle", "--tasks", str(tmp_path), "-o", str(tmp_path / "r")]
        + ["--env", "modal", "--runtime", "archipelago"],
    )
    assert res.exit_code == 2 and "local sandbox" in res.output, res.output
    assert not (tmp_path / "r").exists()
