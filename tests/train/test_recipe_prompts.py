"""Recipe fields agent.system_prompt / agent.extra_prompt: read once at render, passed to
every trial as text with their sha256."""

from __future__ import annotations

import hashlib

import pytest

from apexrl.errors import UsageError
from apexrl.train.recipe import load_recipe
from apexrl.train.render import render


def test_recipe_prompt_files_reach_the_generator(tmp_path):
    extra = tmp_path / "extra.md"
    extra.write_text("Call `code_execution_code_exec` with the `code` argument.\n")
    loaded = load_recipe("smoke-1gpu", [f"agent.extra_prompt={extra}"])
    spec = render(loaded, data_train=str(tmp_path / "train"), executor="inline")
    g = spec.generator
    assert g.extra_prompt == extra.read_text() and g.system_prompt is None
    assert g.extra_prompt_sha256 == hashlib.sha256(extra.read_bytes()).hexdigest()
    from apexrl.train.generator import TrialGenerator
    from apexrl.trial.executors import InlineExecutor

    gen = TrialGenerator(g, executor=InlineExecutor())
    try:
        tc = gen.trial_config(phase="train", logs_dir=tmp_path / "t", endpoint="http://x")
    finally:
        gen.close()
    assert tc.extra_prompt == extra.read_text() and tc.system_prompt is None
    missing = load_recipe("smoke-1gpu", [f"agent.system_prompt={tmp_path / 'nope.md'}"])
    with pytest.raises(UsageError, match="agent.system_prompt"):
        render(missing, data_train=str(tmp_path / "train"), executor="inline")
