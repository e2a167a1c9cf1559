"""`apexrl train sft`: the supervised warm start on CPU (SkyRL 0.4.0's JAX backend).

It learns from the passed trials of `apexrl eval run` folders (apexrl.train.sft_data):
each trial's exact token stream, with the loss on the tokens the model sampled only
(cross-entropy, `loss = "cross_entropy"` of the same backend RL trains with: the same
LoRA adapter, the same AdamW). One step:
1. a batch of `sft.batch_size` trajectories: epochs over the kept trials, each epoch in a
   seeded order (`sft.seed`);
2. forward_backward (the batch's mean per-token NLL on the trained tokens, before the
   update, is the step's loss) + optim_step;
3. a checkpoint every `checkpoint.interval` steps and at the end (the RL layout:
   apexrl.train.jaxrl.checkpoints), `keep` of them kept; a metrics.jsonl line per step.

Before the first step and after the last, the mean logprob per trained token of a fixed
probe set (the first 16 trajectories) is measured: the run's summary.json holds both, so a
warm start that learned shows the taught tokens' logprob rising.

The run folder is the parent of `checkpoint.path`: ckpts/ (apexrl_manifest.json with the
runs and trials learned from), metrics.jsonl, summary.json. `--resume` continues from the
latest checkpoint of the same run (same recipe, same trials); a fresh run over
checkpoints, or any run over a folder that holds another run, is refused.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from apexrl.artifacts.atomic import write_text_atomic
from apexrl.errors import BadRecordError, UsageError
from apexrl.train.jaxrl.checkpoints import MANIFEST_NAME, RunFolder, write_checkpoint
from apexrl.train.recipe import LoadedRecipe, SftSection

PROBE_SIZE = 16
SUMMARY = "summary.json"
METRICS = "metrics.jsonl"


class SftStepRecord(BaseModel):
    """One line of metrics.jsonl."""

    model_config = ConfigDict(extra="forbid")
    step: int
    epoch: int
    loss: float  # mean per-token NLL of the batch's trained tokens, before the update
    grad_norm: float | None = None
    lr: float
    sequences: int
    tokens: int  # input tokens of the batch
    trained_tokens: int
    step_s: float


def sft_section(loaded: LoadedRecipe) -> SftSection:
    if loaded.recipe.sft is None:
        raise UsageError(
            f"recipe {loaded.source} has no [sft] table",
            hint="add [sft] (lr, epochs or max_steps, batch_size, seed): see docs/training.md",
        )
    return loaded.recipe.sft


def sft_settings(loaded: LoadedRecipe):
    """The backend settings: the recipe's [jax] adapter, [sft]'s optimizer, the CE loss."""
    from apexrl.train.jaxrl.trainer import JaxSettings, adapter_settings

    s = sft_section(loaded)
    return JaxSettings(
        **adapter_settings(loaded.recipe),
        seed=s.seed,
        loss="cross_entropy",
        lr=s.lr,
        weight_decay=s.weight_decay,
    )


class SftRun(RunFolder):
    """The folders of one warm start (nothing written yet)."""

    def __init__(self, loaded: LoadedRecipe, *, resume: bool = False) -> None:
        self.section = sft_section(loaded)
        super().__init__(loaded, resume=resume)

    def check_same_run(self, identity: str) -> None:
        """Refuse a folder whose manifest is another run's (model, adapter, data or
        trials differ)."""
        path = self.ckpt_dir / MANIFEST_NAME
        if not path.is_file():
            return
        try:
            theirs = json.loads(path.read_text("utf-8")).get("sft_identity")
        except ValueError:
            theirs = None
        if theirs != identity:
            raise UsageError(
                f"{self.root} holds another run (its model, adapter, optimizer or the trials "
                "it learns from differ from this one's)",
                hint="set another run_name (--set run_name=NEW) or checkpoint.path; "
                "nothing was overwritten",
            )


# recipe keys a run may change and still be the same run (how long it goes, how often and
# how many checkpoints it keeps, what it is called)
SAME_RUN_KEYS = (
    ("sft", "max_steps"),
    ("sft", "epochs"),
    ("checkpoint", "interval"),
    ("checkpoint", "keep"),
    ("description",),
)


def run_identity(loaded: LoadedRecipe, model: str, sources) -> str:
    """A hash of what makes two warm starts one run: the recipe (but SAME_RUN_KEYS), the
    model and, per run learned from, its fingerprint and the trials kept."""
    import copy

    from apexrl.train.recipe import canonical_hash

    tree = copy.deepcopy(loaded.merged)
    for path in SAME_RUN_KEYS:
        node = tree
        for k in path[:-1]:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    data = [[s.run_dir, s.run_fingerprint, list(s.trials)] for s in sources]
    return "sha256:" + canonical_hash({"recipe": tree, "model": model, "data": data})


def cut(ex, max_seq_len: int | None):
    """An example cut to max_seq_len tokens (prompt + response); refused when nothing the
    model sampled is left."""
    if max_seq_len is None or len(ex.prompt_ids) + len(ex.response_ids) <= max_seq_len:
        return ex
    keep = max(max_seq_len - len(ex.prompt_ids), 0)
    mask = ex.loss_mask[:keep]
    if not any(mask):
        raise BadRecordError(
            f"{ex.run_dir} trial {ex.trial_id}",
            f"cut to sft.max_seq_len = {max_seq_len} tokens, none it sampled is left "
            f"(prompt {len(ex.prompt_ids)} tokens)",
            hint="raise sft.max_seq_len (--set sft.max_seq_len=N)",
        )
    ex.response_ids, ex.loss_mask = ex.response_ids[:keep], mask
    return ex


def to_datum(ex):
    from apexrl.train.jaxrl.datums import make_datum

    n = len(ex.response_ids)
    return make_datum(ex.prompt_ids, ex.response_ids, ex.loss_mask, [0.0] * n, 0.0)


def batch_indices(n: int, step: int, batch: int, seed: int) -> tuple[list[int], int]:
    """(example indices, epoch) of a step: epochs over n examples, each in a seeded order."""
    from apexrl.train.jaxrl.grpo import step_tasks

    names = step_tasks([str(i) for i in range(n)], step, batch, seed)
    return [int(x) for x in names], (step - 1) * batch // n + 1


def warmup_lr(lr: float, warmup_steps: int, step: int) -> float:
    """The rate at `step` (1-based): rising linearly to `lr` over the first warmup_steps.
    Adam's first steps move every weight by about the full rate, so a large rate without a
    warm-up can undo a warm-started model in one step (docs/training.md, Follow-up 4)."""
    if warmup_steps <= 0 or step >= warmup_steps:
        return lr
    return lr * step / warmup_steps


def total_steps(section: SftSection, n: int) -> int:
    batch = min(section.batch_size, n)
    return section.max_steps or math.ceil(section.epochs * n / batch)


def token_mean_logprob(datums, logprobs: list[list[float]]) -> float:
    """Mean logprob per trained token (weights > 0) over the datums."""
    total = count = 0.0
    for d, lps in zip(datums, logprobs, strict=True):
        for lp, w in zip(lps, d.weights, strict=False):
            if w:
                total += lp
                count += 1
    return total / max(count, 1.0)


def sft_plan(loaded: LoadedRecipe, sources: list[str], min_reward: float | None) -> dict:
    """What `apexrl train sft --dry-run` prints (no data read, nothing written)."""
    r = loaded.recipe
    s = sft_section(loaded)
    run = SftRun(loaded)
    return {
        "run_name": run.run_name,
        "backend": "jax",
        "run_dir": str(run.root),
        "checkpoint_path": str(run.ckpt_dir),
        "model": r.model.path,
        "from": [str(Path(x).expanduser().resolve()) for x in sources],
        "keep": "passed" if min_reward is None else f"reward >= {min_reward}",
        "lr": s.lr,
        "epochs": s.epochs,
        "max_steps": s.max_steps,
        "batch_size": s.batch_size,
        "lora_rank": r.jax.lora_rank,
        "recipe_sha256": loaded.sha256,
    }


def run_sft(
    loaded: LoadedRecipe,
    sources: list[str],
    *,
    min_reward: float | None = None,
    resume: bool = False,
    training_rights: str | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train; returns the summary (also written to <run>/summary.json). The tasks the runs
    ran on are checked for evaluation-only terms (apexrl.tasks.terms) as `train` checks
    its data: refused unless `training_rights` states the right to train on them."""
    from apexrl.tasks.terms import check_training_rights
    from apexrl.train.jaxrl.grpo import prepare_model, quiet_loggers
    from apexrl.train.jaxrl.trainer import JaxPolicy, require_jax
    from apexrl.train.launch import RunManifest, recipe_provenance
    from apexrl.train.sft_data import read_runs

    r = loaded.recipe
    run = SftRun(loaded, resume=resume)
    section = run.section
    start_line = run.check_resume()
    model_dir = prepare_model(r.model.path, run.root, seed=r.training.seed)
    srcs, examples = read_runs(
        sources, model=model_dir, tokenizer=r.model.tokenizer, min_reward=min_reward
    )
    examples = [cut(ex, section.max_seq_len) for ex in examples]
    data_terms = check_training_rights([s.dataset for s in srcs], training_rights)
    manifest = RunManifest(
        run_name=run.run_name,
        recipe=r.name,
        **recipe_provenance(loaded),
        model=str(model_dir),
        dataset=",".join(s.run_dir for s in srcs),
        resume=resume,
        checkpoint_path=str(run.ckpt_dir),
        data_terms=data_terms,
        training_rights=training_rights if data_terms else None,
        sft_sources=srcs,
        sft_identity=run_identity(loaded, str(model_dir), srcs),
    )
    run.check_same_run(manifest.sft_identity)
    require_jax()  # before anything is written
    run.ckpt_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(run.ckpt_dir / MANIFEST_NAME, manifest.model_dump_json(indent=1))

    n = len(examples)
    batch = min(section.batch_size, n)
    total = total_steps(section, n)
    say(f"run          {run.root} ({start_line})")
    kept = ", ".join(f"{Path(s.run_dir).name}: {len(s.trials)}/{s.n_trials}" for s in srcs)
    say(
        f"data         {n} trajectories kept ({kept}); {sum(e.n_trained for e in examples)} "
        "trained tokens"
    )
    warm = f", warm-up {section.warmup_steps} steps" if section.warmup_steps else ""
    say(
        f"model        {model_dir} (LoRA r={r.jax.lora_rank}, cross-entropy, lr {section.lr}{warm})"
    )

    quiet_loggers()
    t0 = time.monotonic()
    policy = JaxPolicy(model_dir, sft_settings(loaded))
    quiet_loggers()
    say(f"trainer      SkyRL JAX backend ready in {time.monotonic() - t0:.0f}s")
    probe = [to_datum(ex) for ex in examples[:PROBE_SIZE]]
    probe_file = run.root / "probe.json"
    start = 1
    latest = run.latest_step() if resume else None
    metrics = run.root / METRICS
    if latest is not None:
        policy.load_state(run.ckpt_dir / f"global_step_{latest}" / "trainer")
        start = latest + 1
        before = json.loads(probe_file.read_text("utf-8"))["taught_logprob_before"]
        _keep_metrics_through(metrics, latest)  # steps after the checkpoint run again
    else:
        before = token_mean_logprob(probe, policy.logprobs(probe))
        write_text_atomic(probe_file, json.dumps({"taught_logprob_before": before}))
        metrics.unlink(missing_ok=True)
    interval = max(r.checkpoint.interval, 1)
    for step in range(start, total + 1):
        t1 = time.monotonic()
        idx, epoch = batch_indices(n, step, batch, section.seed)
        datums = [to_datum(examples[i]) for i in idx]
        _, lps = policy.forward_backward(datums)
        loss = -token_mean_logprob(datums, lps)
        opt = policy.optim_step(warmup_lr(section.lr, section.warmup_steps, step))
        rec = SftStepRecord(
            step=step,
            epoch=epoch,
            loss=loss,
            grad_norm=opt["grad_norm"],
            lr=opt["lr"],
            sequences=len(datums),
            tokens=sum(len(d.input_ids) for d in datums),
            trained_tokens=sum(d.n_trained for d in datums),
            step_s=time.monotonic() - t1,
        )
        if step % interval == 0 or step == total:
            write_checkpoint(
                run.ckpt_dir, policy, step, {"weight_version": step}, keep=r.checkpoint.keep
            )
        with metrics.open("a", encoding="utf-8") as f:
            f.write(rec.model_dump_json() + "\n")
        say(
            f"sft step {step}/{total}  epoch {epoch}  loss {loss:.4f}  grad_norm "
            f"{rec.grad_norm:.3f}  seqs {rec.sequences}  tokens {rec.tokens} "
            f"({rec.trained_tokens} trained)  {rec.step_s:.1f}s"
        )
    after = token_mean_logprob(probe, policy.logprobs(probe))
    say(f"taught tokens: mean logprob {before:.4f} -> {after:.4f} (probe of {len(probe)})")
    steps = [json.loads(x) for x in metrics.read_text("utf-8").splitlines() if x.strip()]
    summary = {
        "run_dir": str(run.root),
        "checkpoint_path": str(run.ckpt_dir),
        "latest_checkpoint": str(run.ckpt_dir / f"global_step_{total}"),
        "model": str(model_dir),
        "steps": total,
        "trajectories": n,
        "trained_tokens": sum(e.n_trained for e in examples),
        "loss_first": steps[0]["loss"] if steps else None,
        "loss_last": steps[-1]["loss"] if steps else None,
        "taught_logprob_before": before,
        "taught_logprob_after": after,
        "probe_trajectories": len(probe),
        "recipe_sha256": loaded.sha256,
    }
    write_text_atomic(run.root / SUMMARY, json.dumps(summary, indent=1))
    return summary


def _keep_metrics_through(path: Path, step: int) -> None:
    if not path.is_file():
        return
    keep = [
        line
        for line in path.read_text("utf-8").splitlines()
        if line.strip() and json.loads(line)["step"] <= step
    ]
    write_text_atomic(path, "".join(x + "\n" for x in keep))
