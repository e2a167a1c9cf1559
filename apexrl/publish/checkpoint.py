"""Checks a Hugging Face checkpoint folder before it is published.

- config.json present, valid JSON with a `model_type`, and loadable by transformers
  (when transformers is installed);
- weights: every `*.safetensors` header is read directly (8-byte little-endian
  header length + JSON): each tensor's byte range must match its dtype and shape
  and lie inside the file; with `model.safetensors.index.json`, every tensor the
  index names must be in the shard it names, every shard must exist, and no
  shard may hold a tensor the index does not name;
- tokenizer (tokenizer.json, or vocab + merges, or tokenizer.model) and its
  tokenizer_config.json; a chat template (chat_template.jinja / .json or the
  `chat_template` key of tokenizer_config.json);
- generation_config.json present and valid JSON.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.errors import ApexError, ExitCode

INDEX = "model.safetensors.index.json"
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
MAX_HEADER = 100 * 1024 * 1024


@dataclass
class CheckpointInfo:
    path: Path
    config: dict
    n_tensors: int = 0
    n_params: int = 0
    weight_files: list[str] = field(default_factory=list)
    dtypes: dict[str, int] = field(default_factory=dict)  # dtype -> tensors
    chat_template_source: str | None = None


class CheckpointError(ApexError):
    def __init__(self, ckpt: Path, problems: list[str]) -> None:
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(
            f"checkpoint {ckpt} cannot be published ({len(problems)} problem(s)):\n{lines}",
            hint="fix the checkpoint (re-save it with save_pretrained, copy the tokenizer files) "
            "and rerun; nothing was uploaded",
            code=ExitCode.CHECK_FAILED,
        )
        self.problems = problems


def read_safetensors_header(path: Path) -> tuple[dict, int]:
    """(header JSON, data start offset). Raises ValueError for a malformed file."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise ValueError("file shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", raw)
        if n > MAX_HEADER or 8 + n > size:
            raise ValueError(f"header length {n} does not fit in a {size}-byte file (truncated?)")
        try:
            header = json.loads(fh.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header, 8 + n


def _check_shard(path: Path, info: CheckpointInfo, problems: list[str]) -> set[str] | None:
    name = path.name
    try:
        header, start = read_safetensors_header(path)
    except ValueError as e:
        problems.append(f"{name}: {e}")
        return None
    data_len = path.stat().st_size - start
    names: set[str] = set()
    for tname, t in header.items():
        if tname == "__metadata__":
            continue
        names.add(tname)
        try:
            dtype, shape, (a, b) = t["dtype"], t["shape"], t["data_offsets"]
        except (KeyError, TypeError, ValueError):
            problems.append(f"{name}: tensor {tname!r} has no dtype/shape/data_offsets")
            continue
        width = DTYPE_BYTES.get(dtype)
        if width is None:
            problems.append(f"{name}: tensor {tname!r} has unknown dtype {dtype!r}")
            continue
        want = math.prod(shape) * width
        if b - a != want:
            problems.append(
                f"{name}: tensor {tname!r} spans {b - a} bytes "
                f"but {dtype}{list(shape)} needs {want}"
            )
        if a < 0 or b > data_len:
            problems.append(
                f"{name}: tensor {tname!r} ends at byte {b} past the data "
                f"({data_len} bytes): truncated shard"
            )
        info.n_params += math.prod(shape)
        info.dtypes[dtype] = info.dtypes.get(dtype, 0) + 1
    info.n_tensors += len(names)
    return names


def check_checkpoint(ckpt: Path) -> CheckpointInfo:
    """Return what was learnt about `ckpt`, or raise CheckpointError listing every problem."""
    ckpt = Path(ckpt)
    problems: list[str] = []
    config: dict = {}
    cfg = ckpt / "config.json"
    if not cfg.is_file():
        problems.append("config.json is missing")
    else:
        try:
            config = json.loads(cfg.read_text())
            if not isinstance(config, dict) or not config.get("model_type"):
                problems.append("config.json has no model_type")
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"config.json is not valid JSON: {e}")
    info = CheckpointInfo(ckpt, config if isinstance(config, dict) else {})
    if config.get("model_type") and not problems:
        _load_config(ckpt, problems)

    index = ckpt / INDEX
    shards = sorted(p.name for p in ckpt.glob("*.safetensors"))
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            if not isinstance(weight_map, dict):
                raise TypeError
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            problems.append(f"{INDEX} is not valid JSON with a weight_map object")
            weight_map = {}
        by_shard: dict[str, set[str]] = {}
        for tensor, shard in weight_map.items():
            by_shard.setdefault(shard, set()).add(tensor)
        for shard, wanted in sorted(by_shard.items()):
            path = ckpt / shard
            if "/" in shard or shard.startswith("."):
                problems.append(f"{INDEX} names an unsafe shard path {shard!r}")
                continue
            if not path.is_file():
                problems.append(
                    f"shard {shard} is missing ({len(wanted)} tensor(s) of {INDEX} point to it)"
                )
                continue
            have = _check_shard(path, info, problems)
            if have is None:
                continue
            for t in sorted(wanted - have)[:5]:
                problems.append(
                    f"{INDEX} says tensor {t!r} is in {shard}, but that shard has no such tensor"
                )
            for t in sorted(have - wanted)[:5]:
                problems.append(
                    f"{shard} holds tensor {t!r} that {INDEX} does not name (index mismatch)"
                )
        info.weight_files = sorted(by_shard)
        for extra in sorted(set(shards) - set(by_shard)):
            problems.append(
                f"{extra} is not named by {INDEX}: a stale shard? remove it or fix the index"
            )
    elif shards:
        for s in shards:
            _check_shard(ckpt / s, info, problems)
        info.weight_files = shards
    else:
        problems.append("no weights: neither model.safetensors nor model.safetensors.index.json")
    has_tok = (
        (ckpt / "tokenizer.json").is_file()
        or ((ckpt / "vocab.json").is_file() and (ckpt / "merges.txt").is_file())
        or (ckpt / "tokenizer.model").is_file()
    )
    if not has_tok:
        problems.append(
            "no tokenizer: tokenizer.json (or vocab.json + merges.txt, or tokenizer.model) "
            "is missing"
        )
    tok_cfg: dict = {}
    if not (ckpt / "tokenizer_config.json").is_file():
        problems.append("tokenizer_config.json is missing")
    else:
        try:
            tok_cfg = json.loads((ckpt / "tokenizer_config.json").read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"tokenizer_config.json is not valid JSON: {e}")
    if (ckpt / "chat_template.jinja").is_file():
        info.chat_template_source = "chat_template.jinja"
    elif (ckpt / "chat_template.json").is_file():
        info.chat_template_source = "chat_template.json"
    elif isinstance(tok_cfg, dict) and tok_cfg.get("chat_template"):
        info.chat_template_source = "tokenizer_config.json"
    else:
        problems.append(
            "no chat template: add chat_template.jinja "
            "(or a chat_template key in tokenizer_config.json)"
        )
    gen = ckpt / "generation_config.json"
    if not gen.is_file():
        problems.append(
            "generation_config.json is missing "
            "(save it with model.generation_config.save_pretrained)"
        )
    else:
        try:
            json.loads(gen.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            problems.append(f"generation_config.json is not valid JSON: {e}")
    if problems:
        raise CheckpointError(ckpt, problems)
    return info


def _load_config(ckpt: Path, problems: list[str]) -> None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return  # JSON + model_type checked; transformers is not required to publish
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(str(ckpt), local_files_only=True)
    except Exception as e:  # transformers raises many types for a bad config
        problems.append(f"config.json does not load with transformers: {type(e).__name__}: {e}")
