"""`eval run --system-prompt FILE --extra-prompt FILE`: the texts reach every trial and
run.json records them with their sha256; a changed prompt is a different run."""

from __future__ import annotations

import hashlib

import orjson

from apexrl.cli.app import app
from tests.eval.conftest import eval_runner, passing_trial


def test_prompts_reach_trials_and_run_json(runner, task_dirs, tmp_path, monkeypatch):

    seen = []

    def trial(task_dir, config):
        seen.append((config.system_prompt, config.extra_prompt))
        return passing_trial(task_dir, config)

    runner = eval_runner(trial)
    sysf, extraf = tmp_path / "system.md", tmp_path / "extra.md"
    sysf.write_text("You are a careful analyst.\n")
    extraf.write_text("Note: you are a text-only agent; use `excel_read_tab`.\n")
    run_dir = tmp_path / "run"
    base = ["eval", "run", "--agent", "oracle", "-t", str(task_dirs), "-o", str(run_dir)]
    args = [*base, "--limit", "2", "--system-prompt", str(sysf), "--extra-prompt", str(extraf)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert seen == [(sysf.read_text(), extraf.read_text())] * 2
    run = orjson.loads((run_dir / "run.json").read_bytes())
    for key, f in (("system_prompt", sysf), ("extra_prompt", extraf)):
        assert run[key]["sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
        assert run[key]["text"] == f.read_text() and run[key]["path"] == str(f.resolve())
    # the same prompts resume; a changed one is another configuration
    assert runner.invoke(app, args).exit_code == 0
    extraf.write_text("Another note.\n")
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "different configuration" in res.stderr
    # bad files: usage errors naming the option
    for bad, msg in ((tmp_path / "nope.md", "no such file"), (tmp_path / "empty.md", "empty")):
        if bad.name == "empty.md":
            bad.write_text("  \n")
        res = runner.invoke(app, [*base, "--extra-prompt", str(bad), "--force"])
        assert res.exit_code == 2 and "--extra-prompt" in res.stderr and msg in res.stderr


def test_run_json_without_prompts_keeps_its_identity(runner, task_dirs, tmp_path, monkeypatch):
    from apexrl.eval.models import EvalRunConfig

    runner = eval_runner(passing_trial)
    run_dir = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "eval",
            "run",
            "--agent",
            "oracle",
            "-t",
            str(task_dirs),
            "-o",
            str(run_dir),
            "--limit",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    cfg = EvalRunConfig.model_validate_json((run_dir / "run.json").read_bytes())
    assert cfg.system_prompt is None and cfg.extra_prompt is None
    assert not any("prompt" in k for k in cfg.identity())
