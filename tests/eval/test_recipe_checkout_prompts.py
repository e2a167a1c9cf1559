"""`--prompts recipe:PATH` and `agent.prompts`: the system prompt and the eval or
training extra prompt, read from a checkout laid out as the public recipe is, without
running any of it. The checkout here is a stand-in made by the test, with our own text."""

from __future__ import annotations

import hashlib
import subprocess

import orjson
import pytest

from apexrl.agent.recipe_prompts import python_string, recipe_prompts, shell_string
from apexrl.cli.app import app
from apexrl.errors import UsageError
from tests.eval.conftest import eval_runner, passing_trial

SYSTEM = "Stand-in system prompt.\n\nUse the tools; answer in text when done.\n"
EVAL_NOTE = "Stand-in eval note: it's text only; use `excel_read_tab`."
TRAIN_NOTE = "Stand-in training note:\nrun code with code_execution_code_exec."


def make_checkout(root):
    agents = root / "apex_agents_skyrl_recipe" / "agents"
    agents.mkdir(parents=True)
    (agents / "archipelago.py").write_text(
        '"""Stand-in module."""\n\n'
        "import a_module_that_does_not_exist  # importing this file would fail\n\n"
        'raise SystemExit("this file must be parsed, never run")\n\n'
        'DEFAULT_SYSTEM_PROMPT = """\\\n'
        "Stand-in system prompt.\n\nUse the tools; answer in text when done.\n"
        '"""\n\n'
        "OTHER = 1\n"
    )
    scripts = root / "scripts"
    scripts.mkdir()
    (scripts / "run_eval.sh").write_text(
        "set -ex\nexit 3  # running this script would stop here\n"
        "export DEFAULT_EXTRA_PROMPT='Stand-in eval note: it'\\''s text only; "
        "use `excel_read_tab`.'\n"
        'export EXTRA_PROMPT="${EXTRA_PROMPT:-$DEFAULT_EXTRA_PROMPT}"\n'
    )
    (scripts / "run_qwen36_35b_fully_async.sh").write_text(
        "# training\nexport DEFAULT_EXTRA_PROMPT='Stand-in training note:\n"
        "run code with code_execution_code_exec.'\n"
    )
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "stand-in"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return head.stdout.strip()


def test_prompts_are_read_from_the_checkout_without_running_it(tmp_path):
    commit = make_checkout(tmp_path / "recipe")
    system, extra = recipe_prompts(tmp_path / "recipe", "eval")
    assert system.text == SYSTEM and extra.text == EVAL_NOTE
    assert system.commit == extra.commit == commit
    assert system.sha256 == hashlib.sha256(SYSTEM.encode()).hexdigest()
    assert system.path.endswith("agents/archipelago.py#DEFAULT_SYSTEM_PROMPT")
    _, train = recipe_prompts(tmp_path / "recipe", "train")
    assert train.text == TRAIN_NOTE


def test_a_moved_or_odd_layout_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no .*archipelago.py"):
        recipe_prompts(tmp_path, "eval")
    f = tmp_path / "x.py"
    f.write_text("DEFAULT_SYSTEM_PROMPT = make_prompt()\n")
    with pytest.raises(UsageError, match="not a plain string"):
        python_string(f, "DEFAULT_SYSTEM_PROMPT")
    sh = tmp_path / "x.sh"
    sh.write_text('export DEFAULT_EXTRA_PROMPT="$OTHER"\n')
    with pytest.raises(UsageError, match="not a literal"):
        shell_string(sh, "DEFAULT_EXTRA_PROMPT")
    sh.write_text("export DEFAULT_EXTRA_PROMPT='never closed\n")
    with pytest.raises(UsageError, match="quoting"):
        shell_string(sh, "DEFAULT_EXTRA_PROMPT")


def test_eval_run_with_recipe_prompts(task_dirs, tmp_path):
    commit = make_checkout(tmp_path / "recipe")
    seen = []

    def trial(task_dir, config):
        seen.append((config.system_prompt, config.extra_prompt))
        return passing_trial(task_dir, config)

    runner = eval_runner(trial)
    run_dir = tmp_path / "run"
    base = ["eval", "run", "--agent", "oracle", "-t", str(task_dirs), "-o", str(run_dir)]
    args = [*base, "--limit", "2", "--prompts", f"recipe:{tmp_path / 'recipe'}"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert seen == [(SYSTEM, EVAL_NOTE)] * 2
    run = orjson.loads((run_dir / "run.json").read_bytes())
    for key, text in (("system_prompt", SYSTEM), ("extra_prompt", EVAL_NOTE)):
        rec = run[key]
        assert rec["commit"] == commit and rec["path"].startswith("recipe:")
        assert rec["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    res = runner.invoke(app, [*args, "--extra-prompt", str(tmp_path / "x.md")])
    assert res.exit_code == 2


def test_recipe_agent_prompts(tmp_path):
    from apexrl.train.recipe import load_recipe
    from apexrl.train.render import render

    make_checkout(tmp_path / "recipe")
    loaded = load_recipe("smoke-1gpu", [f"agent.prompts=recipe:{tmp_path / 'recipe'}"])
    g = render(loaded, data_train=str(tmp_path / "train"), executor="inline").generator
    assert g.system_prompt == SYSTEM and g.extra_prompt == TRAIN_NOTE
    assert g.extra_prompt_sha256 == hashlib.sha256(TRAIN_NOTE.encode()).hexdigest()
