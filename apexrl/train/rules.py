"""Recipe rules: what SkyRL and the cluster need of a recipe, checked before anything runs.

Each rule is a named check `(recipe, findings) -> None` that adds violations (the run
cannot work) and warnings (it can, but probably not as meant) to `Findings`; `RULES`
lists them in the order their findings are reported, and `check_rules` runs them all.
A violation names the rule, the recipe key to change and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from apexrl.errors import ApexError
from apexrl.train.recipe import Recipe
from apexrl.train.skyrl_config import layout_overrides

ROLLOUT_LOSSES = {"dppo", "rollout_is"}  # optimize against rollout logprobs (+ cispo@rollout)
# SkyRL 0.4.0's registered policy losses: the fully-async rule judges these; any other name is
# left to SkyRL's validate_cfg, whose message names the valid ones
SKYRL_POLICY_LOSSES = {
    "regular", "dual_clip", "gspo", "sapo", "cispo", "rollout_is", "dppo", "clip_cov",
    "kl_cov", "cross_entropy", "importance_sampling",
}  # fmt: skip


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


@dataclass
class Findings:
    """What the rules found. `concurrency`: the trials in flight the run will use (None:
    not decided yet)."""

    concurrency: int | None = None
    violations: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def bad(self, rule: str, key: str, message: str) -> None:
        self.violations.append(Violation(rule=rule, key=key, message=message))

    def warn(self, message: str) -> None:
        self.warnings.append(message)


def _training(r: Recipe) -> bool:
    return r.mode == "train"


# --- the rules ------------------------------------------------------------------------------


def check_fully_async(r: Recipe, out: Findings) -> None:
    """Fully async training: one mini-batch per step, no colocation, a rollout-logprob loss,
    generation workers within SkyRL's bounds, a non-batched generator."""
    b, a = r.batch, r.fully_async
    if not (_training(r) and a.enabled):
        return
    if b.train_batch_size != b.mini_batch_size:
        out.bad(
            "fully-async",
            "batch.mini_batch_size",
            f"fully async needs train_batch_size == mini_batch_size "
            f"({b.train_batch_size} != {b.mini_batch_size})",
        )
    if r.training.colocate:
        out.bad(
            "fully-async",
            "training.colocate",
            "fully async cannot colocate training and inference",
        )
    if r.algorithm.policy_loss in SKYRL_POLICY_LOSSES - ROLLOUT_LOSSES and not (
        r.algorithm.policy_loss == "cispo"
        and r.skyrl.get("trainer.algorithm.cispo.cispo_anchor") == "rollout"
    ):
        out.bad(
            "fully-async",
            "algorithm.policy_loss",
            f"`{r.algorithm.policy_loss}` recomputes old logprobs; fully async needs a "
            "rollout-logprob loss (dppo, rollout_is, or cispo with cispo_anchor=rollout)",
        )
    lo, hi = b.mini_batch_size, b.mini_batch_size * (a.max_staleness + 1)
    if not lo <= a.generation_workers <= hi:
        out.bad(
            "fully-async",
            "async.generation_workers",
            f"{a.generation_workers} must be within [mini_batch_size, mini_batch_size x "
            f"(max_staleness + 1)] = [{lo}, {hi}]",
        )
    if r.skyrl.get("generator.batched"):
        out.bad(
            "fully-async",
            "skyrl.generator.batched",
            "fully async needs a non-batched generator",
        )


def check_batch_split(r: Recipe, out: Findings) -> None:
    """Batches divide: train batch into mini-batches, trajectories over data-parallel ranks,
    each rank's share into micro-batches."""
    b, tr, cl = r.batch, r.training, r.cluster
    if not _training(r):
        return
    if b.train_batch_size % b.mini_batch_size:
        out.bad(
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
    if train_gpus < 1:
        out.bad("gpus", "cluster.training_nodes", "training needs at least one node")
        return
    if train_gpus % model_par:
        return  # reported by the layout rule (megatron_layout_violations)
    dp = train_gpus // model_par
    seqs = b.mini_batch_size * b.n_samples
    if seqs % dp:
        out.bad(
            "batch",
            "batch.mini_batch_size",
            f"mini_batch_size x n_samples = {seqs} trajectories do not split evenly over "
            f"{dp} data-parallel ranks",
        )
    elif (seqs // dp) % tr.micro_batch_per_gpu:
        out.bad(
            "batch",
            "training.micro_batch_per_gpu",
            f"{seqs // dp} trajectories per rank not divisible by {tr.micro_batch_per_gpu}",
        )


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
    o = {k: v for k, v in layout_overrides(r).items()}
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


def check_megatron_layout(r: Recipe, out: Findings) -> None:
    """Megatron's parallel sizes fit the training GPUs; layers split over pipeline stages."""
    tr = r.training
    if not (_training(r) and tr.strategy == "megatron"):
        return
    out.violations.extend(megatron_layout_violations(skyrl_layout(r), r))
    arch = r.model.arch
    if arch and arch.num_hidden_layers % tr.pipeline_parallel:
        out.warn(
            f"{arch.num_hidden_layers} layers do not split evenly over pipeline_parallel "
            f"{tr.pipeline_parallel} stages (Megatron needs an uneven-split setting)"
        )


def check_inference_gpus(r: Recipe, out: Findings) -> None:
    """Each engine's GPUs (its tensor parallel size) fit the nodes; the engines fit the
    inference GPUs declared."""
    inf, cl = r.inference, r.cluster
    per_engine = inf.tensor_parallel
    if per_engine > cl.gpus_per_node and per_engine % cl.gpus_per_node:
        out.bad(
            "gpus",
            "inference.tensor_parallel",
            f"an engine of {per_engine} GPUs must span whole nodes of {cl.gpus_per_node}",
        )
    if per_engine <= cl.gpus_per_node and cl.gpus_per_node % per_engine:
        out.bad(
            "gpus",
            "inference.tensor_parallel",
            f"tp {per_engine} does not divide {cl.gpus_per_node} GPUs per node",
        )
    nodes = cl.training_nodes if r.training.colocate else cl.inference_nodes
    inf_gpus = nodes * cl.gpus_per_node
    if inf.engines * per_engine > inf_gpus:
        out.bad(
            "gpus",
            "inference.engines",
            f"{inf.engines} engines x tp {per_engine} = {inf.engines * per_engine} GPUs, "
            f"but {inf_gpus} inference GPUs are declared",
        )
    elif inf.engines * per_engine < inf_gpus:
        out.warn(f"{inf_gpus - inf.engines * per_engine} inference GPUs left idle")
    if inf.expert_parallel > 1 and per_engine % inf.expert_parallel:
        out.bad(
            "gpus",
            "inference.expert_parallel",
            "expert parallel size must divide the engine's GPUs",
        )


def check_context(r: Recipe, out: Findings) -> None:
    """Sequence, prompt and per-turn lengths fit the engine's context."""
    b, inf = r.batch, r.inference
    if b.max_seq_len > inf.max_model_len:
        out.bad(
            "context",
            "batch.max_seq_len",
            f"{b.max_seq_len} exceeds the engine's max_model_len {inf.max_model_len}",
        )
    if b.eval_max_seq_len and b.eval_max_seq_len > inf.max_model_len:
        out.bad(
            "context",
            "batch.eval_max_seq_len",
            f"{b.eval_max_seq_len} exceeds the engine's max_model_len {inf.max_model_len}",
        )
    if b.max_prompt_length >= b.max_seq_len:
        out.bad("context", "batch.max_prompt_length", "must be below batch.max_seq_len")
    if b.max_tokens_per_turn > b.max_seq_len:
        out.bad("context", "batch.max_tokens_per_turn", "must not exceed batch.max_seq_len")
    if r.rollout.avg_tokens > b.max_seq_len:
        out.warn(
            f"rollout.avg_tokens {r.rollout.avg_tokens} > max_seq_len {b.max_seq_len}: the "
            "planner uses max_seq_len"
        )


def check_checkpoints(r: Recipe, out: Findings) -> None:
    """Checkpoints are kept, and the big ones go to S3."""
    if r.checkpoint.keep == 0:
        out.bad(
            "checkpoint", "checkpoint.keep", "0 keeps nothing: use a positive number, or -1 for all"
        )
    arch = r.model.arch
    if arch and arch.params_b * arch.dtype_bytes > 400 and not r.checkpoint.s3:
        out.bad(
            "checkpoint",
            "checkpoint.s3",
            f"{arch.params_b:g}B parameters: checkpoints this size must go to S3 "
            '(set checkpoint.s3 = "s3://bucket/prefix")',
        )


def check_secrets(r: Recipe, out: Findings) -> None:
    """No secret's value in a recipe; the logger's key is forwarded by name."""
    from apexrl.secrets import SECRET_ENV_KEYS

    for name in r.env.vars:
        if name in SECRET_ENV_KEYS or name == "WANDB_API_KEY":
            out.bad(
                "secrets",
                f"env.vars.{name}",
                "a secret's value does not belong in a recipe: it is forwarded by name from "
                "the environment (apexrl.secrets); for others list the name in env.forward",
            )
    if r.logging.logger == "wandb" and "WANDB_API_KEY" not in r.env.forward:
        out.warn("logger wandb: add WANDB_API_KEY to env.forward")


def check_concurrency(r: Recipe, out: Findings) -> None:
    """Fully async: the concurrency asked for can be reached by the generation workers."""
    b, a = r.batch, r.fully_async
    if out.concurrency is None or not a.enabled:
        return
    peak = a.generation_workers * b.n_samples
    if out.concurrency > peak:
        out.warn(
            f"concurrency {out.concurrency} above what {a.generation_workers} generation workers "
            f"x {b.n_samples} samples can start ({peak})"
        )


Rule = Callable[[Recipe, Findings], None]
RULES: tuple[Rule, ...] = (
    check_fully_async,
    check_batch_split,
    check_megatron_layout,
    check_inference_gpus,
    check_context,
    check_checkpoints,
    check_secrets,
    check_concurrency,
)


def check_rules(r: Recipe, concurrency: int | None = None) -> tuple[list[Violation], list[str]]:
    """(violations, warnings) of every rule, in RULES order."""
    out = Findings(concurrency=concurrency)
    for rule in RULES:
        rule(r, out)
    return out.violations, out.warnings
