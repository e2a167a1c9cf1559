"""One loader for "module:attr" import paths, the strings the registries and records use
to name code loaded only when it runs: an environment's Harbor class and its host check
(apexrl.envs.registry), an engine's `launch` (apexrl.engine.registry), a trial function
(apexrl.trial.executors, apexrl.trial.shards), a command group (apexrl.cli.app).

tests/test_structure.py reads every "apexrl....:attr" string in the package as an import
of that module: such a string may not point up a floor any more than an import may.
"""

from __future__ import annotations

from typing import Any


def split(spec: str) -> tuple[str, str]:
    """("module", "attr") of "module:attr"; ValueError naming the string otherwise."""
    module, sep, attr = str(spec).partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{spec!r} is not 'module:attr'")
    return module, attr


def load(spec: str) -> Any:
    """The object "module:attr" names, its module imported now."""
    import importlib

    module, attr = split(spec)
    return getattr(importlib.import_module(module), attr)
