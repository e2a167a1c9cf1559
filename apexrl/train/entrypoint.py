"""The Ray job's entrypoint: `python -m apexrl.train.entrypoint run_spec.json [--check-only]`.

1. Preflight (always; all of it with --check-only): read the run spec, write the
   manifest next to the checkpoints, report which forwarded variables arrived
   (names only), prepare the data (unpack the task dataset, write SkyRL's prompt
   table: prompt, env_class, task_path).
2. Build SkyRL's own config from the rendered overrides, run SkyRL's validation,
   and start the experiment on SkyRL's public classes: `BasePPOExp` with apexrl's
   trial generator, and `FullyAsyncRayPPOTrainer` (or `FullyAsyncTrainerSim` when
   `trainer.fully_async.simulate_training`) for fully async runs, `RayPPOTrainer`
   otherwise; eval-mode recipes run `EvalOnlyEntrypoint` with the same generator.

SkyRL is imported only here, inside functions.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from apexrl.train.generator import TrialGenerator
from apexrl.train.launch import MANIFEST_NAME
from apexrl.train.render import RunSpec


def log(msg: str) -> None:
    print(f"[apexrl] {msg}", flush=True)


def run_dir(spec: RunSpec) -> Path | None:
    ckpt = spec.plan.checkpoint_path
    if "://" in ckpt:
        return None
    return Path(os.path.expanduser(ckpt)).parent


def write_manifest(spec: RunSpec, manifest_src: Path) -> str:
    """Copy the submitted manifest next to the checkpoints, with the job id added."""
    data = json.loads(manifest_src.read_text("utf-8")) if manifest_src.is_file() else {}
    text = json.dumps(data, indent=1)
    ckpt = spec.plan.checkpoint_path
    if "://" in ckpt:
        try:
            from cloudpathlib import CloudPath

            target = CloudPath(ckpt.rstrip("/")).parent / MANIFEST_NAME
            target.write_text(text)
            return str(target)
        except ImportError:
            log("cloudpathlib missing: manifest not copied to object storage")
            return "(not written)"
    from apexrl.artifacts.atomic import write_text_atomic

    target = run_dir(spec) / MANIFEST_NAME  # type: ignore[operator]
    write_text_atomic(target, text)
    return str(target)


def prepare_data(source: str | None, out: Path, name: str) -> str | None:
    """SkyRL prompt table for a task dataset (Parquet from `apexrl tasks pack`) or a
    folder of Harbor task dirs; returns the table's path. Task dirs land in out/tasks."""
    if not source:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(os.path.expanduser(source))
    tasks = out / "tasks"
    if src.is_dir() and any(p.is_file() for p in src.glob("*/task.toml")):
        tasks = src
    else:
        from apexrl.tasks.unpack import unpack_dataset

        unpack_dataset(source, tasks, strict=True)
    rows = []
    for d in sorted(p for p in tasks.iterdir() if (p / "task.toml").is_file()):
        instr = d / "instruction.md"
        prompt = instr.read_text("utf-8") if instr.is_file() else ""
        rows.append(
            {
                "prompt": [{"role": "user", "content": prompt}],
                "env_class": "apexrl",
                "task_path": str(d.relative_to(tasks)),
            }
        )
    if not rows:
        raise SystemExit(f"[apexrl] no task dirs found in {source}")
    table_path = out / f"{name}.parquet"
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), table_path)
    log(f"{name}: {len(rows)} tasks -> {table_path}")
    return str(table_path)


def preflight(spec_path: Path) -> tuple[RunSpec, dict]:
    spec = RunSpec.model_validate_json(spec_path.read_text("utf-8"))
    log(f"run {spec.run_name} (recipe {spec.recipe}, {spec.mode})")
    arrived = [k for k in spec.env_forward if os.environ.get(k)]
    log(f"forwarded variables present: {', '.join(arrived) or 'none'}")
    log(f"manifest: {write_manifest(spec, spec_path.parent / MANIFEST_NAME)}")
    base = run_dir(spec) or Path(os.path.expanduser(f"~/apexrl/runs/{spec.run_name}"))
    data = base / "data"
    overrides = dict(spec.skyrl)
    train = prepare_data(spec.data_train, data, "train")
    val = prepare_data(spec.data_val, data, "val")
    if train:
        overrides["data.train_data"] = [train]
    if val:
        overrides["data.val_data"] = [val]
    tasks_dir = str(data / "tasks")
    if spec.data_train and Path(os.path.expanduser(spec.data_train)).is_dir():
        src = Path(os.path.expanduser(spec.data_train))
        if any(p.is_file() for p in src.glob("*/task.toml")):
            tasks_dir = str(src)
    spec.generator.tasks_dir = tasks_dir
    spec.generator.logs_dir = os.path.expanduser(spec.generator.logs_dir)
    return spec, overrides


def make_generator_class():
    from skyrl.train.generators.base import GeneratorInterface

    class SkyRLTrialGenerator(TrialGenerator, GeneratorInterface):
        """apexrl's TrialGenerator under SkyRL's GeneratorInterface."""

        async def generate(self, input_batch):  # type: ignore[override]
            return await TrialGenerator.generate(self, input_batch)

    return SkyRLTrialGenerator


def endpoints_of(client) -> list[str]:
    urls = list(getattr(client, "server_urls", None) or [])
    if not urls and getattr(client, "proxy_url", None):
        urls = [client.proxy_url]
    return urls


def run(spec: RunSpec, overrides: dict) -> None:
    import ray
    from skyrl.train.config import SkyRLTrainConfig
    from skyrl.train.entrypoints.main_base import BasePPOExp
    from skyrl.train.utils.utils import initialize_ray, validate_cfg

    cfg = SkyRLTrainConfig.from_cli_overrides(overrides)
    gen_cls = make_generator_class()
    settings = spec.generator

    def generator_for(client):
        s = settings.model_copy(update={"endpoints": settings.endpoints or endpoints_of(client)})
        return gen_cls(s)

    if spec.mode == "eval":
        import asyncio

        from skyrl.train.entrypoints.main_generate import EvalOnlyEntrypoint
        from skyrl.train.utils.utils import validate_generator_cfg

        class ApexEval(EvalOnlyEntrypoint):
            def get_generator(self, cfg, tokenizer, inference_engine_client):
                return generator_for(inference_engine_client)

        validate_generator_cfg(cfg)
        initialize_ray(cfg)

        @ray.remote(num_cpus=1)
        def _eval(cfg):
            exp = ApexEval(cfg)
            client = exp.get_inference_client()
            return asyncio.run(exp.run(client))

        log(f"eval metrics: {ray.get(_eval.remote(cfg))}")
        return

    class ApexExp(BasePPOExp):
        def get_generator(self, cfg, tokenizer, inference_engine_client):
            return generator_for(inference_engine_client)

        def get_trainer(self, cfg, tracker, tokenizer, train_dataset, eval_dataset,
                        inference_engine_client, generator, colocate_pg):  # fmt: skip
            kwargs = dict(
                cfg=cfg,
                tracker=tracker,
                tokenizer=tokenizer,
                train_dataset=train_dataset,
                eval_dataset=eval_dataset,
                inference_engine_client=inference_engine_client,
                generator=generator,
                colocate_pg=colocate_pg,
            )
            if cfg.trainer.fully_async.enabled:
                if cfg.trainer.fully_async.simulate_training:
                    from skyrl.train.fully_async_trainer_sim import FullyAsyncTrainerSim

                    class Sim(FullyAsyncTrainerSim):
                        def init_weight_sync_state(self):
                            super().init_weight_sync_state()
                            # SkyRL 0.4.0: the simulated dispatch lacks two hooks the
                            # fully async loop calls (step timings, final save)
                            d = self.dispatch
                            if not hasattr(d, "get_timing_metrics"):
                                d.get_timing_metrics = dict
                            if not hasattr(d, "finalize_pending_saves"):
                                d.finalize_pending_saves = lambda *a, **k: None

                    return Sim(**kwargs)
                from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer

                return FullyAsyncRayPPOTrainer(**kwargs)
            return super().get_trainer(**kwargs)

    validate_cfg(cfg)
    initialize_ray(cfg)

    @ray.remote(num_cpus=1)
    def _train(cfg):
        ApexExp(cfg).run()

    ray.get(_train.remote(cfg))
    log("training finished")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    check_only = "--check-only" in argv
    args = [a for a in argv if a != "--check-only"]
    if len(args) != 1:
        print("usage: python -m apexrl.train.entrypoint run_spec.json [--check-only]")
        return 2
    spec, overrides = preflight(Path(args[0]))
    if check_only:
        log("check-only: preflight passed, training not started")
        return 0
    try:
        import skyrl  # noqa: F401
    except ImportError:
        log("SkyRL is not installed on the cluster: pip install 'apexrl[train]'")
        return 1
    run(spec, overrides)
    return 0


if __name__ == "__main__":
    sys.exit(main())
