"""Checks of Harbor task directories: one Finding per problem."""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from apexrl.artifacts.file_types import label_problem
from apexrl.artifacts.models import Finding
from apexrl.errors import BadRecordError
from apexrl.tasks.envnames import task_env_problems
from apexrl.tasks.meta import ARCHIPELAGO_FILE, read_task_meta, rubric_criteria

# ${VAR} with no default: the task cannot run without it, so it must be declared
# (${VAR:-default} is optional, e.g. the recipe's judge key in [verifier.env])
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def validate_task_dir(task_dir: Path) -> Iterator[Finding]:
    where = task_dir.name

    def finding(check: str, message: str, severity: str = "error") -> Finding:
        return Finding(where=where, check=check, message=message, severity=severity)

    toml_path = task_dir / "task.toml"
    raw: dict = {}
    if not toml_path.is_file():
        yield finding("harbor_config", "task.toml is missing")
    else:
        try:
            text = toml_path.read_text(encoding="utf-8")
            raw = tomllib.loads(text)
            from harbor.models.task.config import TaskConfig

            TaskConfig.model_validate(raw)
        except UnicodeDecodeError:
            yield finding("harbor_config", "task.toml is not UTF-8")
        except tomllib.TOMLDecodeError as e:
            yield finding("harbor_config", f"task.toml is not valid TOML: {e}")
        except ValidationError as e:
            yield finding("harbor_config", f"Harbor rejects task.toml: {_first(e)}")

    for problem in task_env_problems(raw):
        yield finding("env_names", problem)
    for key, near in unknown_keys(raw):
        hint = f"; did you mean `{near}`?" if near else ""
        yield finding("unknown_key", f"task.toml: unknown key `{key}` (ignored by Harbor){hint}")

    instruction = task_dir / "instruction.md"
    if not instruction.is_file():
        yield finding("instruction", "instruction.md is missing")
    else:
        try:
            if not instruction.read_text(encoding="utf-8").strip():
                yield finding("instruction", "instruction.md is empty")
        except UnicodeDecodeError:
            yield finding("instruction", "instruction.md is not UTF-8")

    yield from _check_rubric(task_dir / "tests" / "verifiers.json", finding)

    entry = task_dir / "tests" / "test.sh"
    if not entry.is_file():
        yield finding("verifier_entrypoint", "tests/test.sh is missing")
    elif not os.access(entry, os.X_OK):
        yield finding("verifier_entrypoint", "tests/test.sh is not executable (chmod +x)")

    meta = None
    if raw or (task_dir / ARCHIPELAGO_FILE).is_file():
        try:
            meta = read_task_meta(task_dir)
        except BadRecordError as e:
            yield finding("metadata", f"{e.detail}" + (f" ({e.hint})" if e.hint else ""))
    if meta is not None:
        declared = set(meta.required_env_keys)
        referenced = set(ENV_REF.findall(json.dumps(raw)))
        for key in sorted(referenced - declared):
            yield finding(
                "env_keys",
                f"${{{key}}} is referenced but not in metadata.required_env_keys",
            )
        forwarded = set(raw.get("verifier", {}).get("env", {}))
        for key in sorted(declared - forwarded):
            yield finding(
                "env_keys", f"required env key {key} is not forwarded in [verifier.env]", "warning"
            )
        if not (task_dir / ARCHIPELAGO_FILE).is_file():
            yield finding(
                "metadata",
                "no archipelago.json: the recipe's agent and generator cannot run this task "
                "(`apexrl tasks convert` writes it)",
                "warning",
            )
        if meta.task_slug != task_dir.name and meta.source == "apexrl":
            yield finding(
                "metadata",
                f"task_slug {meta.task_slug!r} differs from the directory name",
                "warning",
            )


def unknown_keys(raw: dict) -> list[tuple[str, str | None]]:
    """(dotted key, nearest known key) for each task.toml key Harbor's TaskConfig does not
    define (Harbor ignores them: a typo such as `timeout_secs` silently keeps the
    default), and each [metadata] key that is a near miss of one apexrl reads."""
    from harbor.models.task.config import TaskConfig

    from apexrl.artifacts.models import TaskMetadata

    out: list[tuple[str, str | None]] = []
    _walk_keys(TaskConfig, raw, "", out)
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        known = list(TaskMetadata.model_fields)
        for k in meta:
            near = difflib.get_close_matches(k, known, n=1, cutoff=0.75)
            if k not in known and near:
                out.append((f"metadata.{k}", f"metadata.{near[0]}"))
    return out


def _walk_keys(model, data: dict, prefix: str, out: list) -> None:
    from pydantic import BaseModel

    names = {n: f for n, f in model.model_fields.items()}
    names |= {f.alias: f for f in model.model_fields.values() if f.alias}
    for key, value in data.items():
        field = names.get(key)
        if field is None:
            near = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
            out.append((prefix + key, prefix + near[0] if near else None))
            continue
        sub = _model_in(field.annotation, BaseModel)
        if sub is None:
            continue
        if isinstance(value, dict):
            _walk_keys(sub, value, f"{prefix}{key}.", out)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _walk_keys(sub, item, f"{prefix}{key}[{i}].", out)


def _model_in(annotation, base):
    """The pydantic model an annotation holds (X, X | None, list[X]); None for others
    (free tables such as [metadata] and env maps are dicts)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict:
        return None
    models = [m for m in (_model_in(a, base) for a in args) if m is not None]
    return models[0] if len(models) == 1 else None


def _check_rubric(path: Path, finding) -> Iterator[Finding]:
    if not path.is_file():
        yield finding("rubric", "tests/verifiers.json is missing")
        return
    try:
        criteria = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        yield finding("rubric", f"tests/verifiers.json is not valid JSON: {e}")
        return
    if not isinstance(criteria, list) or not criteria:
        yield finding("rubric", "rubric is empty: at least one criterion is needed")
        return
    try:  # apexrl criteria or archipelago's verifier shape (verifier_values.criteria)
        rubric_criteria(criteria)
    except ValueError as e:
        yield finding("rubric", str(e))
    for i, c in enumerate(criteria):
        problem = label_problem(c) if isinstance(c, dict) else None
        if problem:
            yield finding("rubric", f"criterion {i} ({c.get('verifier_id', '?')}): {problem}")


def _first(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<root>"
    return f"{loc}: {err['msg']}"
