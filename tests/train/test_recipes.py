"""Recipes: every shipped one renders and validates; inheritance, --set, bad keys, rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apexrl.errors import ApexError, BadRecordError, UsageError
from apexrl.train.recipe import RECIPES_DIR, load_recipe
from apexrl.train.render import RecipeRuleError, render, runtime_env

SHIPPED = sorted(p.stem for p in RECIPES_DIR.glob("*.toml"))


def test_shipped_recipes_are_the_six():
    assert SHIPPED == [
        "acting-cpu",
        "eval",
        "qwen35-397b-a17b",
        "qwen36-35b-a3b",
        "smoke-1gpu",
        "smoke-cpu",
    ]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_recipe_renders_and_validates(name):
    spec = render(load_recipe(name), data_train="train.parquet")
    assert spec.skyrl["trainer.policy.model.path"]
    assert spec.generator.concurrency >= 1
    assert spec.skyrl["generator.batched"] is False


def test_hero_recipes_carry_the_blog_settings():
    s35 = render(load_recipe("qwen36-35b-a3b")).skyrl
    expect = {
        "trainer.strategy": "megatron",
        "trainer.algorithm.advantage_estimator": "grpo",
        "trainer.algorithm.policy_loss_type": "dppo",
        "trainer.algorithm.dppo.dppo_type": "binary_tv",
        "trainer.algorithm.dppo.delta_low": 0.15,
        "trainer.algorithm.dppo.delta_high": 0.15,
        "trainer.algorithm.loss_reduction": "prompt_mean",
        "trainer.algorithm.grpo_norm_by_std": False,
        "trainer.algorithm.use_kl_loss": False,
        "trainer.algorithm.eps_clip_low": 0.5,
        "trainer.algorithm.eps_clip_high": 4.0,
        "trainer.algorithm.zero_variance_filter": True,
        "trainer.policy.optimizer_config.lr": 1e-6,
        "trainer.train_batch_size": 16,
        "trainer.policy_mini_batch_size": 16,
        "generator.n_samples_per_prompt": 16,
        "generator.inference_engine.engine_init_kwargs.max_model_len": 262144,
        "trainer.fully_async.enabled": True,
        "trainer.fully_async.max_staleness_steps": 3,
        "trainer.fully_async.num_parallel_generation_workers": 64,
        "trainer.placement.colocate_all": False,
        "generator.inference_engine.num_engines": 10,
        "generator.inference_engine.tensor_parallel_size": 8,
        "trainer.ckpt_interval": 5,
        "trainer.max_ckpts_to_keep": 5,
    }
    assert {k: s35[k] for k in expect} == expect
    spec = render(load_recipe("qwen35-397b-a17b"))
    s = spec.skyrl
    assert s["generator.inference_engine.num_engines"] == 12
    assert s["generator.inference_engine.gpu_memory_utilization"] == 0.93
    m = "trainer.policy.megatron_config."
    assert (
        s[m + "tensor_model_parallel_size"],
        s[m + "expert_model_parallel_size"],
        s[m + "context_parallel_size"],
        s[m + "pipeline_model_parallel_size"],
    ) == (4, 16, 2, 4)
    assert spec.plan.total_gpus == 160 and spec.plan.concurrency == 300
    assert render(load_recipe("qwen36-35b-a3b")).plan.concurrency == 550


def test_inheritance_merges_tables_and_records_the_chain():
    loaded = load_recipe("qwen35-397b-a17b")
    assert [Path(c).stem for c in loaded.chain] == [
        "recipe-parity",
        "qwen36-35b-a3b",
        "qwen35-397b-a17b",
    ]
    r = loaded.recipe
    assert r.model.path == "Qwen/Qwen3.5-397B-A17B"
    assert r.algorithm.dppo_delta_low == 0.15  # inherited
    assert r.training.tensor_parallel == 4  # overridden within a merged table
    assert r.training.strategy == "megatron"  # sibling key kept


def test_set_overrides_any_field_and_changes_the_hash():
    base = load_recipe("smoke-1gpu")
    loaded = load_recipe(
        "smoke-1gpu",
        [
            "batch.n_samples=4",
            "training.lr=3e-6",
            'model.path="my/model"',
            "agent.max_turns=12",
            "skyrl.trainer.seed=7",
            'env.forward=["EXTRA_TOKEN"]',
        ],
    )
    r = loaded.recipe
    assert (r.batch.n_samples, r.training.lr, r.model.path, r.agent.max_turns) == (
        4,
        3e-6,
        "my/model",
        12,
    )
    assert loaded.sha256 != base.sha256
    spec = render(loaded)
    assert spec.skyrl["trainer.seed"] == 7 and spec.skyrl["generator.n_samples_per_prompt"] == 4
    assert "EXTRA_TOKEN" in spec.env_forward


def test_unknown_keys_name_the_closest_valid_one(tmp_path):
    with pytest.raises(BadRecordError) as e:
        load_recipe("smoke-1gpu", ["batch.n_sample=4"])
    assert "batch.n_sample" in str(e.value) and "batch.n_samples" in str(e.value)
    with pytest.raises(BadRecordError) as e:
        load_recipe("smoke-1gpu", ["skyrl.trainer.algorithm.eps_clip_lo=0.3"])
    assert "skyrl.trainer.algorithm.eps_clip_low" in str(e.value)
    f = tmp_path / "r.toml"
    f.write_text('name = "x"\nextends = "smoke-1gpu"\n[inference]\ntensor_paralel = 2\n')
    with pytest.raises(BadRecordError) as e:
        load_recipe(f)
    assert str(f) in str(e.value) and "inference.tensor_parallel" in str(e.value)


def test_bad_values_and_bad_set_syntax(tmp_path):
    with pytest.raises(BadRecordError, match="SkyRL expects"):
        load_recipe("smoke-1gpu", ['skyrl.trainer.seed="seven"'])
    with pytest.raises(UsageError, match="--set batch.n_samples"):  # the --set, not the recipe
        load_recipe("smoke-1gpu", ['batch.n_samples="many"'])
    with pytest.raises(UsageError):
        load_recipe("smoke-1gpu", ["batch.n_samples"])
    with pytest.raises(UsageError, match="not found"):
        load_recipe("no-such-recipe")
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('name = "a"\nextends = "b"\n[model]\npath = "m"\n')
    b.write_text('name = "b"\nextends = "a"\n[model]\npath = "m"\n')
    with pytest.raises(BadRecordError, match="cycle"):
        load_recipe(a)


def rules(overrides: list[str], name: str = "qwen36-35b-a3b") -> list[str]:
    with pytest.raises(RecipeRuleError) as e:
        render(load_recipe(name, overrides), strict=True)
    return [f"{v.rule}:{v.key}" for v in e.value.violations]


def test_fully_async_constraints():
    assert "fully-async:batch.mini_batch_size" in rules(["batch.train_batch_size=32"])
    assert "fully-async:training.colocate" in rules(["training.colocate=true"])
    assert "fully-async:algorithm.policy_loss" in rules(['algorithm.policy_loss="regular"'])
    assert "fully-async:async.generation_workers" in rules(["async.generation_workers=65"])
    assert "fully-async:async.generation_workers" in rules(["async.generation_workers=8"])
    # cispo is fine when anchored on rollout logprobs
    render(
        load_recipe(
            "qwen36-35b-a3b",
            [
                'algorithm.policy_loss="cispo"',
                'skyrl.trainer.algorithm.cispo.cispo_anchor="rollout"',
            ],
        )
    )


def test_batch_divisibility():
    got = rules(["async.enabled=false", "batch.train_batch_size=24"])
    assert "batch:batch.train_batch_size" in got
    assert "batch:batch.mini_batch_size" in rules(
        ["batch.n_samples=3", "batch.mini_batch_size=1", "batch.train_batch_size=1"]
    )
    assert "layout:training.tensor_parallel" in rules(["training.tensor_parallel=3"])
    assert "layout:training.expert_tensor_parallel" in rules(["training.expert_parallel=64"])


def test_megatron_layout_arithmetic_for_policy_and_ref():
    # the 397B layout as first shipped: expert TP unset -> Megatron uses TP 4 for the experts,
    # and 64 GPUs do not divide into etp 4 x ep 16 x pp 4
    with pytest.raises(RecipeRuleError) as e:
        render(load_recipe("qwen35-397b-a17b", ["training.expert_tensor_parallel=4"]))
    msg = str(e.value)
    assert "[layout] training.expert_tensor_parallel: policy: world size 64" in msg
    assert "etp 4 x ep 16 x pp 4 = 256" in msg and "ref: world size 64" in msg
    assert "set training.expert_tensor_parallel = 1" in msg
    # unset (None) reads as etp = tp
    from apexrl.train.render import megatron_layout_violations, skyrl_layout

    r = load_recipe("qwen35-397b-a17b").recipe
    assert megatron_layout_violations(skyrl_layout(r)) == []
    unset = r.model_copy(
        update={"training": r.training.model_copy(update={"expert_tensor_parallel": None})}
    )
    (v_policy, v_ref) = megatron_layout_violations(skyrl_layout(unset))
    assert "unset, so Megatron uses tp = 4" in v_policy.message
    # the ref model is checked on its own keys (a raw [skyrl] override of its layout)
    bad_ref = ["skyrl.trainer.ref.megatron_config.context_parallel_size=3"]
    with pytest.raises(RecipeRuleError, match=r"ref: world size 64 is not divisible by tp 4"):
        render(load_recipe("qwen35-397b-a17b", bad_ref))
    # dense part: world vs tp x pp x cp; the 35B script's layout (TP8 EP8 CP1, etp 1) fits
    assert render(load_recipe("qwen36-35b-a3b")).plan.training_gpus == 32
    with pytest.raises(RecipeRuleError, match="tp 8 x pp 1 x cp 8 = 64"):
        render(load_recipe("qwen36-35b-a3b", ["training.context_parallel=8"]))


def test_gpus_per_engine_vs_tensor_parallel():
    assert "gpus:inference.engines" in rules(["inference.engines=11"])
    assert "gpus:inference.tensor_parallel" in rules(["inference.tensor_parallel=3"])
    assert "gpus:inference.tensor_parallel" in rules(["inference.tensor_parallel=12"])
    # fewer engines than GPUs is allowed, with a warning
    spec = render(load_recipe("qwen36-35b-a3b", ["inference.engines=9"]))
    assert any("idle" in w for w in spec.plan.warnings)


def test_context_lengths():
    assert "context:batch.max_seq_len" in rules(["batch.max_seq_len=300000"])
    assert "context:batch.eval_max_seq_len" in rules(["batch.eval_max_seq_len=300000"])
    assert "context:batch.max_prompt_length" in rules(["batch.max_prompt_length=163840"])
    assert "context:batch.max_tokens_per_turn" in rules(["batch.max_tokens_per_turn=200000"])


def test_big_checkpoints_need_s3(monkeypatch):
    assert "checkpoint:checkpoint.s3" in rules(['checkpoint.s3=""'], "qwen35-397b-a17b")
    monkeypatch.delenv("APEXRL_CKPT_S3", raising=False)
    assert "checkpoint:checkpoint.s3" in rules([], "qwen35-397b-a17b")  # unresolved at submit
    monkeypatch.setenv("APEXRL_CKPT_S3", "s3://bucket/runs")
    spec = render(load_recipe("qwen35-397b-a17b"), strict=True)
    assert spec.skyrl["trainer.ckpt_path"] == "s3://bucket/runs/qwen35-397b-a17b/ckpts"


def test_secrets_forwarded_by_name_never_written(monkeypatch):
    secret = "hf_" + "S3cr3tV4lu3" * 4
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-value-123")
    spec = render(load_recipe("qwen36-35b-a3b"))
    text = spec.model_dump_json()
    assert secret not in text and "wandb-secret-value-123" not in text
    assert "HF_TOKEN" in spec.env_forward and "WANDB_API_KEY" in spec.env_forward
    env = runtime_env(spec)["env_vars"]
    assert env["HF_TOKEN"] == secret and env["WANDB_API_KEY"] == "wandb-secret-value-123"
    assert "MODAL_TOKEN_ID" not in env  # unset names are simply absent


def test_auto_concurrency_comes_from_the_planner():
    spec = render(
        load_recipe("qwen35-397b-a17b", ['rollout.concurrency="auto"', 'checkpoint.s3="s3://b/p"'])
    )
    assert spec.plan.concurrency_source == "planner"
    assert spec.plan.concurrency == spec.plan.planner.concurrency == 240


def test_cli_dry_run_prints_complete_plans(runner, monkeypatch):
    from apexrl.cli.app import app

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for path in ("recipes/qwen36-35b-a3b.toml", "recipes/qwen35-397b-a17b.toml"):
        res = runner.invoke(app, ["train", str(RECIPES_DIR.parent / path), "--dry-run", "--json"])
        assert res.exit_code == 0, res.output
        spec = json.loads(res.stdout.strip().splitlines()[-1])
        assert spec["skyrl"]["trainer.fully_async.enabled"] is True
        for word in (
            "GPUs",
            "concurrency",
            "planner:",
            "checkpoints",
            "exports",
            "S3",
            "validation",
        ):
            assert word in res.stderr


def test_cli_bad_key_exit_code(runner):
    from apexrl.cli.app import app

    res = runner.invoke(app, ["train", "smoke-1gpu", "--dry-run", "--set", "batch.n_sample=2"])
    assert res.exit_code == 1 and "batch.n_samples" in res.stderr
    res = runner.invoke(app, ["train", "smoke-1gpu", "--dry-run", "--set", "inference.engines=2"])
    assert res.exit_code == 1 and "gpus" in res.stderr


def test_errors_are_apex_errors():
    assert issubclass(RecipeRuleError, ApexError)


def test_secret_values_may_not_sit_in_a_recipe():
    got = rules(['env.vars={HF_TOKEN = "hf_xxx", PLAIN = "1"}'], "smoke-1gpu")
    assert got == ["secrets:env.vars.HF_TOKEN"]
    spec = render(load_recipe("smoke-1gpu", ['env.vars={PLAIN = "1"}']))
    assert runtime_env(spec, {})["env_vars"] == {"PLAIN": "1"}


def test_cli_submit_without_data_is_a_usage_error(runner, tmp_path):
    from apexrl.cli.app import app

    res = runner.invoke(app, ["train", "smoke-1gpu", "--set", f'checkpoint.path="{tmp_path}/c"'])
    assert res.exit_code == 2 and "--data" in res.stderr


def test_recipe_parity_profile_renders_each_setting_to_its_skyrl_key():
    from apexrl.train.render import parity_rows

    loaded = load_recipe("qwen36-35b-a3b")
    spec = render(loaded, data_train="/d/train", data_val="/d/eval")
    rows = {(f, k): v for f, k, v in parity_rows(spec.skyrl, loaded.recipe)}
    m = "trainer.policy.megatron_config."
    expect = {
        ("model.language_model_only", "trainer.policy.language_model_only"): True,
        ("model.language_model_only", "generator.inference_engine.language_model_only"): True,
        ("training.adam_betas", "trainer.policy.optimizer_config.adam_betas"): [0.9, 0.98],
        ("training.weight_decay", "trainer.policy.optimizer_config.weight_decay"): 0.01,
        ("training.max_grad_norm", "trainer.policy.optimizer_config.max_grad_norm"): 1.0,
        ("training.sample_packing", "trainer.remove_microbatch_padding"): True,
        ("training.max_tokens_per_microbatch", "trainer.max_tokens_per_microbatch"): 160000,
        ("training.fused_lm_head_logprob", "trainer.fused_lm_head_logprob"): True,
        (
            "training.optimizer_cpu_offload",
            m + "optimizer_config_kwargs.optimizer_cpu_offload",
        ): True,
        ("training.empty_cuda_cache", m + "empty_cuda_cache"): True,
        ("training.expert_tensor_parallel", m + "expert_tensor_parallel_size"): 1,
        (
            "inference.gdn_prefill_backend",
            "generator.inference_engine.engine_init_kwargs.gdn_prefill_backend",
        ): "triton",
        (
            "inference.router_policy",
            "generator.inference_engine.router_init_kwargs.policy",
        ): "sticky_least_loaded",
        ("inference.prefix_cache_salt", "generator.use_cache_salt"): True,
        ("async.sample_full_batch", "trainer.fully_async.sample_full_batch"): True,
    }
    assert {k: rows.get(k) for k in expect} == expect
    s = spec.skyrl
    assert s[m + "tensor_model_parallel_size"] == 8 and s[m + "context_parallel_size"] == 1
    assert s["trainer.epochs"] == 3 and s["trainer.eval_interval"] == 20
    assert s["generator.sampling_params.max_generate_length"] == 50000
    assert s["trainer.algorithm.max_seq_len"] == 160000
    g = spec.generator
    assert g.rate_limit_per_s == 3.0 and g.session_affinity and g.max_tokens_per_turn == 50000
    assert "CUDA_HOME" in spec.env_forward
    s397 = render(load_recipe("qwen35-397b-a17b")).skyrl
    assert s397["trainer.fused_lm_head_logprob"] is False
    assert s397["generator.sampling_params.max_generate_length"] == 40000
    # a recipe without the profile renders none of them (SkyRL's defaults apply)
    smoke = render(load_recipe("smoke-1gpu")).skyrl
    assert "trainer.policy.optimizer_config.adam_betas" not in smoke
    assert "generator.inference_engine.router_init_kwargs.policy" not in smoke


def test_auto_concurrency_never_exceeds_the_published_ceiling_silently():
    for name, ceiling in (("qwen36-35b-a3b", 550), ("qwen35-397b-a17b", 300)):
        spec = render(load_recipe(name, ['rollout.concurrency="auto"']))
        p = spec.plan
        assert p.concurrency <= ceiling
        if p.planner.concurrency > ceiling:
            assert p.concurrency == ceiling and p.concurrency_source == "ceiling"
            w = " ".join(p.warnings)
            assert f"above the published ceiling {ceiling}" in w
            assert "inference.kv_cache_tokens" in w  # the input the planner lacks
    # a number above the ceiling is warned about
    spec = render(load_recipe("qwen36-35b-a3b", ["rollout.concurrency=600"]))
    assert any("above the published ceiling 550" in w for w in spec.plan.warnings)
    # with the engines' measured KV cache, the planner computes from it
    spec = render(
        load_recipe(
            "qwen36-35b-a3b",
            ['rollout.concurrency="auto"', "inference.kv_cache_tokens=8800000"],
        )
    )
    assert spec.plan.planner.tokens_per_engine == 8_800_000
    assert spec.plan.planner.per_engine == 8_800_000 // 101_441


def test_rollout_executor_selects_where_trials_run():
    """rollout.executor / rollout.shards reach the generator settings; unset: ray (or the
    launcher's explicit choice); an unknown name or a negative count is a recipe error."""
    from pydantic import ValidationError

    from apexrl.train.generator import GeneratorSettings
    from apexrl.trial.executors import ShardExecutor, make_executor

    plain = render(load_recipe("smoke-1gpu"), data_train="t.parquet").generator
    assert (plain.executor, plain.shards) == ("ray", 0)
    sets = ['rollout.executor="shards"', "rollout.shards=4"]
    g = render(load_recipe("smoke-1gpu", sets), data_train="t.parquet").generator
    assert (g.executor, g.shards) == ("shards", 4)
    ex = make_executor(g.executor, g.concurrency, g.trial_cpus, g.shards)
    assert isinstance(ex, ShardExecutor)
    ex.close()
    # an explicit executor (tests, local launchers) wins over the recipe's
    g2 = render(load_recipe("smoke-1gpu", sets), data_train="t.parquet", executor="inline")
    assert g2.generator.executor == "inline"
    # the setting survives the run spec's JSON round trip
    assert GeneratorSettings.model_validate_json(g.model_dump_json()).shards == 4
    with pytest.raises(UsageError, match="--set rollout.executor"):
        load_recipe("smoke-1gpu", ['rollout.executor="threads"'])
    with pytest.raises(UsageError, match="--set rollout.shards"):
        load_recipe("smoke-1gpu", ["rollout.shards=-1"])
    with pytest.raises(ValidationError, match="executor"):
        GeneratorSettings(tasks_dir="t", logs_dir="l", executor="threads")


def test_agent_max_steps_is_read_as_max_turns_with_a_warning(tmp_path, runner):
    """[agent].max_steps (agent steps, beside [training].max_steps, optimizer steps) is now
    max_turns; the old keys are still read, renamed, with a warning; the hash is the same."""
    from apexrl.cli.app import app

    new = tmp_path / "new.toml"
    new.write_text(
        'extends = "smoke-1gpu"\nname = "t"\n[agent]\nmax_turns = 7\neval_max_turns = 9\n'
    )
    old = tmp_path / "old.toml"
    old.write_text(
        'extends = "smoke-1gpu"\nname = "t"\n[agent]\nmax_steps = 7\neval_max_steps = 9\n'
    )
    a, b = load_recipe(new), load_recipe(old)
    assert (b.recipe.agent.max_turns, b.recipe.agent.eval_max_turns) == (7, 9)
    assert a.sha256 == b.sha256 and a.deprecations == []
    assert [d.split(": ", 1)[1][:25] for d in b.deprecations] == ["`agent.max_steps` is depr"] + [
        "`agent.eval_max_steps` is"
    ]
    via_set = load_recipe("smoke-1gpu", ["agent.max_steps=5"])
    assert (
        via_set.recipe.agent.max_turns == 5 and "--set agent.max_steps" in via_set.deprecations[0]
    )
    assert render(via_set).generator.budgets.max_steps == 5  # the trial's budget
    both = tmp_path / "both.toml"
    both.write_text('extends = "smoke-1gpu"\nname = "t"\n[agent]\nmax_steps = 1\nmax_turns = 2\n')
    with pytest.raises(BadRecordError, match="both set"):
        load_recipe(both)
    res = runner.invoke(app, ["train", str(old), "--dry-run", "--set", 'agent.judge="none"'])
    assert res.exit_code == 0, res.output
    assert "warning      " in res.stderr and "rename it `agent.max_turns`" in res.stderr


def test_runtime_archipelago_runs_in_the_local_environment_only():
    from pydantic import ValidationError

    from apexrl.train.recipe import AgentSection

    assert AgentSection(runtime="archipelago").runtime == "archipelago"
    with pytest.raises(ValidationError, match="local"):
        AgentSection(runtime="archipelago", environment="modal")
