"""Recipe -> SkyRL configuration: `key.path=value` overrides (every key checked against
SkyRL's key list, `check_skyrl_types`, and against SkyRL's own config classes when SkyRL is
importable, `validate_with_skyrl`), the optional settings rendered only when a recipe sets
them (PARITY_KEYS, recipes/profiles/recipe-parity.toml) and the checkpoint paths."""

from __future__ import annotations

import os
from typing import Any

from apexrl.errors import BadRecordError
from apexrl.train import skyrl_keys
from apexrl.train.recipe import Recipe


def expand_s3(r: Recipe) -> str | None:
    """checkpoint.s3 with ${VAR} expanded from the environment (None when unset)."""
    import re

    if not r.checkpoint.s3:
        return None
    # unresolved ${VAR} stays visible as <VAR> (OmegaConf would try to interpolate it)
    return re.sub(r"\$\{?(\w+)\}?", r"<\1>", os.path.expandvars(r.checkpoint.s3))


def checkpoint_paths(r: Recipe) -> tuple[str, str]:
    name = r.resolved_run_name
    ckpt = r.checkpoint.path.format(run_name=name)
    export = r.checkpoint.export_path.format(run_name=name)
    s3 = expand_s3(r)
    if s3:
        ckpt = f"{s3.rstrip('/')}/{name}/ckpts"
    return ckpt, export


def skyrl_overrides(
    r: Recipe, *, data_train: str | None, data_val: str | None, resume: bool
) -> dict:
    ckpt, export = checkpoint_paths(r)
    a, b, tr, inf, alg = r.fully_async, r.batch, r.training, r.inference, r.algorithm
    model = r.model.path
    o: dict[str, Any] = {
        "trainer.policy.model.path": model,
        "trainer.ref.model.path": model,
        "trainer.strategy": tr.strategy,
        "trainer.seed": tr.seed,
        "trainer.epochs": tr.epochs,
        "trainer.max_training_steps": tr.max_steps if tr.max_steps else None,
        "trainer.policy.optimizer_config.lr": tr.lr,
        "trainer.train_batch_size": b.train_batch_size,
        "trainer.policy_mini_batch_size": b.mini_batch_size,
        "trainer.micro_train_batch_size_per_gpu": tr.micro_batch_per_gpu,
        "trainer.micro_forward_batch_size_per_gpu": tr.micro_batch_per_gpu,
        "trainer.max_prompt_length": b.max_prompt_length,
        "trainer.eval_batch_size": b.eval_batch_size,
        "trainer.eval_interval": r.logging.eval_interval,
        "trainer.eval_before_train": r.logging.eval_before_train,
        "trainer.logger": r.logging.logger,
        "trainer.project_name": r.logging.project,
        "trainer.run_name": r.resolved_run_name,
        "trainer.ckpt_path": ckpt,
        "trainer.export_path": export,
        "trainer.ckpt_interval": r.checkpoint.interval,
        "trainer.max_ckpts_to_keep": r.checkpoint.keep,
        "trainer.hf_save_interval": r.checkpoint.hf_save_interval,
        "trainer.resume_mode": "latest" if resume else "none",
        "trainer.algorithm.advantage_estimator": alg.advantage,
        "trainer.algorithm.policy_loss_type": alg.policy_loss,
        "trainer.algorithm.dppo.dppo_type": alg.dppo_type,
        "trainer.algorithm.dppo.delta_low": alg.dppo_delta_low,
        "trainer.algorithm.dppo.delta_high": alg.dppo_delta_high,
        "trainer.algorithm.loss_reduction": alg.loss_reduction,
        "trainer.algorithm.grpo_norm_by_std": alg.grpo_norm_by_std,
        "trainer.algorithm.use_kl_loss": alg.use_kl,
        "trainer.algorithm.use_kl_in_reward": False,
        "trainer.algorithm.eps_clip_low": alg.eps_clip_low,
        "trainer.algorithm.eps_clip_high": alg.eps_clip_high,
        "trainer.algorithm.zero_variance_filter": alg.zero_variance_filter,
        "trainer.algorithm.temperature": alg.temperature,
        "trainer.fully_async.enabled": a.enabled,
        "trainer.fully_async.max_staleness_steps": a.max_staleness,
        "trainer.fully_async.num_parallel_generation_workers": a.generation_workers,
        "trainer.placement.colocate_all": tr.colocate,
        "trainer.placement.colocate_policy_ref": True,
        "trainer.algorithm.max_seq_len": b.max_seq_len,
        "generator.n_samples_per_prompt": b.n_samples,
        "generator.eval_n_samples_per_prompt": b.eval_n_samples,
        "generator.batched": False,
        "generator.max_input_length": b.max_seq_len,
        "generator.max_turns": r.agent.max_turns,
        "generator.sampling_params.temperature": alg.temperature,
        "generator.sampling_params.logprobs": 1,
        "generator.sampling_params.max_generate_length": b.max_tokens_per_turn,
        "generator.eval_sampling_params.max_generate_length": b.max_tokens_per_turn,
        "generator.inference_engine.backend": inf.backend,
        "generator.inference_engine.num_engines": inf.engines,
        "generator.inference_engine.tensor_parallel_size": inf.tensor_parallel,
        "generator.inference_engine.expert_parallel_size": inf.expert_parallel,
        "generator.inference_engine.gpu_memory_utilization": inf.gpu_memory_utilization,
        "generator.inference_engine.engine_init_kwargs.max_model_len": inf.max_model_len,
        "environment.env_class": "apexrl",
    }
    if r.model.served_name:
        o["generator.inference_engine.served_model_name"] = r.model.served_name
    o.update(layout_overrides(r))
    o.update(_parity_overrides(r))
    if data_train:
        o["data.train_data"] = [data_train]
    if data_val:
        o["data.val_data"] = [data_val]
        if r.mode == "eval" and o["trainer.eval_interval"] <= 0:
            # SkyRL loads eval data only when eval_interval > 0 (EvalOnlyEntrypoint asserts it)
            o["trainer.eval_interval"] = 1
    else:
        o["data.val_data"] = []
        o["trainer.eval_interval"] = -1
        o["trainer.eval_before_train"] = False
    o.update(r.skyrl)  # raw pass-through wins
    return o


def layout_overrides(r: Recipe) -> dict[str, Any]:
    tr = r.training
    o: dict[str, Any] = {
        "trainer.placement.policy_num_nodes": max(r.cluster.training_nodes, 1),
        "trainer.placement.policy_num_gpus_per_node": r.cluster.gpus_per_node,
        "trainer.placement.ref_num_nodes": max(r.cluster.training_nodes, 1),
        "trainer.placement.ref_num_gpus_per_node": r.cluster.gpus_per_node,
    }
    if tr.strategy == "megatron":
        for role in ("policy", "ref"):
            m = f"trainer.{role}.megatron_config."
            o[m + "tensor_model_parallel_size"] = tr.tensor_parallel
            o[m + "pipeline_model_parallel_size"] = tr.pipeline_parallel
            o[m + "context_parallel_size"] = tr.context_parallel
            o[m + "expert_model_parallel_size"] = tr.expert_parallel
            if tr.expert_tensor_parallel is not None:
                o[m + "expert_tensor_parallel_size"] = tr.expert_tensor_parallel
    return o


# Recipe field -> SkyRL key(s), for settings rendered only when the recipe sets them (None:
# SkyRL's default). The public recipe's scripts set these (recipes/profiles/recipe-parity.toml).
PARITY_KEYS: list[tuple[str, tuple[str, ...]]] = [
    (
        "model.language_model_only",
        (
            "trainer.policy.language_model_only",
            "trainer.ref.language_model_only",
            "generator.inference_engine.language_model_only",
        ),
    ),
    ("training.adam_betas", ("trainer.policy.optimizer_config.adam_betas",)),
    ("training.weight_decay", ("trainer.policy.optimizer_config.weight_decay",)),
    ("training.max_grad_norm", ("trainer.policy.optimizer_config.max_grad_norm",)),
    ("training.sample_packing", ("trainer.remove_microbatch_padding",)),
    ("training.max_tokens_per_microbatch", ("trainer.max_tokens_per_microbatch",)),
    ("training.fused_lm_head_logprob", ("trainer.fused_lm_head_logprob",)),
    (
        "training.optimizer_cpu_offload",
        tuple(
            f"trainer.policy.megatron_config.optimizer_config_kwargs.{k}"
            for k in (
                "optimizer_cpu_offload",
                "overlap_cpu_optimizer_d2h_h2d",
                "use_precision_aware_optimizer",
            )
        ),
    ),
    ("training.empty_cuda_cache", ("trainer.policy.megatron_config.empty_cuda_cache",)),
    (
        "inference.distributed_executor_backend",
        ("generator.inference_engine.distributed_executor_backend",),
    ),
    (
        "inference.gdn_prefill_backend",
        ("generator.inference_engine.engine_init_kwargs.gdn_prefill_backend",),
    ),
    ("inference.router_policy", ("generator.inference_engine.router_init_kwargs.policy",)),
    ("inference.prefix_cache_salt", ("generator.use_cache_salt",)),
    ("async.sample_full_batch", ("trainer.fully_async.sample_full_batch",)),
]


def _field(r: Recipe, path: str) -> Any:
    sec, _, name = path.partition(".")
    obj = r.fully_async if sec == "async" else getattr(r, sec)
    return getattr(obj, name)


def _parity_overrides(r: Recipe) -> dict[str, Any]:
    o: dict[str, Any] = {}
    for field, keys in PARITY_KEYS:
        val = _field(r, field)
        if val is None:
            continue
        for k in keys:
            o[k] = list(val) if isinstance(val, list) else val
    if r.training.optimizer_cpu_offload:
        o["trainer.policy.megatron_config.optimizer_config_kwargs.optimizer_offload_fraction"] = (
            r.training.optimizer_offload_fraction
        )
    if r.training.strategy != "megatron":  # Megatron-only keys
        for k in list(o):
            if "megatron_config" in k or k == "trainer.fused_lm_head_logprob":
                del o[k]
    return o


def check_skyrl_types(overrides: dict, where: str) -> None:
    for k, val in overrides.items():
        kind = skyrl_keys.lookup(k)
        if kind is None:
            raise BadRecordError(
                where,
                f"rendered SkyRL key `{k}` is not in SkyRL "
                f"{skyrl_keys.snapshot()['skyrl_version']}",
            )
        if not skyrl_keys.type_ok(kind, val):
            raise BadRecordError(where, f"rendered `{k}` = {val!r}: SkyRL expects {kind}")


def skyrl_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("skyrl") is not None


def validate_with_skyrl(
    overrides: dict, where: str, *, mode: str = "train"
) -> tuple[str, list[str]]:
    """SkyRL's own checks on the rendered config: its config classes, then `validate_cfg`
    (train) or `validate_generator_cfg` (eval, as SkyRL's eval entrypoint does).

    Returns (SkyRL's version, notes). Raises BadRecordError with SkyRL's message when SkyRL
    rejects the config. SkyRL reads WANDB_API_KEY from this process's environment; when it is
    absent here a placeholder stands in for the check (the job gets the real one by name).
    """
    from loguru import logger

    logger.disable("skyrl")  # SkyRL's import-time INFO lines are not the user's business
    try:
        notes: list[str] = []
        return _validate(overrides, where, mode, notes), notes
    finally:
        logger.enable("skyrl")


def _validate(overrides: dict, where: str, mode: str, notes: list[str]) -> str:
    import contextlib
    import io
    from importlib.metadata import version

    from skyrl.train.config import SkyRLTrainConfig

    try:
        cfg = SkyRLTrainConfig.from_cli_overrides(dict(overrides))
    except (ValueError, TypeError, AssertionError, KeyError) as e:
        raise BadRecordError(where, f"SkyRL rejects the rendered config: {e}") from None
    from skyrl.train.utils.utils import validate_cfg, validate_generator_cfg

    check = validate_cfg if mode == "train" else validate_generator_cfg
    placeholder = cfg.trainer.logger == "wandb" and not os.environ.get("WANDB_API_KEY")
    if placeholder:
        notes.append("WANDB_API_KEY is not set here: the job needs it (forwarded by name)")
        os.environ["WANDB_API_KEY"] = "placeholder-for-validate-cfg"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            check(cfg)
    except (ValueError, TypeError, AssertionError, NotImplementedError, KeyError) as e:
        msg = str(e) or type(e).__name__
        raise BadRecordError(where, f"SkyRL's {check.__name__} rejects the config: {msg}") from None
    finally:
        if placeholder:
            os.environ.pop("WANDB_API_KEY", None)
    return version("skyrl")


def parity_rows(overrides: dict[str, Any], r: Recipe) -> list[tuple[str, str, Any]]:
    """(recipe field, SkyRL key, rendered value) for the optional settings the recipe set."""
    rows = []
    for field, keys in PARITY_KEYS:
        if _field(r, field) is None:
            continue
        rows += [(field, k, overrides[k]) for k in keys if k in overrides]
    k = "trainer.policy.megatron_config.optimizer_config_kwargs.optimizer_offload_fraction"
    if k in overrides:
        rows.append(("training.optimizer_offload_fraction", k, overrides[k]))
    if r.training.expert_tensor_parallel is not None:
        for role in ("policy", "ref"):
            k = f"trainer.{role}.megatron_config.expert_tensor_parallel_size"
            rows.append(("training.expert_tensor_parallel", k, overrides.get(k)))
    return rows
