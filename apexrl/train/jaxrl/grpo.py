"""`apexrl train` with `training.backend = "jax"`: synchronous GRPO on CPU.

One step:
1. rollouts: `train_batch_size` tasks x `n_samples` trials with apexrl's TrialGenerator
   (each trial its own process: the local sandbox, apexrl's agent over TITO, grading)
   against the local CPU engine on 127.0.0.1, which serves the current policy under
   the name `<served>@v<version>`; every trial record (the agent's tito.json `model`,
   and rollouts/step-N.jsonl) carries that version;
2. GRPO advantages (reward minus its group's mean; divided by the group's std with
   `algorithm.grpo_norm_by_std`), datums (apexrl.train.jaxrl.datums);
3. forward_backward + optim_step on SkyRL's JAX backend (LoRA, AdamW);
4. the adapter saved (PEFT tar.gz) and merged into the engine under the next version;
5. a checkpoint every `checkpoint.interval` steps and at the end (adapter + optimizer
   state, `latest_ckpt_global_step.txt` as SkyRL writes it), `keep` of them kept; one
   line of progress and a metrics.jsonl record per step.

The run folder is the parent of `checkpoint.path` (default runs/<run_name>/): ckpts/
(with apexrl_manifest.json), trials/, rollouts/, metrics.jsonl. `--resume` continues
from the latest checkpoint; a fresh run over existing checkpoints is refused.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from apexrl.artifacts.atomic import write_text_atomic
from apexrl.errors import UsageError
from apexrl.train.jaxrl.checkpoints import MANIFEST_NAME, RunFolder, write_checkpoint
from apexrl.train.recipe import LoadedRecipe

SYNTHETIC = "synthetic:letters"


class StepRecord(BaseModel):
    """One line of metrics.jsonl."""

    model_config = ConfigDict(extra="forbid")
    step: int
    weight_version: int  # the version the step's rollouts were sampled with
    new_version: int  # the version the engine serves after the step
    reward_mean: float
    rewards_by_task: dict[str, float] = Field(default_factory=dict)
    n_trajectories: int
    n_trained: int  # trajectories with a nonzero advantage and trained tokens
    tokens: int  # prompt + response tokens of the step's trajectories
    trained_tokens: int
    loss: float | None = None
    grad_norm: float | None = None
    # change of the summed response logprobs of the trained trajectories over the step,
    # those with a positive advantage and those with a negative one (should be > 0, < 0)
    logprob_shift_pos: float | None = None
    logprob_shift_neg: float | None = None
    # max |engine logprob - trainer logprob| over one trained sequence, the engine asked
    # under the new version's name right after it loaded the adapter
    engine_trainer_max_abs_diff: float | None = None
    statuses: dict[str, int] = Field(default_factory=dict)
    rollout_s: float
    train_s: float
    step_s: float


class JaxRun(RunFolder):
    """The folders, the data and the model of one run (nothing started yet)."""

    def __init__(
        self,
        loaded: LoadedRecipe,
        *,
        data: str | None = None,
        model: str | None = None,
        resume: bool = False,
    ) -> None:
        super().__init__(loaded, resume=resume)
        r = self.recipe = loaded.recipe
        self.data_spec = data or r.data.train
        self.model_spec = model or r.model.path
        if not self.data_spec:
            raise UsageError("no training data", hint="pass --data TASKS_DIR or set data.train")

    # --- inputs ---------------------------------------------------------------------------
    def prepare(self) -> tuple[Path, Path | None, Path]:
        """(tasks_dir, worlds_dir, model_dir), writing the synthetic set/model if named."""
        from apexrl.train.jaxrl import letters

        worlds = self.recipe.data.worlds_dir
        if self.data_spec == SYNTHETIC:
            tasks_dir = self.root / "data" / "letters-tasks"
            wdir = self.root / "data" / "letters-src" / "world_files_zipped"
            if not tasks_dir.is_dir() or not wdir.is_dir():
                tasks_dir, wdir = letters.write_letters_tasks(self.root / "data")
            worlds_dir: Path | None = wdir
        else:
            tasks_dir = Path(self.data_spec).expanduser().resolve()
            if not tasks_dir.is_dir():
                raise UsageError(f"--data {self.data_spec}: no such folder of task dirs")
            if (tasks_dir / "_dataset.json").is_file():
                raise UsageError(
                    f"--data {self.data_spec} is a packed dataset",
                    hint="unpack it first: apexrl tasks unpack DATASET -o TASKS_DIR",
                )
            worlds_dir = Path(worlds).expanduser().resolve() if worlds else None
        model_dir = prepare_model(self.model_spec, self.root, seed=self.recipe.training.seed)
        tasks = sorted(p.name for p in tasks_dir.iterdir() if (p / "task.toml").is_file())
        if not tasks:
            raise UsageError(f"{tasks_dir}: no task directories (task.toml) in it")
        self.tasks = tasks
        return tasks_dir, worlds_dir, model_dir


def prepare_model(spec: str, root: Path, *, seed: int) -> Path:
    """The model folder a run trains: a checkpoint folder, or the synthetic model named
    (written into <root>/model once)."""
    from apexrl.train.jaxrl import letters

    if spec == SYNTHETIC:
        model_dir = root / "model"
        if not (model_dir / "config.json").is_file():
            letters.write_prior_model(model_dir, seed=seed)
        return model_dir
    model_dir = Path(spec).expanduser().resolve()
    if not (model_dir / "config.json").is_file():
        raise UsageError(
            f"model {spec}: not a checkpoint folder (no config.json)",
            hint="the JAX backend trains a local Qwen3 checkpoint (`apexrl engine "
            "make-tiny DIR` writes one), or model.path = 'synthetic:letters'",
        )
    return model_dir


def jax_settings(loaded: LoadedRecipe):
    from apexrl.train.jaxrl.trainer import LOSSES, JaxSettings, adapter_settings

    r = loaded.recipe
    if r.algorithm.policy_loss not in LOSSES:
        raise UsageError(
            f"algorithm.policy_loss = {r.algorithm.policy_loss!r}: the JAX backend has "
            f"{', '.join(LOSSES)}",
            hint='set algorithm.policy_loss = "ppo" (or --set algorithm.policy_loss=...)',
        )
    return JaxSettings(
        **adapter_settings(r),
        seed=r.training.seed,
        loss=r.algorithm.policy_loss,
        clip_low=1.0 - r.algorithm.eps_clip_low if r.algorithm.eps_clip_low < 1 else 0.0,
        clip_high=1.0 + r.algorithm.eps_clip_high,
        lr=r.training.lr,
        weight_decay=r.training.weight_decay or 0.0,
    )


def jax_plan(run: JaxRun) -> dict[str, Any]:
    """What `apexrl train` prints and `--dry-run` emits for this backend."""
    r = run.recipe
    settings = jax_settings(run.loaded)  # refuses a loss the backend lacks
    return {
        "run_name": run.run_name,
        "backend": "jax",
        "run_dir": str(run.root),
        "checkpoint_path": str(run.ckpt_dir),
        "model": run.model_spec,
        "data": run.data_spec,
        "steps": r.training.max_steps or 1,
        "prompts_per_step": r.batch.train_batch_size,
        "samples_per_prompt": r.batch.n_samples,
        "loss": settings.loss,
        "lora_rank": settings.lora_rank,
        "lr": settings.lr,
        "recipe_sha256": run.loaded.sha256,
    }


PLAN_LINES = ("run_dir", "model", "data", "steps", "loss", "lora_rank", "lr")


def generator_settings(loaded: LoadedRecipe, *, tasks_dir, worlds_dir, logs_dir, model_dir, url):
    """The recipe's generator settings as the GPU path renders them
    (apexrl.train.render.generator_settings: the one recipe-to-TrialSpec mapping), with
    what this backend decides: its data and model folders, the local engine's URL, and
    trials in threads of this process (the local sandbox's warm gateway pool survives
    between trials; each sandbox and gateway is still its own process)."""
    from apexrl.train.render import generator_settings as render_settings

    r = loaded.recipe
    conc = r.rollout.concurrency if isinstance(r.rollout.concurrency, int) else 2
    settings = render_settings(r, max(1, conc), str(tasks_dir), str(logs_dir), "inline")
    return settings.model_copy(
        update={
            "worlds_dir": Path(worlds_dir) if worlds_dir else None,
            "model": None,  # set per step: the served name of the current version
            "tokenizer": str(model_dir),
            "endpoints": [url],
        }
    )


def step_tasks(tasks: list[str], step: int, batch: int, seed: int) -> list[str]:
    """The tasks of a step: epochs over the task list, each in a seeded order."""
    out: list[str] = []
    i = (step - 1) * batch
    while len(out) < batch:
        epoch, k = divmod(i, len(tasks))
        order = list(tasks)
        random.Random(f"{seed}:{epoch}").shuffle(order)
        out.append(order[k])
        i += 1
    return out


def quiet_loggers() -> None:
    """Trials run in this process: Harbor's per-trial debug lines and SkyRL's info lines
    would bury the one progress line per step (trial outcomes are in the records)."""
    import logging

    harbor = logging.getLogger("harbor")
    harbor.setLevel(logging.CRITICAL)
    harbor.propagate = False  # its per-trial loggers set their own levels
    logging.getLogger("skyrl").setLevel(logging.WARNING)
    logging.getLogger("absl").setLevel(logging.ERROR)


def served_name(base: str, version: int) -> str:
    return f"{base}@v{version}"


def run_jax(
    loaded: LoadedRecipe,
    *,
    data: str | None = None,
    model: str | None = None,
    resume: bool = False,
    max_steps: int | None = None,
    say: Callable[[str], None] = print,
    terms: tuple[list[dict], str | None] = ([], None),
) -> dict[str, Any]:
    """Train; returns a summary (run folder, steps, final version, rewards per step)."""
    from apexrl.engine.cpu import EngineServer, LocalEngine
    from apexrl.tasks.pack import source_digest
    from apexrl.train.generator import TrialGenerator
    from apexrl.train.jaxrl.trainer import JaxPolicy, require_jax
    from apexrl.train.launch import RunManifest, recipe_provenance

    r = loaded.recipe
    run = JaxRun(loaded, data=data, model=model, resume=resume)
    start_line = run.check_resume()
    require_jax()  # before anything is written
    tasks_dir, worlds_dir, model_dir = run.prepare()
    total = max_steps or r.training.max_steps or 1
    run.ckpt_dir.mkdir(parents=True, exist_ok=True)
    manifest = RunManifest(
        run_name=run.run_name,
        recipe=r.name,
        **recipe_provenance(loaded),
        model=str(model_dir),
        dataset=str(tasks_dir),
        dataset_digest=source_digest(str(tasks_dir)),
        resume=resume,
        checkpoint_path=str(run.ckpt_dir),
        data_terms=terms[0],
        training_rights=terms[1],
    )
    write_text_atomic(run.ckpt_dir / MANIFEST_NAME, manifest.model_dump_json(indent=1))
    say(f"run          {run.root} ({start_line})")
    say(f"data         {len(run.tasks)} task(s) in {tasks_dir}")
    say(f"model        {model_dir} (LoRA r={r.jax.lora_rank}, loss {r.algorithm.policy_loss})")

    settings = jax_settings(loaded)
    quiet_loggers()
    t0 = time.monotonic()
    policy = JaxPolicy(model_dir, settings)
    quiet_loggers()  # SkyRL sets its logger's level when it is first imported
    base = r.model.served_name or "policy"
    engine = LocalEngine(
        model_dir, served_model_name=served_name(base, 0), max_model_len=r.batch.max_seq_len
    )
    version, start = 0, 1
    latest = run.latest_step() if resume else None
    if latest is not None:
        ck = run.ckpt_dir / f"global_step_{latest}"
        state = json.loads((ck / "state.json").read_text("utf-8"))
        policy.load_state(ck / "trainer")
        version = int(state["weight_version"])
        engine.load_adapter(ck / "adapter.tar.gz", served_model_name=served_name(base, version))
        start = latest + 1
    say(f"trainer      SkyRL JAX backend ready in {time.monotonic() - t0:.0f}s")
    server = EngineServer(engine).start()
    logs_dir = run.root / "trials"
    gen = TrialGenerator(
        generator_settings(
            loaded,
            tasks_dir=tasks_dir,
            worlds_dir=worlds_dir,
            logs_dir=logs_dir,
            model_dir=model_dir,
            url=server.url,
        )
    )
    history: list[dict] = []
    loop = asyncio.new_event_loop()  # one loop for every step (the generator's gates bind to it)
    try:
        for step in range(start, total + 1):
            rec = _one_step(
                loop,
                run,
                gen,
                policy,
                engine,
                step=step,
                version=version,
                base=base,
                tasks_dir=tasks_dir,
                logs_dir=logs_dir,
                engine_url=server.url,
            )
            version = rec.new_version
            if step % max(r.checkpoint.interval, 1) == 0 or step == total:
                _checkpoint(run, policy, step, version)
            with (run.root / "metrics.jsonl").open("a", encoding="utf-8") as f:
                f.write(rec.model_dump_json() + "\n")
            history.append(rec.model_dump())
            loss = "-" if rec.loss is None else f"{rec.loss:+.2e}"
            gn = "-" if rec.grad_norm is None else f"{rec.grad_norm:.3f}"
            say(
                f"step {step}/{total}  reward {rec.reward_mean:.3f}  loss {loss}  grad_norm {gn}  "
                f"tokens {rec.tokens} ({rec.trained_tokens} trained)  v{rec.weight_version}->"
                f"v{rec.new_version}  rollouts {rec.rollout_s:.0f}s  train {rec.train_s:.0f}s"
            )
    finally:
        gen.close()
        server.stop()
        loop.close()
    return {
        "run_dir": str(run.root),
        "checkpoint_path": str(run.ckpt_dir),
        "steps": [h["step"] for h in history],
        "reward_mean": [h["reward_mean"] for h in history],
        "weight_version": version,
        "served_model": engine.name,
        "recipe_sha256": loaded.sha256,
    }


def _one_step(
    loop: asyncio.AbstractEventLoop,
    run: JaxRun,
    gen,
    policy,
    engine,
    *,
    step,
    version,
    base,
    tasks_dir,
    logs_dir,
    engine_url: str,
) -> StepRecord:
    from apexrl.train.jaxrl.datums import datums_from_output, response_logprob_sum

    r = run.recipe
    t0 = time.monotonic()
    names = step_tasks(run.tasks, step, r.batch.train_batch_size, r.training.seed)
    n = r.batch.n_samples
    step_logs = logs_dir / "train" / f"step-{step}"
    if step_logs.exists():  # a step cut short before its checkpoint: run it again
        shutil.rmtree(step_logs)
    extras, tids, groups = [], [], []
    for k, name in enumerate(names):
        for j in range(n):
            extras.append({"task_path": name})
            tids.append({"instance_id": f"s{step}-{k}-{name}", "repetition_id": j})
            groups.append(f"instance:s{step}-{k}-{name}")
    gen.settings.model = served_name(base, version)
    out = loop.run_until_complete(
        gen.generate(
            {
                "prompts": [[] for _ in extras],
                "env_extras": extras,
                "trajectory_ids": tids,
                "batch_metadata": {"global_step": step, "training_phase": "train"},
            }
        )
    )
    rollout_s = time.monotonic() - t0
    datums, advs = datums_from_output(out, groups, norm_by_std=r.algorithm.grpo_norm_by_std)
    # the rollouts record: one line per trajectory, with the version that sampled it
    rows = []
    statuses: dict[str, int] = {}
    by_task: dict[str, list[float]] = {}
    for i, (tid, ex) in enumerate(zip(tids, extras, strict=True)):
        session = f"{tid['instance_id']}_{tid['repetition_id']}"
        tito = step_logs / session / "agent" / "tito.json"
        sampled_by = None
        if tito.is_file():
            try:
                sampled_by = json.loads(tito.read_text("utf-8")).get("model")
            except ValueError:
                sampled_by = None
        status = out["stop_reasons"][i]
        statuses[status] = statuses.get(status, 0) + 1
        by_task.setdefault(ex["task_path"], []).append(out["rewards"][i])
        rows.append(
            {
                "step": step,
                "trajectory_id": session,
                "task": ex["task_path"],
                "weight_version": version,
                "served_model": served_name(base, version),
                "sampled_by": sampled_by,
                "reward": out["rewards"][i],
                "advantage": advs[i],
                "stop_reason": status,
                "prompt_tokens": len(out["prompt_token_ids"][i]),
                "response_tokens": len(out["response_ids"][i]),
                "response_ids": out["response_ids"][i],
            }
        )
    (run.root / "rollouts").mkdir(parents=True, exist_ok=True)
    write_text_atomic(
        run.root / "rollouts" / f"step-{step}.jsonl",
        "".join(json.dumps(x) + "\n" for x in rows),
    )
    trained = [d for d in datums if d.advantage != 0.0 and d.n_trained]
    t1 = time.monotonic()
    loss = grad_norm = parity = None
    shift: dict[str, float] = {}
    new_version = version
    if trained:
        loss, before = policy.forward_backward(trained)
        grad_norm = policy.optim_step()["grad_norm"]
        new_version = version + 1
        adapters = run.root / "adapters"
        path = policy.save_adapter(adapters / f"v{new_version}.tar.gz")
        engine.load_adapter(path, served_model_name=served_name(base, new_version))
        for old in adapters.glob("v*.tar.gz"):  # the served one and the one before it stay
            if old.name not in (f"v{new_version}.tar.gz", f"v{new_version - 1}.tar.gz"):
                old.unlink(missing_ok=True)
        # what the step did: each trained trajectory's response logprob sum before and
        # after, by the sign of its advantage; and the engine's logprobs (asked by the new
        # version's name) against the trainer's for the first one
        after = policy.logprobs(trained)
        for d, b, a in zip(trained, before, after, strict=True):
            key = "pos" if d.advantage > 0 else "neg"
            delta = response_logprob_sum(d, a) - response_logprob_sum(d, b)
            shift[key] = shift.get(key, 0.0) + delta
        parity = engine_parity(engine_url, served_name(base, new_version), trained[0], after[0])
    rewards = list(out["rewards"])
    return StepRecord(
        step=step,
        weight_version=version,
        new_version=new_version,
        reward_mean=sum(rewards) / max(len(rewards), 1),
        rewards_by_task={k: sum(v) / len(v) for k, v in sorted(by_task.items())},
        n_trajectories=len(rewards),
        n_trained=len(trained),
        tokens=sum(len(d.input_ids) + 1 for d in datums),
        trained_tokens=sum(d.n_trained for d in trained),
        loss=loss,
        grad_norm=grad_norm,
        logprob_shift_pos=shift.get("pos"),
        logprob_shift_neg=shift.get("neg"),
        engine_trainer_max_abs_diff=parity,
        statuses=statuses,
        rollout_s=rollout_s,
        train_s=time.monotonic() - t1,
        step_s=time.monotonic() - t0,
    )


def engine_parity(url: str, model: str, datum, trainer_logprobs: list[float]) -> float:
    """max |engine - trainer| logprob over the datum's trained targets (the trainer
    computes those only: apexrl.train.jaxrl.gather): the engine's prompt logprobs for the
    whole sequence, asked under `model` (404 unless it serves it)."""
    import httpx

    seq = [*datum.input_ids, datum.targets[-1]]
    body = {
        "model": model,
        "prompt": seq,
        "max_tokens": 1,
        "temperature": 0.0,
        "prompt_logprobs": 0,
    }
    r = httpx.post(f"{url}/v1/completions", json=body, timeout=300.0)
    r.raise_for_status()
    plp = r.json()["choices"][0]["prompt_logprobs"]
    diffs = [
        abs(plp[k + 1][str(t)]["logprob"] - trainer_logprobs[k])
        for k, t in enumerate(datum.targets)
        if datum.weights[k]
    ]
    return max(diffs)


def _checkpoint(run: JaxRun, policy, step: int, version: int) -> Path:
    """global_step_<step>/ (apexrl.train.jaxrl.checkpoints) with the served version."""
    return write_checkpoint(
        run.ckpt_dir, policy, step, {"weight_version": version}, keep=run.recipe.checkpoint.keep
    )
