"""Run a training (or recipe eval) job: `run_train(req)`, beside eval's `run_eval(req)`.

    result = run_train(TrainRequest(recipe="smoke-1gpu", data="tasks/"), on_info=print)

The recipe's `training.backend` is chosen here, so the same rules cover both backends:
the judge setting (exit 2 when the tasks' criteria need a judge and none is set, 3 when
its key is missing), the sandbox for trials on this machine, and the resume rules (a
fresh run over checkpoints, or --resume with none, refused) — all before any trial.

- "skyrl": render the recipe, validate it (SkyRL's own checks where SkyRL is installed);
  then (unless `dry_run`) submit the job to Ray (a local head when no `ray_address`) and
  follow it;
- "jax": LoRA RL steps on this machine's CPU (apexrl.train.jaxrl.grpo); the trials run
  here whatever `ray_address` says.

`apexrl train` (apexrl/cli/train.py) is a thin wrapper around this.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apexrl.errors import ApexError, ExitCode


@dataclass
class TrainRequest:
    """Everything `apexrl train` was asked for."""

    recipe: str  # file or shipped name
    overrides: list[str] = field(default_factory=list)  # --set key.path=value
    data: str | None = None
    val_data: str | None = None
    model: str | None = None
    ray_address: str | None = None  # None: a local Ray head on 127.0.0.1
    dry_run: bool = False  # render, validate, plan; submit nothing
    resume: bool = False
    check_only: bool = False  # a preflight job only (manifest, data, env)
    follow_logs: bool = True
    ship_code: bool = True
    # the user's statement of their right to train on evaluation-only data (apexrl.tasks.terms)
    training_rights: str | None = None


@dataclass
class TrainResult:
    spec: Any  # apexrl.train.render.RunSpec; the JAX backend: its plan (a dict)
    recipe_sha256: str
    job_id: str | None = None  # None: dry run
    status: str | None = None  # Ray's terminal status, SUBMITTED, STOPPED or DETACHED
    backend: str = "skyrl"
    summary: dict | None = None  # the JAX backend's run summary (None: dry run)

    @property
    def failed(self) -> bool:
        return self.status in ("FAILED", "STOPPED")

    def record(self) -> dict:
        if self.backend == "jax":
            return self.summary or {}
        return {
            "job_id": self.job_id,
            "status": self.status,
            "run_name": self.spec.run_name,
            "checkpoint_path": self.spec.plan.checkpoint_path,
            "recipe_sha256": self.recipe_sha256,
        }


def _write_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def run_train(
    req: TrainRequest,
    *,
    on_info: Callable[[str], None] = lambda line: None,
    on_log: Callable[[str], None] = _write_stderr,
    on_interrupt: Callable[[str], bool] = lambda job_id: False,
) -> TrainResult:
    """Plan (and unless dry_run, submit and follow) a job. on_info: one line per step;
    on_log: the job's log text; on_interrupt(job_id): Ctrl-C while following; True
    stops the job, False leaves it running (detached)."""
    from apexrl.train import launch as L
    from apexrl.train import render as R
    from apexrl.train.recipe import load_recipe

    loaded = load_recipe(req.recipe, req.overrides)
    if loaded.recipe.training.backend == "jax":
        return _run_jax(req, loaded, on_info)
    strict = not req.dry_run
    data = R.absolute_data_path(req.data, "--data")
    val_data = R.absolute_data_path(req.val_data, "--val-data")
    spec = R.render(
        loaded,
        data_train=data,
        data_val=val_data,
        model=req.model,
        resume=req.resume,
        strict=strict,
    )
    if R.skyrl_available():
        ver, notes = R.validate_with_skyrl(spec.skyrl, loaded.source, mode=loaded.recipe.mode)
        fn = "validate_cfg" if loaded.recipe.mode == "train" else "validate_generator_cfg"
        check = f"SkyRL {ver} {fn} accepts it"
        spec.plan.warnings.extend(notes)
    else:
        check = "SkyRL not installed here (the train extra): its checks run on the cluster"
    spec.plan.warnings.extend(loaded.deprecations)
    data_terms = _check_terms(loaded, spec.data_train, req.training_rights)
    resume_line = L.check_resume(spec) if not req.dry_run else _dry_resume(req)
    _check_trials(loaded, [spec.data_train, spec.data_val], local=req.ray_address is None)
    for line in R.plan_lines(spec, loaded, check):
        on_info(line)
    on_info(f"start        {resume_line}")
    result = TrainResult(spec=spec, recipe_sha256=loaded.sha256)
    if req.dry_run:
        return result
    if loaded.recipe.mode == "train" and not spec.data_train:
        raise ApexError(
            "no training data", hint="pass --data DATASET or set data.train", code=ExitCode.USAGE
        )
    if loaded.recipe.mode == "eval" and not spec.data_val:
        raise ApexError("no evaluation data", hint="pass --val-data DATASET", code=ExitCode.USAGE)

    job_id = f"apexrl-{spec.run_name}-{uuid.uuid4().hex[:8]}"
    manifest = L.make_manifest(loaded, spec, ray_address=req.ray_address)
    manifest.data_terms = data_terms
    manifest.training_rights = req.training_rights if data_terms else None
    manifest.job_id = job_id
    workdir = L.job_dir(spec, manifest)

    def submit_and_follow(address: str, python: str = "python") -> str:
        jobs = L.RayJobs(address)
        env = L.job_runtime_env(spec, workdir, ship_code=req.ship_code)
        jobs.submit(L.entrypoint_command(req.check_only, python), env, job_id)
        on_info(f"submitted    job {job_id} to {address}")
        if not req.follow_logs:
            return "SUBMITTED"
        try:
            return L.follow(
                jobs, job_id, write=on_log, on_status=lambda s: on_info(f"status       {s}")
            )
        except KeyboardInterrupt:
            if on_interrupt(job_id):
                jobs.stop(job_id)
                on_info(f"stopping     {job_id}")
                return "STOPPED"
            on_info(f"job continues; stop it with: ray job stop {job_id} --address {address}")
            return "DETACHED"

    try:
        if req.ray_address:
            result.status = submit_and_follow(req.ray_address)
        else:
            on_info("ray          no --ray-address: starting a local Ray head on 127.0.0.1")
            with L.LocalRay() as head:
                result.status = submit_and_follow(head.address, sys.executable)
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)  # Ray uploaded it at submit time
    result.job_id = job_id
    return result


def _run_jax(req: TrainRequest, loaded, on_info: Callable[[str], None]) -> TrainResult:
    """training.backend = "jax": the same checks, then LoRA steps on this CPU."""
    from apexrl.train.jaxrl.grpo import PLAN_LINES, JaxRun, jax_plan, run_jax

    run = JaxRun(loaded, data=req.data, model=req.model, resume=req.resume)
    data_terms = _check_terms(loaded, run.data_spec, req.training_rights)
    plan = jax_plan(run)
    resume_line = run.check_resume() if not req.dry_run else _dry_resume(req)
    _check_trials(loaded, [run.data_spec], local=True)  # the trials run here
    for k in PLAN_LINES:
        on_info(f"{k:<12} {plan[k]}")
    for w in loaded.deprecations:
        on_info(f"warning      {w}")
    on_info(f"start        {resume_line}")
    result = TrainResult(spec=plan, recipe_sha256=loaded.sha256, backend="jax")
    if not req.dry_run:
        result.summary = run_jax(
            loaded,
            data=req.data,
            model=req.model,
            resume=req.resume,
            say=on_info,
            terms=(data_terms, req.training_rights if data_terms else None),
        )
    return result


def _dry_resume(req: TrainRequest) -> str:
    return "resume" if req.resume else "fresh run"


def _check_terms(loaded, train_data: str | None, statement: str | None) -> list[dict]:
    """Exit 2 naming the terms when the training data is marked evaluation-only and the
    user stated no right to train on it; the terms met, for the manifest."""
    from apexrl.tasks.terms import check_training_rights

    if loaded.recipe.mode != "train":
        return []  # evaluating on evaluation-only data is what its terms allow
    return check_training_rights([train_data], statement)


def _check_trials(loaded, sources: list[str | None], *, local: bool) -> None:
    """Before any trial, for either backend: the judge setting against the datasets'
    rubrics (exit 2: criteria need a judge and none is set; 3: the judge's key is
    missing), and the sandbox when the trials run on this machine."""
    from apexrl.grading.requirements import check_recipe_judge

    ag = loaded.recipe.agent
    check_recipe_judge(sources, ag.judge, ag.judge_api_base, agent=ag.agent)
    if local:
        _check_local_sandbox(ag.environment)


def _check_local_sandbox(environment: str) -> None:
    """Trials on this machine (a local Ray, or the JAX backend) need a working sandbox
    here (apexrl.envs.preflight); with --ray-address the workers' machines matter instead."""
    from apexrl.envs.registry import get_environment

    if not get_environment(environment).world_store:
        return
    import os

    from apexrl.envs.preflight import PreflightError, check_environment

    problems = check_environment(environment, dict(os.environ))
    if problems:
        raise PreflightError(problems)
