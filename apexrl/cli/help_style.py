"""Help text in the style every Typer/Click CLI has used: flags without a type, TYPES in caps.

Typer 0.29 (which vendors its own Click) prints `<bool>` after every flag, `<path>` after
options and `{src}` for arguments in the usage line. Users read help by comparison with
`git`, `hf` and `uv`, so apexrl renders the conventional form: `--strict` alone,
`--out -o PATH`, `--shard-size INTEGER`, `[a|b]` for choices and `SRC` in the usage line.
Only the display changes; parsing and completion are untouched.
"""

from __future__ import annotations

import re

from typer.core import TyperArgument, TyperOption

# Typer's bare type labels -> Click's conventional metavars.
_TYPE_NAMES = {
    "str": "TEXT",
    "int": "INTEGER",
    "float": "FLOAT",
    "bool": "BOOLEAN",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIRECTORY",
    "datetime": "DATETIME",
    "uuid": "UUID",
}


def conventional_type(label: str | None) -> str | None:
    """`<path>` -> `PATH`, `<int>` -> `INTEGER`, `<a|b>` -> `[a|b]`, `<list[str]>` -> `TEXT`."""
    if label is None:
        return None
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    suffix = "..." if inner.endswith("...") else ""
    inner = inner.removesuffix("...")
    inner = re.sub(r"^list\[(.*)\]$", r"\1", inner)
    if "|" in inner:  # a choice: show the values, as Click does
        return f"[{inner}]{suffix}"
    if inner.endswith(" range"):
        base = inner.removesuffix(" range")
        return f"{_TYPE_NAMES.get(base, base.upper())} RANGE{suffix}"
    return f"{_TYPE_NAMES.get(inner, inner.upper())}{suffix}"


_option_type = TyperOption.display_type_rich
_argument_type = TyperArgument.display_type_rich


def _option_display_type(self: TyperOption, ctx) -> str | None:
    if self.metavar is not None:
        return self.metavar
    if self.is_flag or self.count:  # a flag takes no value: show none
        return None
    return conventional_type(_option_type(self, ctx))


def _argument_display_type(self: TyperArgument, ctx) -> str | None:
    if self.metavar is not None:
        return None  # the metavar already names it in the name column
    return conventional_type(_argument_type(self, ctx))


def _argument_display_name(self: TyperArgument) -> str:
    return self.metavar if self.metavar is not None else (self.name or "").upper()


def _argument_usage_name(self: TyperArgument) -> str:
    name = self.display_name_raw
    if self.nargs != 1:
        name += "..."
    return name if self.required else f"[{name}]"


def install() -> None:
    """Apply the conventional help style (idempotent)."""
    TyperOption.display_type_rich = _option_display_type
    TyperArgument.display_type_rich = _argument_display_type
    TyperArgument.display_name_raw = property(_argument_display_name)
    TyperArgument._usage_display_name = _argument_usage_name
