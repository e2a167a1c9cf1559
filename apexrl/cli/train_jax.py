"""`apexrl train RECIPE` when the recipe says `training.backend = "jax"`: LoRA RL steps
on this machine's CPU with SkyRL's JAX backend (apexrl.train.jaxrl.grpo)."""

from __future__ import annotations

import os

from apexrl.cli import output
from apexrl.train.recipe import LoadedRecipe


def run_jax_command(
    loaded: LoadedRecipe,
    *,
    data: str | None,
    model: str | None,
    resume: bool,
    dry_run: bool,
    json_out: bool,
) -> None:
    from apexrl.train.jaxrl.grpo import JaxRun, jax_settings, run_jax

    r = loaded.recipe
    run = JaxRun(loaded, data=data, model=model, resume=resume)
    settings = jax_settings(loaded)  # refuses a loss the backend lacks only when it builds
    plan = {
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
        "recipe_sha256": loaded.sha256,
    }
    for k in ("run_dir", "model", "data", "steps", "loss", "lora_rank", "lr"):
        output.info(f"{k:<12} {plan[k]}")
    if dry_run:
        output.emit_records([plan], json_out=json_out or not output.stdout_is_terminal())
        return
    if r.agent.environment == "local":  # the trials run here: the sandbox must work
        from apexrl.eval.preflight import PreflightError, check_environment

        problems = check_environment("local", dict(os.environ))
        if problems:
            raise PreflightError(problems)
    summary = run_jax(loaded, data=data, model=model, resume=resume, say=output.info)
    output.emit_records([summary], json_out=json_out)
