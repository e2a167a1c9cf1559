"""Recipe -> run spec: SkyRL config overrides, generator settings, env, the plan.

`render(loaded)` checks the recipe rules (always), renders SkyRL's configuration
as `key.path=value` overrides (every key checked against SkyRL's key list, and
against SkyRL's own config classes when SkyRL is importable: `validate_with_skyrl`),
the generator settings, the runtime env (secret names only, never values) and a
plan to print.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from apexrl.errors import ApexError, BadRecordError
from apexrl.train import skyrl_keys
from apexrl.train.generator import GeneratorSettings
from apexrl.train.plan import ConcurrencyPlan, load_shape, plan_concurrency, shape_from_arch
from apexrl.train.recipe import LoadedRecipe, Recipe

ROLLOUT_LOSSES = {"dppo", "rollout_is"}  # optimize against rollout logprobs (+ cispo@rollout)
# SkyRL 0.4.0's registered policy losses: the fully-async rule judges these; any other name is
# left to SkyRL's validate_cfg, whose message names the valid ones
SKYRL_POLICY_LOSSES = {
    "regular", "dual_clip", "gspo", "sapo", "cispo", "rollout_is", "dppo", "clip_cov",
    "kl_cov", "cross_entropy", "importance_sampling",
}  # fmt: skip
SPEC_SCHEMA_VERSION = "1"


class Violation(BaseModel):
    rule: str
    key: str
    message: str


class RecipeRuleError(ApexError):
    def __init__(self, source: str, violations: list[Violation]) -> None:
        lines = [f"{source}: {len(violations)} recipe rule(s) broken"]
        lines += [f"  [{v.rule}] {v.key}: {v.message}" for v in violations]
        super().__init__("\n".join(lines), hint="fix the recipe or pass --set key=value")
        self.violations = violations


class RunPlan(BaseModel):
    """A training run's plan: GPUs, engines, concurrency, checkpoints, warnings (publish's
    upload `Plan` is another thing)."""

    model_config = ConfigDict(extra="forbid")
    inference_gpus: int
    training_gpus: int
    total_gpus: int
    nodes: int
    engines: int
    gpus_per_engine: int
    concurrency: int
    concurrency_source: str  # "recipe", "planner" or "ceiling" (planner capped at rollout.ceiling)
    planner: ConcurrencyPlan | None = None
    checkpoint_path: str
    export_path: str
    s3: str | None = None
    fully_async: bool
    warnings: list[str] = Field(default_factory=list)


class RunSpec(BaseModel):
    """What a run needs on the cluster: written as run_spec.json into the job."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = SPEC_SCHEMA_VERSION
    recipe: str
    run_name: str
    mode: str
    skyrl: dict[str, Any]  # flat key.path -> value
    generator: GeneratorSettings
    env_forward: list[str]  # variable NAMES forwarded from the submitting shell
    env_vars: dict[str, str]  # plain, non-secret values
    data_train: str | None = None
    data_val: str | None = None
    resume: bool = False
    plan: RunPlan


# --- rules --------------------------------------------------------------------------------
LAYOUT_KEYS = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "cp": "context_parallel_size",
    "ep": "expert_model_parallel_size",
    "etp": "expert_tensor_parallel_size",
}
LAYOUT_FIELDS = {  # recipe field behind each size (for the message)
    "tp": "training.tensor_parallel",
    "pp": "training.pipeline_parallel",
    "cp": "training.context_parallel",
    "ep": "training.expert_parallel",
    "etp": "training.expert_tensor_parallel",
}


def skyrl_layout(r: Recipe) -> dict[str, Any]:
    """The rendered Megatron layout and placement keys (raw [skyrl] keys win), for the rule."""
    o = {k: v for k, v in _layout_overrides(r).items()}
    o.update({k: v for k, v in r.skyrl.items() if k in o or "megatron_config" in k})
    return o


def megatron_layout_violations(o: dict[str, Any], r: Recipe | None = None) -> list[Violation]:
    """Megatron's parallel-state arithmetic, per role (policy, ref), on SkyRL keys.

    world = nodes x GPUs per node. The dense part needs world % (tp x pp x cp) == 0
    (data parallel = the quotient); the expert part needs world % (etp x ep x pp) == 0,
    where an unset expert_tensor_parallel_size means etp = tp (Megatron's default).
    """
    out: list[Violation] = []
    for role in ("policy", "ref"):
        world = int(o.get(f"trainer.placement.{role}_num_nodes") or 1) * int(
            o.get(f"trainer.placement.{role}_num_gpus_per_node") or 1
        )
        m = f"trainer.{role}.megatron_config."
        size = {k: o.get(m + key) for k, key in LAYOUT_KEYS.items()}
        tp, pp, cp, ep = (int(size[k] or 1) for k in ("tp", "pp", "cp", "ep"))
        etp_set = size["etp"] is not None
        etp = int(size["etp"]) if etp_set else tp
        if min(tp, pp, cp, ep, etp) < 1:
            out.append(Violation(rule="layout", key=m + "*", message=f"{role}: sizes must be >= 1"))
            continue
        if world % (tp * pp * cp):
            out.append(
                Violation(
                    rule="layout",
                    key=LAYOUT_FIELDS["tp"],
                    message=f"{role}: world size {world} is not divisible by tp {tp} x pp {pp} "
                    f"x cp {cp} = {tp * pp * cp} (data parallel must be a whole number)",
                )
            )
        if world % (etp * ep * pp):
            how = (
                f"expert_tensor_parallel_size {etp}"
                if etp_set
                else f"expert_tensor_parallel_size unset, so Megatron uses tp = {tp}"
            )
            fix = [x for x in (1, 2, 4, 8) if world % (x * ep * pp) == 0]
            hint = f"; set {LAYOUT_FIELDS['etp']} = {fix[0]}" if fix else ""
            out.append(
                Violation(
                    rule="layout",
                    key=LAYOUT_FIELDS["etp"] if ep > 1 else LAYOUT_FIELDS["ep"],
                    message=f"{role}: world size {world} is not divisible by etp {etp} x ep {ep} "
                    f"x pp {pp} = {etp * ep * pp} ({how}){hint}",
                )
            )
    return out


def check_rules(r: Recipe, concurrency: int | None = None) -> tuple[list[Violation], list[str]]:
    v: list[Violation] = []
    warn: list[str] = []

    def bad(rule: str, key: str, msg: str) -> None:
        v.append(Violation(rule=rule, key=key, message=msg))

    b, a, inf, tr, cl = r.batch, r.fully_async, r.inference, r.training, r.cluster
    training = r.mode == "train"
    # fully async
    if training and a.enabled:
        if b.train_batch_size != b.mini_batch_size:
            bad(
                "fully-async",
                "batch.mini_batch_size",
                f"fully async needs train_batch_size == mini_batch_size "
                f"({b.train_batch_size} != {b.mini_batch_size})",
            )
        if tr.colocate:
            bad(
                "fully-async",
                "training.colocate",
                "fully async cannot colocate training and inference",
            )
        if r.algorithm.policy_loss in SKYRL_POLICY_LOSSES - ROLLOUT_LOSSES and not (
            r.algorithm.policy_loss == "cispo"
            and r.skyrl.get("trainer.algorithm.cispo.cispo_anchor") == "rollout"
        ):
            bad(
                "fully-async",
                "algorithm.policy_loss",
                f"`{r.algorithm.policy_loss}` recomputes old logprobs; fully async needs a "
                "rollout-logprob loss (dppo, rollout_is, or cispo with cispo_anchor=rollout)",
            )
        lo, hi = b.mini_batch_size, b.mini_batch_size * (a.max_staleness + 1)
        if not lo <= a.generation_workers <= hi:
            bad(
                "fully-async",
                "async.generation_workers",
                f"{a.generation_workers} must be within [mini_batch_size, mini_batch_size x "
                f"(max_staleness + 1)] = [{lo}, {hi}]",
            )
        if r.skyrl.get("generator.batched"):
            bad(
                "fully-async",
                "skyrl.generator.batched",
                "fully async needs a non-batched generator",
            )
    # batch divisibility
    if training and b.train_batch_size % b.mini_batch_size:
        bad(
            "batch",
            "batch.train_batch_size",
            f"{b.train_batch_size} is not divisible by mini_batch_size {b.mini_batch_size}",
        )
    train_gpus = cl.training_nodes * cl.gpus_per_node
    model_par = (
        tr.tensor_parallel * tr.pipeline_parallel * tr.context_parallel
        if tr.strategy == "megatron"
        else 1
    )
    if not training:
        pass
    elif train_gpus < 1:
        bad("gpus", "cluster.training_nodes", "training needs at least one node")
    elif train_gpus % model_par:
        pass  # reported by the layout rule (megatron_layout_violations)
    else:
        dp = train_gpus // model_par
        seqs = b.mini_batch_size * b.n_samples
        if seqs % dp:
            bad(
                "batch",
                "batch.mini_batch_size",
                f"mini_batch_size x n_samples = {seqs} trajectories do not split evenly over "
                f"{dp} data-parallel ranks",
            )
        elif (seqs // dp) % tr.micro_batch_per_gpu:
            bad(
                "batch",
                "training.micro_batch_per_gpu",
                f"{seqs // dp} trajectories per rank not divisible by {tr.micro_batch_per_gpu}",
            )
    if training and tr.strategy == "megatron":
        v.extend(megatron_layout_violations(skyrl_layout(r), r))
        arch = r.model.arch
        if arch and arch.num_hidden_layers % tr.pipeline_parallel:
            warn.append(
                f"{arch.num_hidden_layers} layers do not split evenly over pipeline_parallel "
                f"{tr.pipeline_parallel} stages (Megatron needs an uneven-split setting)"
            )
    # GPUs per engine vs tensor parallel size
    per_engine = inf.tensor_parallel
    if per_engine > cl.gpus_per_node and per_engine % cl.gpus_per_node:
        bad(
            "gpus",
            "inference.tensor_parallel",
            f"an engine of {per_engine} GPUs must span whole nodes of {cl.gpus_per_node}",
        )
    if per_engine <= cl.gpus_per_node and cl.gpus_per_node % per_engine:
        bad(
            "gpus",
            "inference.tensor_parallel",
            f"tp {per_engine} does not divide {cl.gpus_per_node} GPUs per node",
        )
    inf_gpus = (cl.training_nodes if tr.colocate else cl.inference_nodes) * cl.gpus_per_node
    if inf.engines * per_engine > inf_gpus:
        bad(
            "gpus",
            "inference.engines",
            f"{inf.engines} engines x tp {per_engine} = {inf.engines * per_engine} GPUs, "
            f"but {inf_gpus} inference GPUs are declared",
        )
    elif inf.engines * per_engine < inf_gpus:
        warn.append(f"{inf_gpus - inf.engines * per_engine} inference GPUs left idle")
    if inf.expert_parallel > 1 and per_engine % inf.expert_parallel:
        bad(
            "gpus",
            "inference.expert_parallel",
            "expert parallel size must divide the engine's GPUs",
        )
    # context lengths
    if b.max_seq_len > inf.max_model_len:
        bad(
            "context",
            "batch.max_seq_len",
            f"{b.max_seq_len} exceeds the engine's max_model_len {inf.max_model_len}",
        )
    if b.eval_max_seq_len and b.eval_max_seq_len > inf.max_model_len:
        bad(
            "context",
            "batch.eval_max_seq_len",
            f"{b.eval_max_seq_len} exceeds the engine's max_model_len {inf.max_model_len}",
        )
    if b.max_prompt_length >= b.max_seq_len:
        bad("context", "batch.max_prompt_length", "must be below batch.max_seq_len")
    if b.max_tokens_per_turn > b.max_seq_len:
        bad("context", "batch.max_tokens_per_turn", "must not exceed batch.max_seq_len")
    if r.rollout.avg_tokens > b.max_seq_len:
        warn.append(
            f"rollout.avg_tokens {r.rollout.avg_tokens} > max_seq_len {b.max_seq_len}: the "
            "planner uses max_seq_len"
        )
    # checkpoints
    if r.checkpoint.keep == 0:
        bad(
            "checkpoint", "checkpoint.keep", "0 keeps nothing: use a positive number, or -1 for all"
        )
    if (
        r.model.arch
        and r.model.arch.params_b * r.model.arch.dtype_bytes > 400
        and not r.checkpoint.s3
    ):
        bad(
            "checkpoint",
            "checkpoint.s3",
            f"{r.model.arch.params_b:g}B parameters: checkpoints this size must go to S3 "
            '(set checkpoint.s3 = "s3://bucket/prefix")',
        )
    from apexrl.secrets import SECRET_ENV_KEYS

    for name in r.env.vars:
        if name in SECRET_ENV_KEYS or name == "WANDB_API_KEY":
            bad(
                "secrets",
                f"env.vars.{name}",
                "a secret's value does not belong in a recipe: it is forwarded by name from "
                "the environment (apexrl.secrets); for others list the name in env.forward",
            )
    if r.logging.logger == "wandb" and "WANDB_API_KEY" not in r.env.forward:
        warn.append("logger wandb: add WANDB_API_KEY to env.forward")
    if concurrency is not None and a.enabled:
        peak = a.generation_workers * b.n_samples
        if concurrency > peak:
            warn.append(
                f"concurrency {concurrency} above what {a.generation_workers} generation workers x "
                f"{b.n_samples} samples can start ({peak})"
            )
    return v, warn


# --- rendering ----------------------------------------------------------------------------
def expand_s3(r: Recipe) -> str | None:
    """checkpoint.s3 with ${VAR} expanded from the environment (None when unset)."""
    import re

    if not r.checkpoint.s3:
        return None
    # unresolved ${VAR} stays visible as <VAR> (OmegaConf would try to interpolate it)
    return re.sub(r"\$\{?(\w+)\}?", r"<\1>", os.path.expandvars(r.checkpoint.s3))


def _paths(r: Recipe) -> tuple[str, str]:
    name = r.resolved_run_name
    ckpt = r.checkpoint.path.format(run_name=name)
    export = r.checkpoint.export_path.format(run_name=name)
    s3 = expand_s3(r)
    if s3:
        ckpt = f"{s3.rstrip('/')}/{name}/ckpts"
    return ckpt, export


def planner_for(r: Recipe, avg_tokens: int | None = None) -> ConcurrencyPlan | None:
    shape = None
    cfg = r.model.config or (
        str(Path(r.model.path) / "config.json") if Path(r.model.path).is_dir() else None
    )
    if cfg and Path(cfg).exists():
        shape = load_shape(cfg)
    elif r.model.arch:
        shape = shape_from_arch(r.model.arch, r.model.path)
    if shape is None:
        return None
    return plan_concurrency(
        shape,
        gpu_memory_gb=r.cluster.gpu_memory_gb,
        engines=r.inference.engines,
        tp=r.inference.tensor_parallel,
        gpu_mem_util=r.inference.gpu_memory_utilization,
        max_model_len=min(r.batch.max_seq_len, r.inference.max_model_len),
        avg_tokens=avg_tokens or r.rollout.avg_tokens,
        kv_cache_tokens=r.inference.kv_cache_tokens,
    )


def planner_gap(r: Recipe, planner: ConcurrencyPlan | None) -> str:
    """Why the planner's arithmetic may miss a published ceiling: the input it lacks."""
    if r.inference.kv_cache_tokens:
        return "The planner used the measured KV cache (inference.kv_cache_tokens)."
    return (
        "The planner lacks the engines' measured KV cache (vLLM's 'GPU KV cache size: N "
        "tokens' line; set inference.kv_cache_tokens) and computes it from weights and "
        "memory alone, so it overestimates what the published run could hold."
    )


def skyrl_overrides(
    r: Recipe, *, data_train: str | None, data_val: str | None, resume: bool
) -> dict:
    ckpt, export = _paths(r)
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
        "generator.max_turns": r.agent.max_steps,
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
    o.update(_layout_overrides(r))
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


def _layout_overrides(r: Recipe) -> dict[str, Any]:
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


def _settings(
    r: Recipe, concurrency: int, tasks_dir: str, logs_dir: str, executor: str
) -> GeneratorSettings:
    from apexrl.agent.prompts import read_prompt
    from apexrl.trial.config import AgentBudgets, AgentLimits, Sampling, SandboxSettings

    ag = r.agent
    sys_p = read_prompt(ag.system_prompt, "agent.system_prompt") if ag.system_prompt else None
    extra = read_prompt(ag.extra_prompt, "agent.extra_prompt") if ag.extra_prompt else None
    return GeneratorSettings(
        system_prompt=sys_p.text if sys_p else None,
        system_prompt_sha256=sys_p.sha256 if sys_p else None,
        extra_prompt=extra.text if extra else None,
        extra_prompt_sha256=extra.sha256 if extra else None,
        tasks_dir=tasks_dir,
        logs_dir=logs_dir,
        worlds_dir=r.data.worlds_dir,
        agent=ag.agent,
        environment=ag.environment,
        model=r.model.served_name or r.model.path,
        tokenizer=r.model.tokenizer,
        chat_template=r.model.chat_template,
        judge=ag.judge,
        judge_api_base=ag.judge_api_base,
        reward=ag.reward,
        eval_nudge=ag.eval_nudge,
        budgets=AgentBudgets(
            **ag.model_dump(include=set(AgentLimits.model_fields)),
            context_window=r.batch.max_seq_len,
        ),
        eval_max_steps=ag.eval_max_steps,
        sandbox=SandboxSettings(
            cpus=ag.sandbox_cpus,
            memory_mb=ag.sandbox_memory_mb,
            timeout_s=ag.sandbox_timeout_s,
            image_profile=ag.image_profile,
        ),
        sampling=Sampling(temperature=r.algorithm.temperature),
        max_seq_len=r.batch.max_seq_len,
        eval_max_seq_len=r.batch.eval_max_seq_len,
        max_tokens_per_turn=r.batch.max_tokens_per_turn,
        concurrency=concurrency,
        rate_limit_per_s=r.rollout.rate_limit_per_s,
        session_affinity=r.rollout.session_affinity,
        trial_retries=r.rollout.trial_retries,
        executor=executor,
    )


def absolute_data_path(source: str | None, flag: str) -> str | None:
    """A dataset path the Ray job can open: URIs as given, local paths made absolute (the job
    runs in Ray's working_dir, where a relative path means nothing)."""
    from apexrl.errors import UsageError

    if not source or "://" in source:
        return source
    p = Path(source).expanduser()
    if p.is_absolute():
        return str(p)
    if p.exists():
        return str(p.resolve())
    raise UsageError(
        f"{flag} {source}: a relative path that does not exist here",
        hint="give an absolute path (as the cluster's nodes see it) or a URI (hf://, s3://)",
    )


def env_names(r: Recipe) -> list[str]:
    """Names forwarded to Ray's runtime env: the one secrets list + the recipe's extras."""
    from apexrl.secrets import SECRET_ENV_KEYS

    return list(dict.fromkeys([*SECRET_ENV_KEYS, *r.env.forward]))


def render(
    loaded: LoadedRecipe,
    *,
    data_train: str | None = None,
    data_val: str | None = None,
    model: str | None = None,
    resume: bool = False,
    executor: str = "ray",
    tasks_dir: str = "tasks",
    logs_dir: str | None = None,
    strict: bool = False,
) -> RunSpec:
    """strict: the run is being submitted (unresolved placeholders are errors)."""
    r = loaded.recipe
    if model:
        r = r.model_copy(update={"model": r.model.model_copy(update={"path": model})})
    data_train = data_train or absolute_data_path(r.data.train, "data.train")
    data_val = data_val or absolute_data_path(r.data.val, "data.val")
    planner = planner_for(r)
    if r.rollout.concurrency == "auto":
        if planner is None:
            raise BadRecordError(
                loaded.source,
                'rollout.concurrency = "auto" needs the model\'s shape',
                hint="set model.config (a config.json), a [model.arch] table, or a number",
            )
        concurrency, source = max(1, planner.concurrency), "planner"
    else:
        concurrency, source = int(r.rollout.concurrency), "recipe"
    ceiling = r.rollout.ceiling
    ceiling_warning = None
    if ceiling and concurrency > ceiling:
        if source == "planner":
            ceiling_warning = (
                f"the planner's estimate {concurrency} is above the published ceiling {ceiling} "
                f"(rollout.ceiling): using {ceiling}. {planner_gap(r, planner)}"
            )
            concurrency, source = ceiling, "ceiling"
        else:
            ceiling_warning = (
                f"rollout.concurrency {concurrency} is above the published ceiling {ceiling}"
            )
    violations, warnings = check_rules(r, concurrency)
    if ceiling_warning:
        warnings.append(ceiling_warning)
    s3 = expand_s3(r)
    if s3 and ("<" in s3 or not s3.startswith("s3://")):
        msg = f"checkpoint.s3 {r.checkpoint.s3!r} does not resolve to an s3:// URI (got {s3!r})"
        if strict:
            violations.append(Violation(rule="checkpoint", key="checkpoint.s3", message=msg))
        else:
            warnings.append(msg + ": set it before submitting")
    if violations:
        raise RecipeRuleError(loaded.source, violations)
    if planner is not None and source == "recipe" and concurrency > planner.concurrency:
        warnings.append(
            f"concurrency {concurrency} is above the planner's KV-cache estimate "
            f"{planner.concurrency} at {planner.avg_tokens:,} tokens per trajectory"
        )
    if planner is not None and ceiling and planner.concurrency > ceiling and source != "ceiling":
        warnings.append(
            f"the planner estimates {planner.concurrency} (above the published ceiling "
            f"{ceiling}). {planner_gap(r, planner)}"
        )
    overrides = skyrl_overrides(r, data_train=data_train, data_val=data_val, resume=resume)
    check_skyrl_types(overrides, loaded.source)
    ckpt, export = _paths(r)
    cl = r.cluster
    inf_gpus = 0 if r.training.colocate else cl.inference_nodes * cl.gpus_per_node
    train_gpus = cl.training_nodes * cl.gpus_per_node
    plan = RunPlan(
        inference_gpus=r.inference.engines * r.inference.tensor_parallel,
        training_gpus=train_gpus,
        total_gpus=inf_gpus + train_gpus,
        nodes=(0 if r.training.colocate else cl.inference_nodes) + cl.training_nodes,
        engines=r.inference.engines,
        gpus_per_engine=r.inference.tensor_parallel,
        concurrency=concurrency,
        concurrency_source=source,
        planner=planner,
        checkpoint_path=ckpt,
        export_path=export,
        s3=s3,
        fully_async=r.fully_async.enabled,
        warnings=warnings,
    )
    if logs_dir is None:
        logs_dir = (
            f"~/apexrl/runs/{r.resolved_run_name}/trials"
            if r.checkpoint.s3
            else str(Path(ckpt).parent / "trials")
        )
    return RunSpec(
        recipe=r.name,
        run_name=r.resolved_run_name,
        mode=r.mode,
        skyrl=overrides,
        generator=_settings(r, concurrency, tasks_dir, logs_dir, executor),
        env_forward=env_names(r),
        env_vars=dict(r.env.vars),
        data_train=data_train,
        data_val=data_val,
        resume=resume,
        plan=plan,
    )


def runtime_env(spec: RunSpec, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """Ray runtime env: forwarded variables by name (values read here, at submit time,
    and handed to Ray only; never written into run_spec.json or the manifest)."""
    environ = os.environ if environ is None else environ
    env = dict(spec.env_vars)
    for name in spec.env_forward:
        if environ.get(name):
            env[name] = environ[name]
    return {"env_vars": env}


def plan_lines(spec: RunSpec, loaded: LoadedRecipe, skyrl_check: str) -> list[str]:
    p = spec.plan
    lines = [
        f"recipe       {loaded.source} (sha256 {loaded.sha256[:12]})",
        f"chain        {' <- '.join(Path(c).stem for c in reversed(loaded.chain))}",
        f"overrides    {', '.join(loaded.overrides) or '-'}",
        f"run          {spec.run_name} ({spec.mode}, "
        f"{'fully async' if p.fully_async else 'synchronous'})",
        f"model        {spec.skyrl['trainer.policy.model.path']}",
        f"data         train={spec.data_train or '-'} val={spec.data_val or '-'}",
        f"GPUs         {p.total_gpus} on {p.nodes} node(s): inference {p.inference_gpus} "
        f"({p.engines} engines x TP{p.gpus_per_engine}), training {p.training_gpus}",
        f"concurrency  {p.concurrency} trials in flight (from {p.concurrency_source})",
    ]
    if p.planner:
        lines += ["  planner: " + x for x in p.planner.lines()]
    lines += [
        f"checkpoints  {p.checkpoint_path} (every {spec.skyrl['trainer.ckpt_interval']} steps, "
        f"keep {spec.skyrl['trainer.max_ckpts_to_keep']})",
        f"exports      {p.export_path}",
        f"S3           {p.s3 or '-'}",
        f"env          forwards {len(spec.env_forward)} names by reference (values never written)",
        f"validation   recipe rules ok; SkyRL keys ok ({skyrl_keys.snapshot()['skyrl_version']}); "
        f"{skyrl_check}",
    ]
    rows = parity_rows(spec.skyrl, loaded.recipe)
    if rows:
        lines.append("settings     recipe field -> SkyRL key = value")
        lines += [f"  {f} -> {k} = {v!r}" for f, k, v in rows]
    lines += [f"warning      {w}" for w in p.warnings]
    return lines


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
