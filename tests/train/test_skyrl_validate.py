"""SkyRL 0.4.0's own validation (`validate_cfg`, its config classes) on every rendered recipe,
run by `apexrl train --dry-run`. Needs the train extra: `make test-train` runs these in
.venv-train (marker `skyrl`)."""

from __future__ import annotations

import json

import pytest

from apexrl.errors import BadRecordError
from apexrl.train.recipe import RECIPES_DIR, load_recipe
from apexrl.train.render import render, validate_with_skyrl

pytestmark = pytest.mark.skyrl
# recipes for SkyRL's trainer (training.backend = "jax" runs on this CPU: test_jax_rl.py)
SHIPPED = sorted(
    p.stem for p in RECIPES_DIR.glob("*.toml") if load_recipe(p).recipe.training.backend == "skyrl"
)


@pytest.fixture(autouse=True)
def _s3(monkeypatch):
    monkeypatch.setenv("APEXRL_CKPT_S3", "s3://bucket/runs")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_recipe_passes_skyrls_validate_cfg(name):
    loaded = load_recipe(name)
    spec = render(loaded, data_train="/data/train", data_val="/data/eval")
    version, notes = validate_with_skyrl(spec.skyrl, loaded.source, mode=loaded.recipe.mode)
    assert version == "0.4.0"
    if spec.skyrl["trainer.logger"] == "wandb":
        assert any("WANDB_API_KEY" in n for n in notes)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_recipe_dry_run_passes_in_the_cli(runner, name):
    from apexrl.cli.app import app

    # a path on a cluster's nodes: a remote job (--ray-address) takes it with a warning
    args = ["train", name, "--dry-run", "--json", "--val-data", "/data/eval"]
    res = runner.invoke(app, [*args, "--ray-address", "ray://head:10001"])
    assert res.exit_code == 0, res.output
    want = "validate_cfg" if name != "eval" else "validate_generator_cfg"
    assert f"SkyRL 0.4.0 {want} accepts it" in res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["run_name"]


def test_a_bogus_value_fails_with_skyrls_message(runner):
    from apexrl.cli.app import app

    res = runner.invoke(
        app, ["train", "qwen36-35b-a3b", "--dry-run", "--set", 'algorithm.policy_loss="bogus"']
    )
    assert res.exit_code == 1, res.output
    assert "SkyRL's validate_cfg rejects the config" in res.stderr
    assert "invalid policy_loss_type: bogus. Must be one of" in res.stderr
    loaded = load_recipe("smoke-1gpu", ['skyrl.trainer.algorithm.loss_reduction="bogus"'])
    with pytest.raises(BadRecordError, match="invalid loss_reduction: bogus"):
        validate_with_skyrl(render(loaded).skyrl, loaded.source)


def test_skyrl_itself_does_not_catch_the_397b_expert_layout_but_apexrl_does():
    """The reason for apexrl's layout rule: SkyRL 0.4.0 accepts etp = tp = 4 at 64 GPUs."""
    from apexrl.train.render import RecipeRuleError

    loaded = load_recipe("qwen35-397b-a17b")
    o = render(loaded).skyrl
    for role in ("policy", "ref"):
        o.pop(f"trainer.{role}.megatron_config.expert_tensor_parallel_size")
    validate_with_skyrl(o, loaded.source)  # SkyRL: fine
    with pytest.raises(RecipeRuleError, match="etp 4 x ep 16 x pp 4 = 256"):
        render(load_recipe("qwen35-397b-a17b", ["training.expert_tensor_parallel=4"]))


def test_the_eval_recipe_loads_its_eval_data():
    """SkyRL's EvalOnlyEntrypoint asserts an eval dataset; BasePPOExp builds one only when
    trainer.eval_interval > 0 and data.val_data is set."""
    from skyrl.train.config import SkyRLTrainConfig

    spec = render(load_recipe("eval"), data_val="/data/eval")
    cfg = SkyRLTrainConfig.from_cli_overrides(dict(spec.skyrl))
    assert cfg.trainer.eval_interval > 0 and cfg.data.val_data == ["/data/eval"]
    assert cfg.generator.eval_n_samples_per_prompt == 3


def test_recipe_parity_settings_reach_skyrls_config():
    from skyrl.train.config import SkyRLTrainConfig

    spec = render(load_recipe("qwen36-35b-a3b"), data_train="/d/train", data_val="/d/eval")
    cfg = SkyRLTrainConfig.from_cli_overrides(dict(spec.skyrl))
    t, g = cfg.trainer, cfg.generator
    assert list(t.policy.optimizer_config.adam_betas) == [0.9, 0.98]
    assert t.policy.optimizer_config.weight_decay == 0.01
    assert t.policy.optimizer_config.max_grad_norm == 1.0
    assert t.policy.language_model_only and t.ref.language_model_only
    assert g.inference_engine.language_model_only
    assert t.remove_microbatch_padding and t.max_tokens_per_microbatch == 160000
    assert t.fused_lm_head_logprob is True and t.epochs == 3 and t.eval_interval == 20
    mc = t.policy.megatron_config
    assert (mc.tensor_model_parallel_size, mc.expert_model_parallel_size) == (8, 8)
    assert (mc.context_parallel_size, mc.expert_tensor_parallel_size) == (1, 1)
    assert mc.optimizer_config_kwargs["optimizer_cpu_offload"] is True
    assert g.inference_engine.engine_init_kwargs["gdn_prefill_backend"] == "triton"
    assert g.inference_engine.router_init_kwargs["policy"] == "sticky_least_loaded"
    assert g.sampling_params.max_generate_length == 50000
    s397 = SkyRLTrainConfig.from_cli_overrides(dict(render(load_recipe("qwen35-397b-a17b")).skyrl))
    assert s397.trainer.fused_lm_head_logprob is False
    assert s397.generator.sampling_params.max_generate_length == 40000
    assert s397.trainer.ref.megatron_config.expert_tensor_parallel_size == 1
