"""Recipe -> run spec: SkyRL config overrides, generator settings, env, the plan.

`render(loaded)` checks the recipe rules (always; `apexrl.train.rules`), renders SkyRL's
configuration as `key.path=value` overrides (`apexrl.train.skyrl_config`: every key
checked against SkyRL's key list, and against SkyRL's own config classes when SkyRL is
importable: `validate_with_skyrl`), the generator settings, the runtime env (secret
names only, never values) and a plan to print (GPUs, concurrency from the KV planner).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from apexrl.errors import BadRecordError
from apexrl.train import skyrl_keys
from apexrl.train.concurrency import ConcurrencyPlan, load_shape, plan_concurrency, shape_from_arch
from apexrl.train.generator import GeneratorSettings
from apexrl.train.recipe import LoadedRecipe, Recipe
from apexrl.train.rules import (
    RecipeRuleError,
    Violation,
    check_rules,
    megatron_layout_violations,
    skyrl_layout,
)
from apexrl.train.skyrl_config import (
    check_skyrl_types,
    checkpoint_paths,
    expand_s3,
    parity_rows,
    skyrl_available,
    skyrl_overrides,
    validate_with_skyrl,
)
from apexrl.trial.config import TrialSpec

# Callers import these from here too (cli/train.py, the train tier's tests).
__all__ = [
    "RunPlan",
    "RecipeRuleError",
    "RunSpec",
    "Violation",
    "absolute_data_path",
    "check_rules",
    "megatron_layout_violations",
    "parity_rows",
    "plan_lines",
    "render",
    "runtime_env",
    "skyrl_available",
    "skyrl_layout",
    "trial_spec_from_recipe",
    "validate_with_skyrl",
]

SPEC_SCHEMA_VERSION = "1"


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


# --- planning ----------------------------------------------------------------------------
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


def recipe_prompt_pair(spec: str, ag, eval_mode: bool):
    """agent.prompts = "recipe:PATH": the recipe checkout's system and extra prompts."""
    from apexrl.agent.recipe_prompts import parse_spec, recipe_prompts
    from apexrl.errors import UsageError

    root = parse_spec(spec)
    if root is None:
        raise UsageError(f"agent.prompts = {spec!r}: expected recipe:PATH")
    if ag.system_prompt or ag.extra_prompt:
        raise UsageError("agent.prompts excludes agent.system_prompt and agent.extra_prompt")
    return recipe_prompts(root, "eval" if eval_mode else "train")


def trial_spec_from_recipe(r: Recipe) -> TrialSpec:
    """The one place a recipe becomes a TrialSpec (how its trials run), for both training
    backends (this render for SkyRL on Ray, apexrl.train.jaxrl.grpo for JAX): agent,
    environment, judge, reward, budgets (context window: batch.max_seq_len), sampling
    (algorithm.temperature) and the sandbox (agent.sandbox_*)."""
    from apexrl.agent.budgets import budgets_from_recipe
    from apexrl.trial.config import AgentBudgets, Sampling, SandboxSettings

    ag = r.agent
    return TrialSpec(
        agent=ag.agent,
        environment=ag.environment,
        worlds_dir=r.data.worlds_dir,
        tokenizer=r.model.tokenizer,
        chat_template=r.model.chat_template,
        judge=ag.judge,
        judge_api_base=ag.judge_api_base,
        reward=ag.reward,
        grader=ag.grader,
        archipelago=ag.archipelago,
        runtime=ag.runtime,
        grader_options=list(ag.grader_options),
        tools=list(ag.tools) if ag.tools is not None else None,
        budgets=AgentBudgets(
            **budgets_from_recipe(ag),
            context_window=r.batch.max_seq_len,
        ),
        sampling=Sampling(temperature=r.algorithm.temperature),
        sandbox=SandboxSettings(
            cpus=ag.sandbox_cpus,
            memory_mb=ag.sandbox_memory_mb,
            timeout_s=ag.sandbox_timeout_s,
            image_profile=ag.image_profile,
        ),
    )


def generator_settings(
    r: Recipe, concurrency: int, tasks_dir: str, logs_dir: str, executor: str | None
) -> GeneratorSettings:
    """The generator's settings: the recipe's TrialSpec (trial_spec_from_recipe), its
    prompts, and the training side (sequence lengths, concurrency, executor)."""
    from apexrl.agent.prompts import read_prompt

    ag = r.agent
    sys_p = read_prompt(ag.system_prompt, "agent.system_prompt") if ag.system_prompt else None
    extra = read_prompt(ag.extra_prompt, "agent.extra_prompt") if ag.extra_prompt else None
    if ag.prompts:
        sys_p, extra = recipe_prompt_pair(ag.prompts, ag, r.mode == "eval")
    spec = trial_spec_from_recipe(r)
    return GeneratorSettings(
        **{k: getattr(spec, k) for k in TrialSpec.model_fields},
        system_prompt=sys_p.text if sys_p else None,
        system_prompt_sha256=sys_p.sha256 if sys_p else None,
        extra_prompt=extra.text if extra else None,
        extra_prompt_sha256=extra.sha256 if extra else None,
        tasks_dir=tasks_dir,
        logs_dir=logs_dir,
        model=r.model.served_name or r.model.path,
        eval_nudge=ag.eval_nudge,
        eval_max_steps=ag.eval_max_turns,
        max_seq_len=r.batch.max_seq_len,
        eval_max_seq_len=r.batch.eval_max_seq_len,
        max_tokens_per_turn=r.batch.max_tokens_per_turn,
        concurrency=concurrency,
        rate_limit_per_s=r.rollout.rate_limit_per_s,
        session_affinity=r.rollout.session_affinity,
        trial_retries=r.rollout.trial_retries,
        executor=executor or r.rollout.executor or "ray",
        shards=r.rollout.shards,
        tokenize_threads=r.rollout.tokenize_threads,
        tokenize_nice=r.rollout.tokenize_nice,
        loop_gc=r.rollout.loop_gc,
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
    executor: str | None = None,
    tasks_dir: str = "tasks",
    logs_dir: str | None = None,
    strict: bool = False,
) -> RunSpec:
    """strict: the run is being submitted (unresolved placeholders are errors).
    executor: where trials run; None: the recipe's `rollout.executor`, else "ray"."""
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
    ckpt, export = checkpoint_paths(r)
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
        generator=generator_settings(r, concurrency, tasks_dir, logs_dir, executor),
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
