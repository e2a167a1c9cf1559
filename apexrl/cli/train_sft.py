"""`apexrl train sft` (the supervised warm start) and `apexrl train export` (merge a LoRA
checkpoint into its base). Registered in the `train` group by apexrl/cli/train.py."""

from __future__ import annotations

from pathlib import Path

import typer

from apexrl.cli import output
from apexrl.cli.options import RESUME, TRAINING_RIGHTS


def sft(
    recipe: str = typer.Option(
        ...,
        "--recipe",
        "-r",
        help="Recipe with \\[model], \\[jax] and \\[sft] (file or shipped name).",
    ),
    sources: list[str] = typer.Option(
        ...,
        "--from",
        help="An `apexrl eval run` folder to learn from (repeatable).",
    ),
    min_reward: float | None = typer.Option(
        None,
        "--min-reward",
        help="Keep trials whose reward reaches this (default: trials that passed).",
    ),
    set_: list[str] = typer.Option(
        [], "--set", help="Override a recipe key: key.path=value (repeatable)."
    ),
    resume: bool = RESUME,
    training_rights: str | None = TRAINING_RIGHTS,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; train nothing."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Warm start: learn the model's own tokens of the passed trials of eval runs.

    Rejection sampling (passed trials, or --min-reward), cross-entropy on the tokens the
    model sampled (the TITO stream and loss mask the run recorded). training.backend =
    "jax": LoRA through SkyRL's JAX backend on this CPU, into a run folder like `apexrl
    train`'s (ckpts/ with the manifest, metrics.jsonl, summary.json; `apexrl train export`
    merges its checkpoint). "skyrl": SkyRL's own SFT trainer config and dataset for a GPU
    cluster, validated by SkyRL."""
    from apexrl.train.jaxrl.sft import run_sft, sft_plan
    from apexrl.train.recipe import load_recipe

    for s in sources:
        output.refuse_dash(s, "--from", "an eval run folder")
    loaded = load_recipe(recipe, set_)
    if loaded.recipe.training.backend == "skyrl":  # SkyRL's SFT trainer on a GPU cluster
        from apexrl.train.sft_skyrl import prepare_skyrl_sft

        plan = prepare_skyrl_sft(
            loaded,
            sources,
            min_reward=min_reward,
            resume=resume,
            dry_run=dry_run,
            training_rights=training_rights,
        )
        output.info(f"SkyRL {plan['skyrl_version']} accepts the SFT config ({plan['validated']})")
        if not dry_run:
            output.info(f"wrote {plan['dataset']}; start it on the cluster with:")
            output.info(" ".join(plan["command"]))
        output.emit_records([plan], json_out=True)
        return
    if dry_run:
        plan = sft_plan(loaded, sources, min_reward)
        output.emit_records([plan], json_out=json_out or not output.stdout_is_terminal())
        return
    summary = run_sft(
        loaded,
        sources,
        min_reward=min_reward,
        resume=resume,
        training_rights=training_rights,
        say=output.info,
    )
    output.emit_records([summary], json_out=json_out)


def export(
    source: str = typer.Argument(
        ...,
        metavar="CKPT_OR_RUN",
        help="A run folder (its latest checkpoint), ckpts/global_step_N, or an adapter.",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Folder to write the checkpoint to."),
    base: str | None = typer.Option(
        None, "--base", help="Base model folder (default: the one the run's manifest names)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace --out if it exists."),
    json_out: bool = typer.Option(False, "--json", help="Print the record as JSON."),
) -> None:
    """Merge a LoRA checkpoint (of `train sft` or `train` on the JAX backend) into its base:
    a plain Hugging Face checkpoint folder for `eval run`, vLLM or a recipe's model.path."""
    from apexrl.train.export import export_merged

    output.refuse_dash(str(out), "--out", "a checkpoint folder")
    record = export_merged(source, out, base=base, force=force)
    output.info(f"merged {len(record.merged_weights)} weight(s) of {record.adapter} into {out}")
    output.emit_path(out, json_out=json_out, base=record.base, global_step=record.global_step)
