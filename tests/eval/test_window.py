"""The recipe's eval settings: a context window the engine cannot serve stops the run
before any trial, with the fix."""

from __future__ import annotations

import pytest

from apexrl.agent.settings import Sampling, eval_budgets
from apexrl.cli.app import app
from tests.scripted_engine import ScriptedEngine


def test_eval_defaults_are_the_recipes():
    b = eval_budgets()
    assert (b.max_steps, b.agent_timeout_s, b.llm_timeout_s, b.nudge) == (250, 3500, 2000, "off")
    s = Sampling()
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (1.0, 1.0, -1, 0.0)


def test_a_window_the_engine_cannot_serve_stops_the_run(runner, example_dirs, tmp_path):
    expert, tasks = example_dirs
    run_dir = tmp_path / "run"
    with ScriptedEngine([], max_model_len=32768) as eng:
        args = ["eval", "run", "scripted", "--endpoint", eng.url, "--tasks", str(tasks)]
        args += ["--worlds", str(expert / "world_files_zipped"), "-o", str(run_dir)]
        args += ["--limit", "1", "--tokenizer", "qwen3", "--no-judge"]
        res = runner.invoke(app, [*args, "--context-window", "262144"])
        assert eng.requests == []  # no trial reached the engine
    assert res.exit_code == 2, res.output
    assert "more than the engine" in res.output and "--max-model-len 262144" in res.output
    assert not (run_dir / "results.jsonl").exists()


def test_the_hint_names_each_engines_way_to_a_wider_window(monkeypatch):
    """The engine-specific part of the hint comes from the engine registry (EngineEntry
    .window_hint): vLLM's flag as before, and one more engine's once it is registered."""
    from apexrl.engine.registry import ENGINES, EngineEntry
    from apexrl.errors import UsageError
    from apexrl.eval.runner import check_window

    with ScriptedEngine([], max_model_len=4096) as eng:
        with pytest.raises(UsageError) as e:
            check_window(eng.url, None, 8192)
        assert e.value.hint == (
            "serve the model with --max-model-len 8192 (vLLM), or pass --context-window 4096"
        )
        other = EngineEntry("other", "x", launch="m:f", window_hint="--ctx {n} (Other)")
        monkeypatch.setitem(ENGINES, "other", other)
        with pytest.raises(UsageError) as e:
            check_window(eng.url, None, 8192)
        assert "--max-model-len 8192 (vLLM) or --ctx 8192 (Other), or pass" in e.value.hint
        check_window(eng.url, None, 4096)  # a window it serves: no error
