"""`apexrl train RECIPE`: render, validate, plan, submit to Ray, follow.

One command (not a group): the KV-cache planner is `apexrl plan concurrency`
(apexrl/cli/plan.py), which `train --dry-run` also runs to set and explain the
concurrency cap.
"""

from __future__ import annotations

import sys
import uuid

import typer

from apexrl.cli import output


def command(
    recipe: str = typer.Argument(
        ..., help="Recipe file or shipped name (smoke-1gpu, qwen36-35b-a3b, ...)."
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override a recipe key: key.path=value (repeatable; skyrl.* for raw SkyRL keys).",
    ),
    data: str | None = typer.Option(
        None, "--data", help="Training dataset (apexrl tasks pack output, or task dirs)."
    ),
    val_data: str | None = typer.Option(None, "--val-data", help="Evaluation dataset."),
    model: str | None = typer.Option(
        None, "--model", help="Model path or Hub id (replaces model.path)."
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        envvar="RAY_ADDRESS",
        help="Ray dashboard address (http://HEAD:8265); none: a local Ray.",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Render, validate and print the plan; submit nothing."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue from the run's latest checkpoint."
    ),
    check_only: bool = typer.Option(
        False,
        "--check-only",
        help="Submit a preflight job only (manifest, data, env); no training.",
    ),
    follow_logs: bool = typer.Option(
        True, "--follow/--no-follow", help="Stream the job's status and logs."
    ),
    ship_code: bool = typer.Option(
        True, "--ship-code/--no-ship-code", help="Upload this apexrl to the job."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the run spec / job record as JSON."),
) -> None:
    """Train (or evaluate) with SkyRL on Ray from a versioned recipe."""
    from apexrl.errors import ApexError, ExitCode
    from apexrl.train import render as R
    from apexrl.train.recipe import load_recipe

    loaded = load_recipe(recipe, set_)
    if loaded.recipe.training.backend == "jax":  # LoRA steps on this CPU (apexrl.train.jaxrl)
        from apexrl.cli.train_jax import run_jax_command

        run_jax_command(
            loaded, data=data, model=model, resume=resume, dry_run=dry_run, json_out=json_out
        )
        return
    strict = not dry_run
    data = R.absolute_data_path(data, "--data")
    val_data = R.absolute_data_path(val_data, "--val-data")
    spec = R.render(
        loaded, data_train=data, data_val=val_data, model=model, resume=resume, strict=strict
    )
    if R.skyrl_available():
        ver, notes = R.validate_with_skyrl(spec.skyrl, loaded.source, mode=loaded.recipe.mode)
        fn = "validate_cfg" if loaded.recipe.mode == "train" else "validate_generator_cfg"
        check = f"SkyRL {ver} {fn} accepts it"
        spec.plan.warnings.extend(notes)
    else:
        check = "SkyRL not installed here (the train extra): its checks run on the cluster"
    from apexrl.train import launch as L

    resume_line = L.check_resume(spec) if not dry_run else ("resume" if resume else "fresh run")
    from apexrl.grading.requirements import check_recipe_judge

    ag = loaded.recipe.agent  # exit 2 (rubrics need a judge, none set) or 3 (no judge key)
    check_recipe_judge(
        [spec.data_train, spec.data_val], ag.judge, ag.judge_api_base, agent=ag.agent
    )
    if ray_address is None and ag.environment == "local":
        # trials will run on this machine (a local Ray): the sandbox must work here
        # (apexrl.eval.preflight; with --ray-address the workers' machines matter instead)
        import os

        from apexrl.eval.preflight import PreflightError, check_environment

        problems = check_environment(ag.environment, dict(os.environ))
        if problems:
            raise PreflightError(problems)
    for line in R.plan_lines(spec, loaded, check):
        output.info(line)
    output.info(f"start        {resume_line}")
    if dry_run:
        if json_out or not output.stdout_is_terminal():
            output.emit_records([spec], json_out=True)
        return
    if loaded.recipe.mode == "train" and not spec.data_train:
        raise ApexError(
            "no training data", hint="pass --data DATASET or set data.train", code=ExitCode.USAGE
        )
    if loaded.recipe.mode == "eval" and not spec.data_val:
        raise ApexError("no evaluation data", hint="pass --val-data DATASET", code=ExitCode.USAGE)

    job_id = f"apexrl-{spec.run_name}-{uuid.uuid4().hex[:8]}"
    manifest = L.make_manifest(loaded, spec, ray_address=ray_address)
    manifest.job_id = job_id
    workdir = L.job_dir(spec, manifest)

    def submit_and_follow(address: str, python: str = "python") -> str:
        jobs = L.RayJobs(address)
        env = L.job_runtime_env(spec, workdir, ship_code=ship_code)
        jobs.submit(L.entrypoint_command(check_only, python), env, job_id)
        output.info(f"submitted    job {job_id} to {address}")
        if not follow_logs:
            return "SUBMITTED"
        try:
            return L.follow(
                jobs,
                job_id,
                write=lambda t: (sys.stderr.write(t), sys.stderr.flush()),
                on_status=lambda s: output.info(f"status       {s}"),
            )
        except KeyboardInterrupt:
            if sys.stdin.isatty() and typer.confirm(f"\nstop job {job_id}?", default=False):
                jobs.stop(job_id)
                output.info(f"stopping     {job_id}")
                return "STOPPED"
            output.info(f"job continues; stop it with: ray job stop {job_id} --address {address}")
            return "DETACHED"

    try:
        if ray_address:
            status = submit_and_follow(ray_address)
        else:
            output.info("ray          no --ray-address: starting a local Ray head on 127.0.0.1")
            with L.LocalRay() as head:
                status = submit_and_follow(head.address, sys.executable)
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)  # Ray uploaded it at submit time
    output.emit_records(
        [
            {
                "job_id": job_id,
                "status": status,
                "run_name": spec.run_name,
                "checkpoint_path": spec.plan.checkpoint_path,
                "recipe_sha256": loaded.sha256,
            }
        ],
        json_out=json_out,
    )
    if status in ("FAILED", "STOPPED"):
        raise typer.Exit(int(ExitCode.REMOTE))
