"""`apexrl train`: RL from a recipe, the supervised warm start, the merged export.

- `apexrl train RECIPE` (= `apexrl train rl RECIPE`): render, validate, plan, submit to
  Ray, follow (or the JAX backend on this CPU). The KV-cache planner is `apexrl plan
  concurrency` (apexrl/cli/plan.py), which `train --dry-run` also runs.
- `apexrl train sft` and `apexrl train export`: apexrl/cli/train_sft.py.
"""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from apexrl.cli import output, train_sft
from apexrl.cli.options import RESUME, TRAINING_RIGHTS


class TrainGroup(TyperGroup):
    """`apexrl train RECIPE ...` keeps working: anything that is not a subcommand's name
    (or help) goes to `rl`."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["rl", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=TrainGroup,
    help="Train: RL from a recipe (`apexrl train RECIPE`), the supervised warm start "
    "(`train sft`), a merged checkpoint from a LoRA run (`train export`).",
    no_args_is_help=True,
)


@app.command("rl")
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
    resume: bool = RESUME,
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
    training_rights: str | None = TRAINING_RIGHTS,
    json_out: bool = typer.Option(False, "--json", help="Print the run spec / job record as JSON."),
) -> None:
    """Train (or evaluate) with SkyRL on Ray from a versioned recipe (RL; the default)."""
    from apexrl.errors import ExitCode
    from apexrl.train.job import TrainRequest, run_train
    from apexrl.train.recipe import load_recipe

    loaded = load_recipe(recipe, set_)
    for flag, source in (("--data", data), ("--val-data", val_data)):
        _check_data(
            flag, source, remote=bool(ray_address) and loaded.recipe.training.backend != "jax"
        )
    req = TrainRequest(
        recipe=recipe,
        overrides=list(set_),
        data=data,
        val_data=val_data,
        model=model,
        ray_address=ray_address,
        dry_run=dry_run,
        resume=resume,
        check_only=check_only,
        follow_logs=follow_logs,
        ship_code=ship_code,
        training_rights=training_rights,
    )
    result = run_train(req, on_info=output.info, on_interrupt=_confirm_stop)
    if dry_run:
        if result.backend == "jax":  # its plan: a short record, shown on a terminal too
            output.emit_records([result.spec], json_out=json_out or not output.stdout_is_terminal())
        elif json_out or not output.stdout_is_terminal():
            output.emit_records([result.spec], json_out=True)
        return
    output.emit_records([result.record()], json_out=json_out)
    if result.failed:
        raise typer.Exit(int(ExitCode.REMOTE))


def _check_data(flag: str, source: str | None, *, remote: bool) -> None:
    """A local dataset path must exist here (the job runs here); on a remote cluster the
    nodes may see paths this machine does not: then a warning, not a refusal."""
    from pathlib import Path

    from apexrl.errors import UsageError

    if not source or "://" in source or Path(source).expanduser().exists():
        return
    if remote:
        output.warn(f"{flag} {source} does not exist here; the cluster's nodes must see it")
        return
    raise UsageError(
        f"{flag} {source} does not exist",
        hint="pass a dataset from `apexrl tasks pack` (folder or .parquet) or hf://org/name",
    )


def _confirm_stop(job_id: str) -> bool:
    """Ctrl-C while following: ask (on a terminal) whether to stop the job."""
    return sys.stdin.isatty() and typer.confirm(f"\nstop job {job_id}?", default=False)


app.command("sft")(train_sft.sft)
app.command("export")(train_sft.export)
