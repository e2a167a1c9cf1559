"""Training recipes: versioned TOML files, inheritance, `--set` overrides, strict keys.

A recipe is a TOML file (recipes/*.toml). `extends = "other"` names a recipe it
builds on (a shipped name, or a path relative to the extending file); tables are
merged key by key, the extending file wins, lists are replaced whole. After
merging, `--set key.path=value` overrides apply in order (the value is read as a
TOML value: `8`, `1e-6`, `true`, `"text"`, `[1, 2]`; anything that does not parse
is a plain string). Every key is checked: an unknown key is an error that names
the key and the closest valid one.

The `[skyrl]` table passes raw SkyRL config key paths through (for anything the
recipe sections do not cover); those keys are checked against SkyRL's own key
list (apexrl.train.skyrl_keys).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from apexrl.agent.budgets import RENAMED_RECIPE_KEYS, budget
from apexrl.agent.settings import AgentLimits
from apexrl.envs.registry import runtime_supported
from apexrl.errors import BadRecordError, UsageError
from apexrl.tito import sampling
from apexrl.trial.config import AgentName, EnvironmentName


def _recipes_dir() -> Path:
    """The shipped recipes: apexrl/recipes/ in an installed package (setup.py copies them
    there), else recipes/ at the top of the source tree (a checkout, an editable install)."""
    pkg = Path(__file__).resolve().parents[1]
    installed = pkg / "recipes"
    return installed if installed.is_dir() else pkg.parent / "recipes"


RECIPES_DIR = _recipes_dir()


class _S(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelArch(_S):
    """What the KV-cache planner needs when no config.json is at hand (see plan.py)."""

    num_hidden_layers: int
    num_key_value_heads: int
    head_dim: int
    full_attention_layers: int | None = None  # hybrid models: layers with a KV cache
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_num_key_heads: int | None = None
    linear_conv_kernel_dim: int | None = None
    params_b: float  # total parameters, billions (all experts: they all stay resident)
    dtype_bytes: int = 2


class ModelSection(_S):
    path: str
    served_name: str | None = None
    tokenizer: str | None = None
    chat_template: str | None = None
    config: str | None = None  # config.json for the planner (default: <path>/config.json)
    arch: ModelArch | None = None
    # multimodal checkpoints: train and serve the language model only (policy, ref and engine)
    language_model_only: bool | None = None


class DataSection(_S):
    train: str | None = None  # Parquet dataset (apexrl tasks pack) or Harbor task dirs folder
    val: str | None = None
    worlds_dir: str | None = None
    images: str | None = None  # images.jsonl (world_id -> ref@digest)


class ClusterSection(_S):
    gpus_per_node: int = 8
    gpu_memory_gb: float = 141.0  # H200
    inference_nodes: int = 1
    training_nodes: int = 1


class InferenceSection(_S):
    engines: int = 1
    tensor_parallel: int = 1
    expert_parallel: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 32768  # vLLM max_model_len
    backend: Literal["vllm"] = "vllm"
    # None: SkyRL's default. Rendered into generator.inference_engine.* (see render.py).
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    gdn_prefill_backend: str | None = None  # vLLM engine arg for Gated DeltaNet models
    router_policy: str | None = None  # SkyRL's router: e.g. sticky_least_loaded
    prefix_cache_salt: bool | None = None  # salt the prefix cache with the weight version
    # measured KV cache per engine ("GPU KV cache size: N tokens" in a vLLM engine's log):
    # when set, the concurrency planner uses it instead of its memory arithmetic
    kv_cache_tokens: int | None = None


class TrainingSection(_S):
    strategy: Literal["megatron", "fsdp"] = "fsdp"
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    context_parallel: int = 1
    expert_parallel: int = 1
    # None: Megatron uses tensor_parallel for the experts too (world must divide etp x ep x pp)
    expert_tensor_parallel: int | None = None
    colocate: bool = False
    lr: float = 1e-6
    # None: SkyRL's default. Rendered into trainer.* (see render.py).
    adam_betas: list[float] | None = None
    weight_decay: float | None = None
    max_grad_norm: float | None = None
    sample_packing: bool | None = None  # trainer.remove_microbatch_padding
    max_tokens_per_microbatch: int | None = None
    fused_lm_head_logprob: bool | None = None
    optimizer_cpu_offload: bool | None = None  # Megatron: optimizer state in host memory
    optimizer_offload_fraction: float = 1.0
    empty_cuda_cache: bool | None = None
    max_steps: int | None = None
    epochs: int = 1
    micro_batch_per_gpu: int = 1
    seed: int = 42
    # skyrl: SkyRL's trainer on Ray (GPU); jax: LoRA steps on this machine's CPU with
    # SkyRL's JAX backend (apexrl.train.jaxrl; the [jax] section)
    backend: Literal["skyrl", "jax"] = "skyrl"


class AlgorithmSection(_S):
    advantage: str = "grpo"
    policy_loss: str = "dppo"
    dppo_type: Literal["binary_tv", "binary_kl"] = "binary_tv"
    dppo_delta_low: float = 0.15
    dppo_delta_high: float = 0.15
    loss_reduction: str = "prompt_mean"
    grpo_norm_by_std: bool = False
    use_kl: bool = False
    eps_clip_low: float = 0.5
    eps_clip_high: float = 4.0
    zero_variance_filter: bool = True
    temperature: float = sampling.TEMPERATURE


class BatchSection(_S):
    train_batch_size: int = 16  # prompts per step
    mini_batch_size: int = 16
    n_samples: int = 16  # trajectories per prompt (GRPO group)
    max_seq_len: int = 32768  # one trajectory's token budget (prompt + all turns)
    max_prompt_length: int = 8192
    max_tokens_per_turn: int = 8192
    eval_max_seq_len: int | None = None  # eval phase context (default: max_seq_len)
    eval_n_samples: int = 1
    eval_batch_size: int = 64


class JaxSection(_S):
    """training.backend = "jax": the LoRA adapter SkyRL's JAX backend trains on CPU."""

    lora_rank: int = 8
    lora_alpha: float = 16.0
    train_attn: bool = True
    train_mlp: bool = True
    train_unembed: bool = False  # LoRA on the output layer (needs untied embeddings)
    micro_batch: int = 8  # sequences per forward/backward pass (gradients accumulate)


class SftSection(_S):
    """`apexrl train sft`: the supervised warm start on the passed trials of eval runs
    (cross-entropy on the model's own tokens; apexrl.train.jaxrl.sft on CPU)."""

    lr: float = 1e-4
    epochs: int = Field(1, ge=1)  # passes over the kept trials (max_steps, when set, wins)
    max_steps: int | None = Field(None, ge=1)
    batch_size: int = Field(8, ge=1)  # trajectories per optimizer step
    seed: int = 0  # the order of the trajectories in each epoch
    max_seq_len: int | None = Field(None, ge=2)  # longer streams are cut (None: kept whole)
    weight_decay: float = 0.0
    warmup_steps: int = Field(0, ge=0)  # lr rises linearly over the first steps (0: none)


class AsyncSection(_S):
    enabled: bool = False
    max_staleness: int = 3
    generation_workers: int = 64
    sample_full_batch: bool | None = None


class AgentSection(AgentLimits):  # type: ignore[misc, valid-type]
    """The trial settings of a recipe. The budgets (max_steps, timeouts, nudge, ...) are
    AgentLimits' fields, from the one budget table apexrl.agent.budgets.BUDGETS."""

    agent: AgentName = "apexrl"
    environment: EnvironmentName = "local"
    # agent steps per eval trial ([agent].max_turns: per training trial)
    eval_max_turns: int = budget("max_steps").eval_value
    judge: str | None = None  # a LiteLLM model, "none" (free-text criteria unjudged), or unset
    judge_api_base: str | None = None  # OpenAI-compatible server for openai/<name>
    grader: Literal["apexrl", "archipelago"] = "apexrl"  # archipelago: its own grading runner
    archipelago: str | None = None  # the archipelago checkout (default: $APEXRL_ARCHIPELAGO)
    # whose MCP servers serve the worlds: apexrl's, or the checkout's own (local env only)
    runtime: Literal["apexrl", "archipelago"] = "apexrl"
    grader_options: list[str] = []  # apexrl.grading.grader.GRADER_OPTIONS names
    # the world's tools the agent is offered, by name (unset: all it lists)
    tools: list[str] | None = None
    reward: Literal["score", "pass"] = "score"  # the recipe trains on the fraction met
    eval_nudge: Literal["recipe", "once", "off"] = "off"  # the recipe's eval: off
    # remote sandboxes (environment = "modal"): None is Modal's default; the recipe
    # ran 2 CPUs, 4096 MB, 6000 s. image_profile: apexrl | mercor (default: per task)
    sandbox_cpus: float | None = None
    sandbox_memory_mb: int | None = None
    sandbox_timeout_s: int | None = None
    image_profile: str | None = None
    system_prompt: str | None = None  # file with the system prompt (default: apexrl's)
    extra_prompt: str | None = None  # file appended to every task instruction
    # "recipe:PATH": both prompts read from a checkout of the recipe (its training extra
    # prompt; its eval one in an eval recipe), apexrl.agent.recipe_prompts
    prompts: str | None = None

    @model_validator(mode="after")
    def _runtime_runs_locally(self) -> AgentSection:
        if not runtime_supported(self.runtime, self.environment):
            raise ValueError(
                'runtime = "archipelago" runs archipelago\'s servers in the local '
                f'sandbox; environment = {self.environment!r} cannot (use "local")'
            )
        return self


class RolloutSection(_S):
    concurrency: int | Literal["auto"] = "auto"  # trials in flight across the cluster
    # a ceiling the recipe's authors published or measured: `auto` never goes above it, and
    # a number above it is warned about
    ceiling: int | None = None
    # expected trajectory length, for the planner (docs/facts.md section 8)
    avg_tokens: int = 101_441
    rate_limit_per_s: float = 0.0  # trial starts per second; 0 = unlimited
    session_affinity: bool = True
    trial_retries: int = 2  # reruns of trials whose sandbox failed to start
    # where trials run (apexrl.train.generator): "ray" tasks on the cluster (unset: the
    # launcher's choice, ray for a submitted job), one "process" per trial, "shards" (K
    # long-lived worker processes, many trials per event loop), "inline" (tests)
    executor: Literal["ray", "process", "shards", "inline"] | None = None
    shards: int = Field(0, ge=0)  # executor "shards": worker processes (0: one per CPU)
    # the event loops that carry many trials (apexrl.tito.workers, apexrl.agent.runtime):
    # threads that tokenize off the loop (0: one per core but one, 1-4), their niceness
    # above the loop's (0: the same priority), the cyclic GC ("tuned": startup heap frozen,
    # rarer full collections; "default": Python's)
    tokenize_threads: int = Field(0, ge=0)
    tokenize_nice: int = Field(10, ge=0, le=19)
    loop_gc: Literal["tuned", "default"] = "tuned"


class CheckpointSection(_S):
    interval: int = 5
    keep: int = 5
    path: str = "runs/{run_name}/ckpts"
    export_path: str = "runs/{run_name}/exports"
    s3: str | None = None  # s3://bucket/prefix: checkpoints go there (required for 397B)
    hf_save_interval: int = -1


class EnvSection(_S):
    forward: list[str] = Field(default_factory=list)  # extra names to forward (besides secrets)
    vars: dict[str, str] = Field(default_factory=dict)  # non-secret plain values


class LoggingSection(_S):
    logger: str = "console"
    project: str = "apexrl"
    eval_interval: int = 5
    eval_before_train: bool = False


class Recipe(_S):
    name: str
    description: str = ""
    extends: str | None = None
    mode: Literal["train", "eval"] = "train"
    run_name: str | None = None
    model: ModelSection
    data: DataSection = Field(default_factory=DataSection)
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    inference: InferenceSection = Field(default_factory=InferenceSection)
    training: TrainingSection = Field(default_factory=TrainingSection)
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection)
    batch: BatchSection = Field(default_factory=BatchSection)
    fully_async: AsyncSection = Field(default_factory=AsyncSection, alias="async")
    agent: AgentSection = Field(default_factory=AgentSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    env: EnvSection = Field(default_factory=EnvSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    jax: JaxSection = Field(default_factory=JaxSection)
    sft: SftSection | None = None  # `apexrl train sft` (the supervised warm start)
    skyrl: dict[str, Any] = Field(default_factory=dict)  # raw SkyRL key paths (flattened)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @property
    def resolved_run_name(self) -> str:
        return self.run_name or self.name


class LoadedRecipe(BaseModel):
    """A recipe after inheritance and overrides, with where it came from."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    recipe: Recipe
    source: str  # path of the top recipe file
    chain: list[str]  # files merged, base first
    overrides: list[str]  # --set arguments, in order
    merged: dict[str, Any]  # the merged tree (before model validation)
    sha256: str  # hash of the merged tree (canonical JSON): identifies what runs
    # renamed keys read under their old name (the file or --set to update)
    deprecations: list[str] = Field(default_factory=list)


# --- the key tree -------------------------------------------------------------------------
def _section_fields(model: type[BaseModel]) -> dict[str, Any]:
    """Field names (aliases where set) -> sub-model or None."""
    out: dict[str, Any] = {}
    for name, f in model.model_fields.items():
        key = f.alias or name
        ann = f.annotation
        sub = None
        for cand in (ann, *getattr(ann, "__args__", ())):
            if isinstance(cand, type) and issubclass(cand, BaseModel):
                sub = cand
        out[key] = sub
    return out


def valid_key_paths() -> list[str]:
    """Every key path a recipe may set (skyrl.* paths come from SkyRL's key list)."""
    paths: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for key, sub in _section_fields(model).items():
            path = prefix + key
            paths.append(path)
            if sub is not None:
                walk(sub, path + ".")

    walk(Recipe, "")
    from apexrl.train import skyrl_keys

    paths.extend("skyrl." + k for k in skyrl_keys.key_types())
    return paths


def closest_key(path: str) -> str | None:
    """The valid key path nearest to `path` (same depth preferred)."""
    cands = valid_key_paths()
    best = difflib.get_close_matches(path, cands, n=1, cutoff=0.5)
    if best:
        return best[0]
    leaf = path.rsplit(".", 1)[-1]
    by_leaf = {p.rsplit(".", 1)[-1]: p for p in cands}
    m = difflib.get_close_matches(leaf, list(by_leaf), n=1, cutoff=0.6)
    return by_leaf[m[0]] if m else None


def _unknown(where: str, path: str) -> BadRecordError:
    near = closest_key(path)
    hint = f"did you mean `{near}`?" if near else "see `apexrl train --help` and recipes/*.toml"
    return BadRecordError(where, f"unknown key `{path}`", hint=hint)


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_keys(tree: dict, where: str) -> None:
    """Raise for the first unknown key in a recipe tree."""

    def walk(d: dict, model: type[BaseModel], prefix: str) -> None:
        fields = _section_fields(model)
        for key, value in d.items():
            path = prefix + key
            if key not in fields:
                raise _unknown(where, path)
            if key == "skyrl" and not prefix:
                if not isinstance(value, dict):
                    raise BadRecordError(where, "`skyrl` must be a table of SkyRL key paths")
                check_skyrl_keys(value, where)
                continue
            sub = fields[key]
            if sub is not None and isinstance(value, dict):
                walk(value, sub, path + ".")

    walk(tree, Recipe, "")


def check_skyrl_keys(table: dict, where: str) -> None:
    from apexrl.train import skyrl_keys

    for path, value in _flatten(table).items():
        kind = skyrl_keys.lookup(path)
        if kind is None:
            raise _unknown(where, "skyrl." + path)
        if not skyrl_keys.type_ok(kind, value):
            raise BadRecordError(
                where,
                f"`skyrl.{path}` = {value!r}: SkyRL expects {kind}",
                hint="fix the value's type in the recipe or the --set argument",
            )


# --- loading ------------------------------------------------------------------------------
def resolve_recipe_path(spec: str | Path, relative_to: Path | None = None) -> Path:
    """A recipe file from a path, or a shipped recipe name (`smoke-1gpu`)."""
    p = Path(spec)
    cands = []
    if relative_to is not None and not p.is_absolute():
        cands += [relative_to / p, relative_to / f"{p}.toml"]
    cands += [p, Path(f"{p}.toml"), RECIPES_DIR / p.name, RECIPES_DIR / f"{p.name}.toml"]
    for c in cands:
        if c.is_file():
            return c.resolve()
    shipped = ", ".join(sorted(x.stem for x in RECIPES_DIR.glob("*.toml")))
    raise UsageError(f"recipe not found: {spec}", hint=f"a path, or one of: {shipped}")


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise BadRecordError(str(path), f"not valid TOML: {e}") from None


def deep_merge(base: dict, top: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _rename_old_keys(tree: dict, where: str, notes: list[str]) -> dict:
    """[agent] keys read under their old name (apexrl.agent.budgets.RENAMED_RECIPE_KEYS):
    renamed in the tree (so the recipe's hash does not depend on the spelling), with a
    note; both spellings at once is an error."""
    agent = tree.get("agent")
    if not isinstance(agent, dict):
        return tree
    for old, new in RENAMED_RECIPE_KEYS.items():
        if old not in agent:
            continue
        if new in agent:
            raise BadRecordError(
                where, f"`agent.{old}` and `agent.{new}` both set", hint=f"keep `agent.{new}`"
            )
        agent[new] = agent.pop(old)
        notes.append(
            f"{where}: `agent.{old}` is deprecated (agent steps, not optimizer steps): "
            f"rename it `agent.{new}`"
        )
    return tree


def _load_chain(path: Path, seen: list[Path], notes: list[str]) -> tuple[dict, list[str]]:
    if path in seen:
        cycle = " -> ".join(str(p.name) for p in [*seen, path])
        raise BadRecordError(str(path), f"recipe inheritance cycle: {cycle}")
    tree = _rename_old_keys(_read_toml(path), str(path), notes)
    check_keys(tree, str(path))
    parent = tree.get("extends")
    if not parent:
        return tree, [str(path)]
    base_path = resolve_recipe_path(parent, relative_to=path.parent)
    base, chain = _load_chain(base_path, [*seen, path], notes)
    merged = deep_merge(base, tree)
    return merged, [*chain, str(path)]


def parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_set(tree: dict, arg: str, notes: list[str] | None = None) -> dict:
    """Apply one `key.path=value` override to a recipe tree (returns a new tree)."""
    if "=" not in arg:
        raise UsageError(
            f"--set {arg!r}: expected key.path=value", hint="e.g. --set batch.n_samples=8"
        )
    key, _, raw = arg.partition("=")
    key = key.strip()
    if key.startswith("+"):
        raise UsageError(f"--set {arg!r}: no `+` prefix; every key must already exist")
    value = parse_value(raw.strip())
    parts = key.split(".")
    if parts[0] == "skyrl":
        sub = ".".join(parts[1:])
        check_skyrl_keys({sub: value}, f"--set {key}")
        out = copy.deepcopy(tree)
        table = out.setdefault("skyrl", {})
        # keep [skyrl] flat-or-nested agnostic: store the dotted key flat
        flat = _flatten(table)
        flat[sub] = value
        out["skyrl"] = flat
        return out
    nested: dict = {}
    cur = nested
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    nested = _rename_old_keys(nested, f"--set {key}", [] if notes is None else notes)
    check_keys(nested, f"--set {key}")
    return deep_merge(tree, nested)


def canonical_hash(tree: dict) -> str:
    import orjson

    return hashlib.sha256(orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _set_of(overrides, loc: str) -> str | None:
    """The last --set argument that wrote key path `loc` (or a key under it), if any."""
    for arg in reversed(list(overrides)):
        key = arg.partition("=")[0].strip()
        if key == loc or loc.startswith(key + ".") or key.startswith(loc + "."):
            return arg
    return None


def load_recipe(spec: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> LoadedRecipe:
    path = resolve_recipe_path(spec)
    notes: list[str] = []
    tree, chain = _load_chain(path, [], notes)
    for arg in overrides:
        tree = apply_set(tree, arg, notes)
    tree.pop("extends", None)
    if isinstance(tree.get("skyrl"), dict):
        tree["skyrl"] = _flatten(tree["skyrl"])
    try:
        recipe = Recipe.model_validate(tree)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        blamed = _set_of(overrides, loc)
        if blamed is not None:  # the value came from the command line, not the recipe
            raise UsageError(
                f"--set {blamed}: `{loc}`: {err['msg']}",
                hint=f"fix the value after `{loc}=` (the recipe {path.name} is not at fault)",
            ) from None
        raise BadRecordError(str(path), f"`{loc}`: {err['msg']}") from None
    return LoadedRecipe(
        recipe=recipe,
        source=str(path),
        chain=chain,
        overrides=list(overrides),
        merged=tree,
        sha256=canonical_hash(tree),
        deprecations=list(dict.fromkeys(notes)),
    )
