"""Reading a PEFT LoRA adapter (tar.gz or folder) as weight deltas, for engines that merge
an adapter into their weights (apexrl.engine.cpu's load_adapter)."""

from __future__ import annotations

import json
from pathlib import Path

from apexrl.errors import UsageError


def read_lora_deltas(adapter: str | Path) -> dict:
    """{model parameter name: (alpha / r) * B @ A} from a PEFT LoRA adapter (tar.gz, tar
    or folder). Archives go through apexrl's one extractor, with its refusals and limits."""
    import tempfile

    import torch
    from safetensors.torch import load_file

    src = Path(adapter)
    with tempfile.TemporaryDirectory(prefix="apexrl-adapter-") as tmp:
        if src.is_file():
            folder = unpack_adapter(src, Path(tmp))
        elif src.is_dir():
            folder = src
        else:
            raise UsageError(f"adapter {adapter}: no such file or folder")
        cfg_path, w_path = folder / "adapter_config.json", folder / "adapter_model.safetensors"
        if not cfg_path.is_file() or not w_path.is_file():
            raise UsageError(
                f"adapter {adapter}: needs adapter_config.json and adapter_model.safetensors"
            )
        cfg = json.loads(cfg_path.read_text("utf-8"))
        r, alpha = int(cfg.get("r") or 0), float(cfg.get("lora_alpha") or 0)
        if r <= 0:
            raise UsageError(f"adapter {adapter}: adapter_config.json has no rank r")
        tensors = load_file(str(w_path))
    scaling = alpha / r
    out: dict = {}
    for key, a in tensors.items():
        if ".lora_A." not in key:
            continue
        b = tensors.get(key.replace(".lora_A.", ".lora_B."))
        if b is None:
            raise UsageError(f"adapter {adapter}: {key} has no lora_B")
        module = key.split(".lora_A.")[0].removeprefix("base_model.model.")
        a32, b32 = a.to(torch.float32), b.to(torch.float32)
        # embeddings: A (vocab, r) gathered, then B (r, dim); linear layers (PEFT layout):
        # A (r, in), B (out, r)
        embed = module.endswith("embed_tokens")
        delta = scaling * (a32 @ b32) if embed else scaling * (b32 @ a32)
        name = module + ".weight"
        out[name] = out[name] + delta if name in out else delta
    return out


def unpack_adapter(archive: Path, dest: Path) -> Path:
    """Extract an adapter archive (tar.gz as SkyRL's JAX backend saves it, or plain tar)
    into the empty folder `dest` (apexrl.artifacts.archive_extract: no links, devices
    or names leaving `dest`; the APEXRL_ARCHIVE_MAX_* limits). Returns `dest`."""
    from apexrl.artifacts.archive_extract import extract_tar_or_targz

    extract_tar_or_targz(
        archive.read_bytes(), dest, where=f"adapter {archive}", links="none", empty=True
    )
    return dest
