"""CLI options built from the budget table (apexrl.agent.budgets.BUDGETS).

    @budget_options
    def run(..., budgets: dict) -> None: ...

gives the command one option per budget that has a `flag`, typed and defaulted from
the table (eval's defaults), in place of its `budgets` parameter, and calls it with
`budgets=` a dict of their values. A new budget with a flag is one line in the table.
The table imports nothing heavy, so `apexrl --help` stays fast.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import typer

from apexrl.agent.budgets import BUDGETS


def _cli_type(annotation: Any, name: str) -> Any:
    """A type typer takes: `X | None` -> X, Literal[...] -> a StrEnum of its values."""
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _cli_type(args[0], name)
    if origin is typing.Literal:
        values = [str(v) for v in typing.get_args(annotation)]
        return StrEnum(name.title().replace("_", ""), {v: v for v in values})
    return annotation


def budget_options(fn: Callable) -> Callable:
    flagged = [b for b in BUDGETS if b.flag]
    added = [
        inspect.Parameter(
            b.name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=_cli_type(b.type, b.name),
            default=typer.Option(b.eval_value, b.flag, help=b.help),
        )
        for b in flagged
    ]
    sig = inspect.signature(fn)
    params: list[inspect.Parameter] = []
    for p in sig.parameters.values():
        if p.name == "budgets":
            params.extend(added)  # the options take the `budgets` parameter's place
        else:
            params.append(p)
    hints = typing.get_type_hints(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        budgets = {b.name: b.eval_value for b in BUDGETS}
        for b in flagged:
            v = kwargs.pop(b.name)
            budgets[b.name] = v.value if isinstance(v, StrEnum) else v
        return fn(*args, budgets=budgets, **kwargs)

    del wrapper.__wrapped__  # typer reads the signature below, not fn's
    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{k: v for k, v in hints.items() if k != "budgets"},
        **{p.name: p.annotation for p in added},
    }
    return wrapper
