"""The recipe's prompts, read from a checkout of it that the user names (`--prompts
recipe:PATH`, `agent.prompts` in recipes). apexrl ships none of their text.

Where the public recipe keeps them:
  system prompt   DEFAULT_SYSTEM_PROMPT, a module-level string in
                  apex_agents_skyrl_recipe/agents/archipelago.py
  extra prompt    DEFAULT_EXTRA_PROMPT, a shell assignment in scripts/run_eval.sh (eval:
                  the text-only note) or scripts/run_qwen36_35b_fully_async.sh (training:
                  the longer tool guidance)

Nothing of the checkout runs: the Python file is parsed (ast) and the one string
constant taken; the shell script is tokenized (shlex, POSIX quoting) and the one
assignment's value taken. Each prompt is recorded with the file, the checkout's commit
and the text's sha256.
"""

from __future__ import annotations

import ast
import shlex
from pathlib import Path
from typing import Literal

from apexrl.agent.prompts import MAX_PROMPT_BYTES, PromptInfo, prompt_info
from apexrl.artifacts.checkout import checkout_commit
from apexrl.errors import UsageError

SYSTEM_FILE = "apex_agents_skyrl_recipe/agents/archipelago.py"
SYSTEM_NAME = "DEFAULT_SYSTEM_PROMPT"
EXTRA_NAME = "DEFAULT_EXTRA_PROMPT"
EXTRA_FILES = {
    "eval": "scripts/run_eval.sh",
    "train": "scripts/run_qwen36_35b_fully_async.sh",
}
PREFIX = "recipe:"


def parse_spec(spec: str) -> Path | None:
    """`recipe:PATH` -> PATH; None for anything else."""
    if not spec.startswith(PREFIX):
        return None
    path = spec[len(PREFIX) :].strip()
    if not path:
        raise UsageError("--prompts recipe: needs a path", hint="--prompts recipe:PATH")
    return Path(path).expanduser()


def recipe_prompts(
    root: Path, mode: Literal["eval", "train"] = "eval"
) -> tuple[PromptInfo, PromptInfo]:
    """(system prompt, extra prompt) of the recipe checkout at `root`."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise UsageError(f"recipe checkout {root} does not exist", hint="--prompts recipe:PATH")
    commit = checkout_commit(root)
    sys_file = root / SYSTEM_FILE
    extra_file = root / EXTRA_FILES[mode]
    system = python_string(sys_file, SYSTEM_NAME)
    extra = shell_string(extra_file, EXTRA_NAME)
    return (
        _info(system, sys_file, SYSTEM_NAME, commit),
        _info(extra, extra_file, EXTRA_NAME, commit),
    )


def python_string(path: Path, name: str) -> str:
    """The string a module assigns to `name` at top level, read without running it."""
    source = _read(path, name)
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise UsageError(f"{path}: not Python ({e.msg}, line {e.lineno})") from None
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is not None
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value  # type: ignore[union-attr]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return _checked(value.value, path, name)
            raise UsageError(f"{path}: {name} is not a plain string literal")
    raise UsageError(
        f'{path}: no top-level {name} = "..."',
        hint="point recipe:PATH at a checkout of the recipe (its layout has moved?)",
    )


def shell_string(path: Path, name: str) -> str:
    """The value of `[export] NAME=...` in a shell script, unquoted as POSIX sh would."""
    source = _read(path, name)
    for line_start in _line_starts(source):
        rest = source[line_start:]
        stripped = rest.lstrip(" \t")
        if stripped.startswith("export "):
            stripped = stripped[len("export ") :].lstrip(" \t")
        if not stripped.startswith(f"{name}="):
            continue
        raw = stripped[len(name) + 1 :]
        if raw.startswith("$") or (raw.startswith('"') and "$" in raw.split('"', 2)[1]):
            # $'...', $VAR, "...$VAR...": expansions only a shell can do
            raise UsageError(f"{path}: {name} is not a literal string")
        lexer = shlex.shlex(raw, posix=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        try:
            value = lexer.get_token()
        except ValueError as e:
            raise UsageError(f"{path}: {name}'s value is not valid shell quoting ({e})") from None
        if value is None:
            raise UsageError(f"{path}: {name} has no value")
        return _checked(value, path, name)
    raise UsageError(
        f"{path}: no {name}=... assignment",
        hint="point recipe:PATH at a checkout of the recipe (its layout has moved?)",
    )


def _line_starts(source: str):
    yield 0
    i = source.find("\n")
    while i >= 0:
        yield i + 1
        i = source.find("\n", i + 1)


def _read(path: Path, name: str) -> str:
    if not path.is_file():
        raise UsageError(
            f"recipe checkout has no {path} (where {name} lives)",
            hint="point recipe:PATH at the root of a checkout of the recipe",
        )
    data = path.read_bytes()
    if len(data) > 16 * MAX_PROMPT_BYTES:
        raise UsageError(f"{path}: {len(data)} bytes, too large to be the recipe's file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason})") from None


def _checked(text: str, path: Path, name: str) -> str:
    if not text.strip():
        raise UsageError(f"{path}: {name} is empty")
    if len(text.encode("utf-8")) > MAX_PROMPT_BYTES:
        raise UsageError(f"{path}: {name} is over {MAX_PROMPT_BYTES} bytes")
    return text


def _info(text: str, path: Path, name: str, commit: str | None) -> PromptInfo:
    info = prompt_info(text, f"{PREFIX}{path}#{name}")
    return info.model_copy(update={"commit": commit})
