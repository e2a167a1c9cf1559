"""Options that several commands share, declared once, and the budget options.

An option two or more commands declare alike (the same flag, help and default) is one
constant here, used as a parameter's default (`json_out: bool = JSON_EVEN`), so its
help, `apexrl --help` and the completions cannot drift apart between the commands.

The budget options are built from the budget table (apexrl.agent.budgets.BUDGETS):

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

# --json in the four wordings the commands use; the flag does the same in each: records
# as NDJSON on stdout even when stdout is a terminal
JSON_TOO = typer.Option(False, "--json", help="NDJSON output on a terminal too.")
JSON_EVEN = typer.Option(False, "--json", help="NDJSON even on a terminal.")
JSON_STDOUT = typer.Option(False, "--json", help="NDJSON on stdout even on a terminal.")
JSON_NDJSON = typer.Option(False, "--json", help="NDJSON output.")
HOST = typer.Option("127.0.0.1", "--host", help="Address to listen on.")
# the training commands' (train rl, train sft)
RESUME = typer.Option(False, "--resume", help="Continue from the run's latest checkpoint.")
TRAINING_RIGHTS = typer.Option(
    None,
    "--training-rights",
    help="Your statement of the right to train on data marked evaluation-only (its terms "
    "forbid training); recorded in the run manifest.",
)


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
