"""The warm start on GPU: SkyRL 0.4.0's own SFT trainer (`skyrl.train.main_sft`), rendered
from the same recipe and the same kept trials as the CPU path.

- The data: a pretokenized Parquet dataset in SkyRL's schema (`input_ids`, the full token
  stream; `loss_mask`, 0/1 over the same positions: 1 on the tokens the model sampled),
  read by `pretokenized_dataset_paths` (skyrl.train.dataset.pretokenized): no chat template
  is applied again, so the tokens trained are exactly the ones the eval run recorded.
- The config: `SFTConfig` key paths from the recipe (`[sft]` lr, epochs or max_steps,
  batch size, seed, max_seq_len; `[training]` strategy, parallelism and micro batch;
  `[cluster]` placement; `[checkpoint]` paths; `[logging]`), validated by SkyRL itself:
  `SFTConfig.from_cli_overrides`, `validate_sft_cfg` and `build_skyrl_config_for_sft` (what
  `main_sft` runs before it starts Ray), plus SkyRL's loader on the written dataset.

The job is `python -m skyrl.train.main_sft KEY=VALUE ...` on the cluster (SFT_ENTRYPOINT).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from apexrl.errors import BadRecordError, UsageError
from apexrl.train.recipe import LoadedRecipe

SFT_ENTRYPOINT = "skyrl.train.main_sft"
DATASET = "sft-pretokenized.parquet"


def write_pretokenized(examples, path: Path) -> Path:
    """The kept trials as SkyRL's pretokenized rows (plus where each came from)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from apexrl.artifacts.atomic import atomic_path

    table = pa.table(
        {
            "input_ids": [e.prompt_ids + e.response_ids for e in examples],
            "loss_mask": [[0] * len(e.prompt_ids) + list(e.loss_mask) for e in examples],
            "run_dir": [e.run_dir for e in examples],
            "trial_id": [e.trial_id for e in examples],
        }
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return path


def sft_overrides(loaded: LoadedRecipe, dataset: str, *, resume: bool = False) -> dict[str, Any]:
    """SkyRL SFTConfig key paths for the recipe (every key one SFTConfig has)."""
    from apexrl.train.jaxrl.sft import sft_section
    from apexrl.train.skyrl_config import checkpoint_paths

    r = loaded.recipe
    s = sft_section(loaded)
    tr, cl = r.training, r.cluster
    ckpt, export = checkpoint_paths(r)
    o: dict[str, Any] = {
        "strategy": tr.strategy,
        "model.path": r.model.path,
        "pretokenized_dataset_paths": [dataset],
        "optimizer_config.lr": s.lr,
        "optimizer_config.weight_decay": s.weight_decay,
        "batch_size": s.batch_size,
        "micro_train_batch_size_per_gpu": tr.micro_batch_per_gpu,
        "seed": s.seed,
        "placement.num_nodes": cl.training_nodes,
        "placement.num_gpus_per_node": cl.gpus_per_node,
        "logger": r.logging.logger,
        "project_name": r.logging.project,
        "run_name": r.resolved_run_name,
        "ckpt_path": ckpt,
        "ckpt_interval": r.checkpoint.interval,
        "max_ckpts_to_keep": r.checkpoint.keep,
        "export_path": export,
        "hf_save_interval": max(r.checkpoint.hf_save_interval, 0),
        "resume_from": "latest" if resume else "",
    }
    # SkyRL refuses both at once: max_steps wins, as on CPU
    if s.max_steps:
        o["num_steps"] = s.max_steps
    else:
        o["num_epochs"] = s.epochs
    if s.max_seq_len:
        o["max_length"] = s.max_seq_len
    if s.warmup_steps:  # SkyRL's default scheduler is constant_with_warmup: the same shape
        o["optimizer_config.num_warmup_steps"] = s.warmup_steps
    if tr.adam_betas:
        o["optimizer_config.adam_betas"] = list(tr.adam_betas)
    if tr.max_grad_norm is not None:
        o["optimizer_config.max_grad_norm"] = tr.max_grad_norm
    if tr.strategy == "megatron":
        o["megatron_config.tensor_model_parallel_size"] = tr.tensor_parallel
        o["megatron_config.pipeline_model_parallel_size"] = tr.pipeline_parallel
        o["megatron_config.context_parallel_size"] = tr.context_parallel
    return o


def require_skyrl_sft() -> None:
    try:
        import loguru  # noqa: F401
        import skyrl.train.config.sft_config  # noqa: F401
    except ImportError as e:
        raise UsageError(
            f"SkyRL's SFT trainer is not installed here ({e.name or e})",
            hint="install the train extra (`make train-env`), or train on this CPU: "
            'training.backend = "jax" (--set training.backend=\'"jax"\')',
        ) from None


def validate_sft(overrides: dict[str, Any], where: str, *, check_data: bool = True) -> str:
    """SkyRL's own checks (what `main_sft` runs before starting Ray); SkyRL's version.
    With `check_data`, SkyRL's pretokenized loader reads the dataset too."""
    import contextlib
    import io
    from importlib.metadata import version

    require_skyrl_sft()
    from loguru import logger

    logger.disable("skyrl")
    try:
        from skyrl.train.config.sft_config import (
            SFTConfig,
            build_skyrl_config_for_sft,
            validate_sft_cfg,
        )

        try:
            with contextlib.redirect_stdout(io.StringIO()):
                cfg = SFTConfig.from_cli_overrides(dict(overrides))
                validate_sft_cfg(cfg)
                build_skyrl_config_for_sft(cfg)
        except (ValueError, TypeError, AssertionError, KeyError) as e:
            msg = str(e) or type(e).__name__
            raise BadRecordError(where, f"SkyRL's SFT config check rejects it: {msg}") from None
        if check_data:
            from skyrl.train.dataset.pretokenized import load_from_pretokenized

            for path in cfg.pretokenized_dataset_paths or []:
                try:
                    ds = load_from_pretokenized(path, max_length=cfg.max_length)
                except (ValueError, FileNotFoundError) as e:
                    raise BadRecordError(path, f"SkyRL's loader rejects it: {e}") from None
                if len(ds) == 0:
                    raise BadRecordError(path, "SkyRL's loader keeps no row of it")
        return version("skyrl")
    finally:
        logger.enable("skyrl")


def launch_command(overrides: dict[str, Any]) -> list[str]:
    """`python -m skyrl.train.main_sft key=value ...` (values as JSON where not plain)."""
    args = []
    for k, v in overrides.items():
        text = v if isinstance(v, str) else json.dumps(v)
        args.append(f"{k}={text}")
    return ["python", "-m", SFT_ENTRYPOINT, *args]


def prepare_skyrl_sft(
    loaded: LoadedRecipe,
    sources: list[str],
    *,
    min_reward: float | None = None,
    resume: bool = False,
    dry_run: bool = False,
    training_rights: str | None = None,
) -> dict[str, Any]:
    """`apexrl train sft` with `training.backend = "skyrl"`: the kept trials as SkyRL's
    pretokenized dataset, the SFTConfig rendered and validated by SkyRL. With `dry_run`
    the dataset goes to a temporary folder for SkyRL's loader and nothing is kept; else it
    is written into the run folder with sft_job.json (the overrides and the command that
    starts SkyRL's SFT trainer on the cluster)."""
    import tempfile

    from apexrl.artifacts.atomic import write_text_atomic
    from apexrl.tasks.terms import check_training_rights
    from apexrl.train.jaxrl.sft import SftRun
    from apexrl.train.sft_data import read_runs

    require_skyrl_sft()  # before anything is written
    r = loaded.recipe
    run = SftRun(loaded, resume=resume)
    srcs, examples = read_runs(
        sources, model=r.model.path, tokenizer=r.model.tokenizer, min_reward=min_reward
    )
    data_terms = check_training_rights([s.dataset for s in srcs], training_rights)
    final = run.root / "data" / DATASET
    with tempfile.TemporaryDirectory(prefix="apexrl-sft-") as tmp:
        path = Path(tmp) / DATASET if dry_run else final
        path.parent.mkdir(parents=True, exist_ok=True)
        write_pretokenized(examples, path)
        version = validate_sft(sft_overrides(loaded, str(path), resume=resume), loaded.source)
    overrides = sft_overrides(loaded, str(final), resume=resume)
    plan = {
        "run_name": run.run_name,
        "backend": "skyrl",
        "run_dir": str(run.root),
        "dataset": str(final),
        "trajectories": len(examples),
        "trained_tokens": sum(e.n_trained for e in examples),
        "from": [s.run_dir for s in srcs],
        "trials": {s.run_dir: s.trials for s in srcs},
        "skyrl_version": version,
        "validated": "SFTConfig.from_cli_overrides, validate_sft_cfg, "
        "build_skyrl_config_for_sft, load_from_pretokenized",
        "skyrl": overrides,
        "command": launch_command(overrides),
        "data_terms": data_terms,
        "training_rights": training_rights if data_terms else None,
        "recipe_sha256": loaded.sha256,
    }
    if not dry_run:
        write_text_atomic(run.root / "sft_job.json", json.dumps(plan, indent=1))
    return plan
