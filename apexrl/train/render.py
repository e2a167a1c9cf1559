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


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inference_gpus: int
    training_gpus: int
    total_gpus: int
    nodes: int
    engines: int
    gpus_per_engine: int
    concurrency: int
    concurrency_source: str  # "recipe" or "planner"
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
    plan: Plan


# --- rules --------------------------------------------------------------------------------
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
        if r.algorithm.policy_loss not in ROLLOUT_LOSSES and not (
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
        bad(
            "batch",
            "training.tensor_parallel",
            f"training GPUs {train_gpus} not divisible by tp x pp x cp = {model_par}",
        )
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
    if (
        training
        and tr.strategy == "megatron"
        and train_gpus % (tr.pipeline_parallel * tr.expert_parallel)
    ):
        bad(
            "batch",
            "training.expert_parallel",
            f"training GPUs {train_gpus} not divisible by pp x ep = "
            f"{tr.pipeline_parallel * tr.expert_parallel}",
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
        "trainer.placement.policy_num_nodes": max(r.cluster.training_nodes, 1),
        "trainer.placement.policy_num_gpus_per_node": r.cluster.gpus_per_node,
        "trainer.placement.ref_num_nodes": max(r.cluster.training_nodes, 1),
        "trainer.placement.ref_num_gpus_per_node": r.cluster.gpus_per_node,
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
    if tr.strategy == "megatron":
        for role in ("policy", "ref"):
            m = f"trainer.{role}.megatron_config."
            o[m + "tensor_model_parallel_size"] = tr.tensor_parallel
            o[m + "pipeline_model_parallel_size"] = tr.pipeline_parallel
            o[m + "context_parallel_size"] = tr.context_parallel
            o[m + "expert_model_parallel_size"] = tr.expert_parallel
    if data_train:
        o["data.train_data"] = [data_train]
    if data_val:
        o["data.val_data"] = [data_val]
    else:
        o["data.val_data"] = []
        o["trainer.eval_interval"] = -1
        o["trainer.eval_before_train"] = False
    o.update(r.skyrl)  # raw pass-through wins
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


def validate_with_skyrl(overrides: dict, where: str, *, check_batches: bool = True) -> str:
    """Build SkyRL's own SkyRLTrainConfig from the overrides; returns SkyRL's version.

    Raises BadRecordError with SkyRL's message when SkyRL rejects the config.
    """
    from importlib.metadata import version

    from skyrl.train.config import SkyRLTrainConfig

    try:
        cfg = SkyRLTrainConfig.from_cli_overrides(dict(overrides))
    except (ValueError, TypeError, AssertionError) as e:
        raise BadRecordError(where, f"SkyRL rejects the rendered config: {e}") from None
    if check_batches:
        try:
            from skyrl.train.utils.utils import validate_batch_sizes
        except ImportError:  # SkyRL without its training extras: config classes only
            return version("skyrl")
        try:
            validate_batch_sizes(cfg)
        except (ValueError, AssertionError, ZeroDivisionError) as e:
            raise BadRecordError(where, f"SkyRL rejects the batch sizes: {e}") from None
    return version("skyrl")


def _settings(
    r: Recipe, concurrency: int, tasks_dir: str, logs_dir: str, executor: str
) -> GeneratorSettings:
    from apexrl.agent.prompts import read_prompt
    from apexrl.trial.config import AgentBudgets, Sampling, SandboxSettings

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
            max_steps=ag.max_steps,
            agent_timeout_s=ag.agent_timeout_s,
            tool_timeout_s=ag.tool_timeout_s,
            llm_timeout_s=ag.llm_timeout_s,
            tool_result_max_chars=ag.tool_result_max_chars,
            max_tool_call_repairs=ag.max_tool_call_repairs,
            nudge_ratio=ag.nudge_ratio,
            context_window=r.batch.max_seq_len,
            nudge=ag.nudge,
            outcome_policy=ag.outcome_policy,
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
    data_train = data_train or r.data.train
    data_val = data_val or r.data.val
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
    violations, warnings = check_rules(r, concurrency)
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
    overrides = skyrl_overrides(r, data_train=data_train, data_val=data_val, resume=resume)
    check_skyrl_types(overrides, loaded.source)
    ckpt, export = _paths(r)
    cl = r.cluster
    inf_gpus = 0 if r.training.colocate else cl.inference_nodes * cl.gpus_per_node
    train_gpus = cl.training_nodes * cl.gpus_per_node
    plan = Plan(
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
    lines += [f"warning      {w}" for w in p.warnings]
    return lines
