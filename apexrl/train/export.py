"""`apexrl train export`: a LoRA checkpoint merged into its base, as a plain HF folder.

The source is a JAX run's folder (RL or the warm start: its latest checkpoint), its
ckpts/ folder, one global_step_<N>/ folder, or an adapter (PEFT tar.gz or folder) with
`base` given. The base model is the one the run's manifest names (apexrl_manifest.json
`model`) unless `base` says otherwise. The merge is the engine's: W = W_base + (alpha / r)
* B @ A for every adapted weight (apexrl.engine.lora), computed in float32 and stored in
the base's dtype. The output holds the weights (safetensors), config.json,
generation_config.json and the base's tokenizer and chat template files, plus
apexrl_export.json (where it came from): `apexrl eval run DIR`, vLLM and an RL recipe's
`[model].path` take it as any checkpoint.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apexrl.errors import UsageError
from apexrl.train.jaxrl.checkpoints import ADAPTER, MANIFEST_NAME, latest_step

EXPORT_RECORD = "apexrl_export.json"
# files of the base copied beside the weights (what a tokenizer and a chat template need)
BASE_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.model",
)


class ExportRecord(BaseModel):
    """apexrl_export.json: what a merged checkpoint was made of."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = "1"
    base: str
    adapter: str
    global_step: int | None = None
    run_dir: str | None = None
    lora_rank: int
    lora_alpha: float
    merged_weights: list[str]
    dtype: str


def resolve_source(src: str | Path) -> tuple[Path, Path | None, int | None]:
    """(adapter, manifest or None, step or None) for a run folder, a ckpts/ folder, a
    global_step_<N>/ folder, or an adapter itself."""
    p = Path(src).expanduser().resolve()
    if not p.exists():
        raise UsageError(f"{src}: no such file or folder")
    if p.is_file():
        return p, None, None
    if (p / "adapter_config.json").is_file():  # a PEFT folder
        return p, None, None
    if (p / ADAPTER).is_file() and p.name.startswith("global_step_"):
        step = p.name.removeprefix("global_step_")
        man = p.parent / MANIFEST_NAME
        return p / ADAPTER, man if man.is_file() else None, int(step) if step.isdigit() else None
    for ckpts in (p, p / "ckpts"):
        if (ckpts / MANIFEST_NAME).is_file() or any(ckpts.glob("global_step_*")):
            step = latest_step(ckpts)
            if step is None:
                raise UsageError(
                    f"{src}: no complete checkpoint in {ckpts}",
                    hint="a run writes one every checkpoint.interval steps and at its end; "
                    "pass a global_step_<N> folder that has adapter.tar.gz",
                )
            man = ckpts / MANIFEST_NAME
            return (
                ckpts / f"global_step_{step}" / ADAPTER,
                man if man.is_file() else None,
                step,
            )
    raise UsageError(
        f"{src}: not a run folder, a checkpoint or an adapter",
        hint="pass runs/NAME (a `train` or `train sft` run), its ckpts/global_step_<N>, "
        "or an adapter.tar.gz with --base MODEL",
    )


def base_model(manifest: Path | None, base: str | None) -> Path:
    if base is None:
        if manifest is None:
            raise UsageError(
                "the base model is not known (no run manifest beside this adapter)",
                hint="pass --base MODEL_DIR (the checkpoint folder the adapter was trained on)",
            )
        base = json.loads(manifest.read_text("utf-8")).get("model")
        if not base:
            raise UsageError(f"{manifest}: names no model", hint="pass --base MODEL_DIR")
    path = Path(base).expanduser().resolve()
    if not (path / "config.json").is_file():
        raise UsageError(
            f"base model {base}: not a checkpoint folder here (no config.json)",
            hint="pass --base MODEL_DIR (the checkpoint folder the adapter was trained on)",
        )
    return path


def export_merged(
    src: str | Path, out: str | Path, *, base: str | None = None, force: bool = False
) -> ExportRecord:
    """Merge the adapter of `src` into its base; write the HF folder `out` (atomically)."""
    from apexrl.artifacts.atomic import atomic_dir
    from apexrl.engine.cpu import _torch
    from apexrl.engine.lora import read_lora_deltas, unpack_adapter

    adapter, manifest, step = resolve_source(src)
    base_dir = base_model(manifest, base)
    out = Path(out).expanduser().resolve()
    if out.exists() and not force:
        raise UsageError(f"{out} already exists", hint="pass --force to replace it, or another -o")
    torch = _torch()
    from transformers import AutoConfig, AutoModelForCausalLM

    deltas, acfg = _read_adapter(adapter, read_lora_deltas, unpack_adapter)
    cfg = AutoConfig.from_pretrained(str(base_dir))
    dtype = getattr(cfg, "dtype", None) or getattr(cfg, "torch_dtype", None) or torch.float32
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32)
    params = dict(model.named_parameters())
    unknown = sorted(k for k in deltas if k not in params)
    if unknown:
        tied = bool(getattr(model.config, "tie_word_embeddings", False))
        raise UsageError(
            f"adapter {adapter}: {len(unknown)} weight(s) the base {base_dir} does not have, "
            f"e.g. {unknown[0]}",
            hint="the base has tied embeddings: an adapter on the output layer needs an untied base"
            if tied
            else "the adapter was trained on another model: pass its --base",
        )
    with torch.no_grad():
        for k, d in deltas.items():
            p = params[k]
            if tuple(d.shape) != tuple(p.shape):
                raise UsageError(
                    f"adapter {adapter}: {k} is {tuple(d.shape)}, the base's is {tuple(p.shape)}",
                    hint="the adapter was trained on another model: pass its --base",
                )
            p.add_(d.to(p.dtype))
    model = model.to(dtype)
    record = ExportRecord(
        base=str(base_dir),
        adapter=str(adapter),
        global_step=step,
        run_dir=str(manifest.parent.parent) if manifest else None,
        lora_rank=int(acfg.get("r") or 0),
        lora_alpha=float(acfg.get("lora_alpha") or 0.0),
        merged_weights=sorted(deltas),
        dtype=str(dtype).removeprefix("torch."),
    )
    with atomic_dir(out, force=force) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        for name in BASE_FILES:
            if (base_dir / name).is_file():
                shutil.copyfile(base_dir / name, tmp / name)
        (tmp / EXPORT_RECORD).write_text(record.model_dump_json(indent=1), "utf-8")
    return record


def _read_adapter(adapter: Path, read_deltas, unpack) -> tuple[dict, dict]:
    """(weight deltas, adapter_config.json) of an adapter archive or folder."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="apexrl-adapter-") as tmp:
        folder = adapter if adapter.is_dir() else unpack(adapter, Path(tmp))
        cfg_path = folder / "adapter_config.json"
        cfg = json.loads(cfg_path.read_text("utf-8")) if cfg_path.is_file() else {}
        return read_deltas(folder), cfg
