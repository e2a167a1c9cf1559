"""SkyRL's configuration key paths, checked without SkyRL installed.

`skyrl_keys.json` beside this module lists every key path of SkyRL's
`SkyRLTrainConfig` (dataclass fields, dotted) with a coarse type: int, float,
bool, str, list, dict (free-form: any sub-key is allowed), or `X|null` when the
field is optional. It is generated from the installed SkyRL by
`python -m apexrl.train.skyrl_keys` (regenerate it when the pinned SkyRL moves);
rendering checks every key it writes against it, so a renamed SkyRL field fails
at `--dry-run` on a laptop, not on the cluster.
"""

from __future__ import annotations

import json
import typing
from functools import cache
from pathlib import Path

KEYS_FILE = Path(__file__).with_name("skyrl_keys.json")


@cache
def snapshot() -> dict:
    """{"skyrl_version": ..., "keys": {path: type}}."""
    return json.loads(KEYS_FILE.read_text("utf-8"))


def key_types() -> dict[str, str]:
    return snapshot()["keys"]


def lookup(path: str) -> str | None:
    """The coarse type of `path`, or None when SkyRL has no such key.

    Sub-keys of a free-form dict field (e.g. engine_init_kwargs.max_model_len) are
    accepted and typed "any".
    """
    keys = key_types()
    if path in keys:
        return keys[path]
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        t = keys.get(".".join(parts[:i]))
        if t is not None:
            return "any" if t.split("|")[0] == "dict" else None
    return None


def type_ok(kind: str, value: object) -> bool:
    if kind == "any":
        return True
    options = kind.split("|")
    if value is None:
        return "null" in options
    for o in options:
        if o == "bool" and isinstance(value, bool):
            return True
        if o == "int" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if o == "float" and isinstance(value, int | float) and not isinstance(value, bool):
            return True
        if o == "str" and isinstance(value, str):
            return True
        if o == "list" and isinstance(value, list):
            return True
        if o == "dict" and isinstance(value, dict):
            return True
        if o == "any":
            return True
    return False


# --- generation (needs SkyRL) ------------------------------------------------------------
def _coarse(tp) -> str:
    import dataclasses
    import enum

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _coarse(typing.get_args(tp)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        parts = []
        for a in typing.get_args(tp):
            parts.append("null" if a is type(None) else _coarse(a))
        return "|".join(dict.fromkeys(parts))
    if origin is typing.Literal:
        return "str" if all(isinstance(a, str) for a in typing.get_args(tp)) else "any"
    if origin in (list, tuple) or tp in (list, tuple):
        return "list"
    if origin is dict or tp is dict:
        return "dict"
    if isinstance(tp, type):
        if dataclasses.is_dataclass(tp):
            return "section"
        if issubclass(tp, enum.Enum):
            return "str"
        for t in (bool, int, float, str):
            if issubclass(tp, t):
                return t.__name__
    return "any"


def generate() -> dict:
    import dataclasses
    from importlib.metadata import version

    from skyrl.train.config import SkyRLTrainConfig

    out: dict[str, str] = {}

    def walk(cls, prefix: str) -> None:
        hints = typing.get_type_hints(cls, include_extras=True)
        for f in dataclasses.fields(cls):
            tp = hints.get(f.name, f.type)
            path = f"{prefix}{f.name}"
            kind = _coarse(tp)
            inner = tp
            if typing.get_origin(tp) is typing.Union:
                non_null = [a for a in typing.get_args(tp) if a is not type(None)]
                inner = non_null[0] if len(non_null) == 1 else tp
            if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                if "null" in kind.split("|"):
                    out[path] = "section|null"
                walk(inner, path + ".")
            else:
                out[path] = kind

    walk(SkyRLTrainConfig, "")
    return {"skyrl_version": version("skyrl"), "keys": dict(sorted(out.items()))}


if __name__ == "__main__":  # pragma: no cover - run by hand when SkyRL moves
    KEYS_FILE.write_text(json.dumps(generate(), indent=1) + "\n", "utf-8")
    print(KEYS_FILE)
