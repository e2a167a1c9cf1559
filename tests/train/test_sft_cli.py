"""`apexrl train sft`: what it learns from and what it refuses, before any training.

The runs are real `apexrl eval run` folders (tests/train/sft_runs.py: a scripted teacher
through the apexrl agent, local sandbox and grader; the oracle for a run without token
streams). Training itself (SkyRL's JAX backend) is tests/train/test_sft_jax.py (marker
skyrl)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from tests.train.sft_runs import eval_run

RECIPE = """
name = "sft-test"
[model]
path = "{model}"
[training]
backend = "jax"
[jax]
lora_rank = 4
train_attn = false
train_mlp = false
train_unembed = true
micro_batch = 4
[sft]
lr = 0.05
max_steps = 3
batch_size = 2
[checkpoint]
path = "{root}/ckpts"
interval = 1
keep = 2
"""


def write_recipe(tmp: Path, root: Path, model: Path, text: str = RECIPE) -> Path:
    p = tmp / f"{root.name}.toml"
    p.write_text(text.format(root=root, model=model))
    return p


pytestmark = pytest.mark.timeout(1200)  # two eval runs and a model, on a busy machine


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One teacher run (q and z right, x and k wrong), one oracle run (no token stream) and
    the letters model (the synthetic:letters source, written once)."""
    from apexrl.train.jaxrl.grpo import prepare_model

    tmp = tmp_path_factory.mktemp("sft-runs")
    teacher = eval_run(tmp, tmp / "teacher", {"q": "quiz", "z": "zero", "x": "tree"})
    oracle = eval_run(tmp, tmp / "oracle", {}, agent="oracle", limit=1)
    model = prepare_model("synthetic:letters", tmp, seed=0)
    return {"teacher": teacher, "oracle": oracle, "tmp": tmp, "model": model}


def sft(recipe: Path, *args: str):
    return CliRunner().invoke(app, ["train", "sft", "--recipe", str(recipe), *args])


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, runs):
    recipe = write_recipe(tmp_path, tmp_path / "run", runs["model"])
    res = sft(recipe, "--from", str(runs["teacher"]), "--dry-run", "--json")
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["backend"] == "jax" and plan["keep"] == "passed" and plan["max_steps"] == 3
    assert plan["from"] == [str(runs["teacher"].resolve())]
    assert not (tmp_path / "run").exists()


def test_the_teacher_runs_passed_trials_are_kept_with_their_token_streams(runs, tmp_path):
    from apexrl.train.sft_data import read_runs

    model = runs["model"]
    (src,), examples = read_runs([str(runs["teacher"])], model=model)
    assert sorted(t.split("-")[1] for t in src.trials) == ["q", "z"]  # rejection sampling
    assert src.skipped == {"not passed": 2} and src.n_trials == 4
    from apexrl.tito.tokenizer import load_tokenizer

    tok = load_tokenizer("qwen3")
    for ex in examples:
        # the prompt is not trained; the reply the teacher sampled is, stop token included
        assert len(ex.response_ids) == len(ex.loss_mask) and all(ex.loss_mask)
        assert tok.decode(ex.response_ids) in ("quiz<|im_end|>", "zero<|im_end|>")
        assert "contains the letter" in tok.decode(ex.prompt_ids)
    # --min-reward 0 keeps every completed trial, failed ones included
    (src0,), ex0 = read_runs([str(runs["teacher"])], model=model, min_reward=0.0)
    assert len(src0.trials) == 4 and src0.skipped == {}


def test_a_run_without_kept_trials_is_refused(tmp_path, runs):
    recipe = write_recipe(tmp_path, tmp_path / "run", runs["model"])
    res = sft(recipe, "--from", str(runs["teacher"]), "--min-reward", "2")
    assert res.exit_code == 1, res.output
    assert "no trial with reward >= 2.0" in res.output and str(runs["teacher"]) in res.output
    assert "--min-reward" in res.output  # the fix
    assert not (tmp_path / "run").exists()


def test_trials_without_token_streams_are_refused_by_name(tmp_path, runs):
    recipe = write_recipe(tmp_path, tmp_path / "run", runs["model"])
    res = sft(recipe, "--from", str(runs["oracle"]))
    assert res.exit_code == 1, res.output
    rows = [json.loads(x) for x in (runs["oracle"] / "results.jsonl").read_text().splitlines()]
    assert rows and rows[0]["reward"] == 1.0  # the oracle passed: kept, but has no tokens
    assert rows[0]["trial_id"] in res.output and "no token stream" in res.output
    assert "apexrl agent" in res.output  # the fix
    assert not (tmp_path / "run").exists()


def test_a_run_sampled_with_another_tokenizer_is_refused(tmp_path, runs):
    from apexrl.tito.tokenizer import bundled_qwen3_dir

    other = tmp_path / "other-tok"
    shutil.copytree(bundled_qwen3_dir(), other)
    tj = json.loads((other / "tokenizer.json").read_text())
    vocab = tj["model"]["vocab"]
    a, b = "quiz", "zero"  # two tokens swap ids: the same ids mean other tokens
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (other / "tokenizer.json").write_text(json.dumps(tj))
    run = tmp_path / "copy"
    shutil.copytree(runs["teacher"], run)
    cfg = json.loads((run / "run.json").read_text())
    cfg["tokenizer"] = str(other)
    (run / "run.json").write_text(json.dumps(cfg))
    recipe = write_recipe(tmp_path, tmp_path / "run", runs["model"])
    res = sft(recipe, "--from", str(run))
    assert res.exit_code == 1, res.output
    assert "not the tokenizer of the model to train" in res.output and str(other) in res.output


def test_usage_errors(tmp_path, runs):
    recipe = write_recipe(tmp_path, tmp_path / "run", runs["model"])
    res = sft(recipe, "--from", str(tmp_path))  # not an eval run folder
    assert res.exit_code == 2 and "no run.json" in res.output
    res = sft(recipe, "--from", str(tmp_path / "missing"))
    assert res.exit_code == 2 and "no such folder" in res.output
    bare = write_recipe(tmp_path, tmp_path / "bare", runs["model"], RECIPE.split("[sft]")[0])
    res = sft(bare, "--from", str(runs["teacher"]))
    assert res.exit_code == 2 and "no [sft] table" in res.output
    res = sft(recipe, "--from", str(runs["teacher"]), "--set", "sft.batch_size=0")
    assert res.exit_code == 2, res.output


def test_runs_on_evaluation_only_tasks_need_a_statement_of_rights(tmp_path, runs):
    """A warm start trains on the tasks its runs ran on: their terms count as `train`'s."""
    run = tmp_path / "copy"
    shutil.copytree(runs["teacher"], run)
    cfg = json.loads((run / "run.json").read_text())
    cfg["dataset"]["source"] = "hf://mercor/apex-agents"  # a source known to be eval-only
    (run / "run.json").write_text(json.dumps(cfg))
    recipe = write_recipe(tmp_path, tmp_path / "run", runs["model"])
    res = sft(recipe, "--from", str(run))
    assert res.exit_code == 2, res.output
    assert "evaluation-only" in res.output and "--training-rights" in res.output
    assert not (tmp_path / "run").exists()
