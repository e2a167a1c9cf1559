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


def task_meta(task_dir: Path) -> dict:
    """task_id, world_id, domain of a task dir (apexrl.tasks.meta: task.toml's [metadata],
    archipelago.json filling what it lacks); the dir name stands in for a missing task id,
    and a task whose metadata cannot be read keeps only that."""
    from apexrl.errors import BadRecordError
    from apexrl.tasks.meta import find_task_meta

    try:
        meta = find_task_meta(task_dir, require_world=False)
    except BadRecordError:
        meta = None
    return {
        "task_id": meta.task_id if meta else task_dir.name,
        "world_id": meta.world_id if meta else "",
        "domain": meta.domain if meta else "",
    }


def _is_task_dirs(src: Path) -> bool:
    return src.is_dir() and any(p.is_file() for p in src.glob("*/task.toml"))


def prepare_data(source: str | None, out: Path, name: str) -> tuple[str, list[dict]] | None:
    """SkyRL's prompt table for one split (`name`: train or val) from a task dataset (Parquet
    from `apexrl tasks pack`) or a folder of Harbor task dirs; returns (table path, rows).

    A dataset is unpacked into out/<name>/tasks, a folder of its own per split, replaced
    whole on every run (a rerun under the same name never mixes splits or old tasks). Rows:
    prompt, env_class, task_path (absolute), data_source (the task's domain: SkyRL logs eval
    metrics per data_source), task_id, world_id.
    """
    if not source:
        return None
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(os.path.expanduser(source))
    if _is_task_dirs(src):
        tasks = src.resolve()
    else:
        from apexrl.tasks.unpack import unpack_dataset

        split_dir = out / name
        tasks = split_dir / "tasks"
        tmp = split_dir / "tasks.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        unpack_dataset(source, tmp, strict=True)
        shutil.rmtree(tasks, ignore_errors=True)
        tmp.rename(tasks)
    rows = []
    for d in sorted(p for p in tasks.iterdir() if (p / "task.toml").is_file()):
        instr = d / "instruction.md"
        prompt = instr.read_text("utf-8") if instr.is_file() else ""
        meta = task_meta(d)
        rows.append(
            {
                "prompt": [{"role": "user", "content": prompt}],
                "env_class": "apexrl",
                "task_path": str(d.resolve()),
                "data_source": meta["domain"] or "apexrl",
                "task_id": meta["task_id"],
                "world_id": meta["world_id"],
            }
        )
    if not rows:
        raise SystemExit(f"[apexrl] no task dirs found in {source}")
    table_path = out / f"{name}.parquet"
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), table_path)
    log(f"{name}: {len(rows)} tasks -> {table_path} (task dirs in {tasks})")
    return str(table_path), rows


def check_disjoint(train: list[dict], val: list[dict]) -> None:
    """Train and eval must share no task and no world (contamination)."""
    from apexrl.errors import BadRecordError

    for key, what in (("task_id", "task"), ("world_id", "world")):
        shared = sorted({r[key] for r in train if r[key]} & {r[key] for r in val if r[key]})
        if shared:
            more = f" (+{len(shared) - 5} more)" if len(shared) > 5 else ""
            raise BadRecordError(
                "data",
                f"train and eval data share {len(shared)} {what}(s): {', '.join(shared[:5])}{more}",
                hint="split by world: apexrl tasks split DATASET --by world -o DIR",
            )


def preflight(spec_path: Path) -> tuple[RunSpec, dict]:
    spec = RunSpec.model_validate_json(spec_path.read_text("utf-8"))
    log(f"run {spec.run_name} (recipe {spec.recipe}, {spec.mode})")
    arrived = [k for k in spec.env_forward if os.environ.get(k)]
    log(f"forwarded variables present: {', '.join(arrived) or 'none'}")
    if not os.environ.get("CUDA_HOME") and Path("/usr/local/cuda/bin/nvcc").is_file():
        os.environ["CUDA_HOME"] = "/usr/local/cuda"  # SkyRL hands it to its workers
    log(f"manifest: {write_manifest(spec, spec_path.parent / MANIFEST_NAME)}")
    base = run_dir(spec) or Path(os.path.expanduser(f"~/apexrl/runs/{spec.run_name}"))
    data = base / "data"
    overrides = dict(spec.skyrl)
    train = prepare_data(spec.data_train, data, "train")
    val = prepare_data(spec.data_val, data, "val")
    if train and val:
        check_disjoint(train[1], val[1])
    if train:
        overrides["data.train_data"] = [train[0]]
    if val:
        overrides["data.val_data"] = [val[0]]
    spec.generator.tasks_dir = str(data)  # task_path in the tables is absolute
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
    from apexrl.errors import ApexError

    try:
        spec, overrides = preflight(Path(args[0]))
    except ApexError as e:
        log(f"error: {e}" + (f" ({e.hint})" if getattr(e, "hint", None) else ""))
        return 1
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
