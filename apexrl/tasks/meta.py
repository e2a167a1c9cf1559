"""The one reader of a task's metadata and rubric, for every command.

A task directory describes itself in one of two ways:
  - apexrl's: task.toml `[metadata]` (TaskMetadata), written by `apexrl tasks convert`;
  - the recipe's: archipelago.json (task_id, task_name, task_slug, world_id,
    world_short_name, ecr_image, required_env_keys, needs_snapshot) beside a task.toml
    without apexrl's table.
`[metadata]` wins; archipelago.json fills what it lacks. Both
give the same TaskMetadata record, so validate, ls, split, pack, eval, train and the
Modal image choice agree on a task's id, domain, world and image.

Rubrics come as apexrl criteria ({verifier_id, criteria, check?}) or in archipelago's
verifier shape ({verifier_id, verifier_values: {criteria, ...}, ...});
`rubric_criteria` gives apexrl criteria for both.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from apexrl.artifacts.models import ArchipelagoMeta, TaskMetadata, domain_slug
from apexrl.errors import BadRecordError

TASK_TOML = "task.toml"
ARCHIPELAGO_FILE = "archipelago.json"
VERIFIERS_FILE = "tests/verifiers.json"
GOLDEN_FILE = "tests/golden_responses.json"
KNOWN_DOMAINS = ("investment-banking", "management-consulting", "law")
# Images named by archipelago.json alone are Mercor's prebuilt world images.
ARCHIPELAGO_PROFILE = "mercor"


def read_task_meta(task_dir: Path) -> TaskMetadata:
    """The metadata of one task directory; BadRecordError naming the file and the fix."""
    task_dir = Path(task_dir)
    toml_text = _read_text(task_dir / TASK_TOML)
    arch_text = _read_text(task_dir / ARCHIPELAGO_FILE)
    return _meta_with_criteria(task_dir, toml_text, arch_text)


def find_task_meta(task_dir: Path, *, require_world: bool = True) -> TaskMetadata | None:
    """read_task_meta; None when the task carries no metadata at all (no [metadata],
    no archipelago.json). Malformed metadata still raises BadRecordError."""
    task_dir = Path(task_dir)
    toml_text = _read_text(task_dir / TASK_TOML)
    arch_text = _read_text(task_dir / ARCHIPELAGO_FILE)
    if arch_text is None and not _table(toml_text, str(task_dir)):
        return None
    return _meta_with_criteria(task_dir, toml_text, arch_text, require_world=require_world)


def _meta_with_criteria(
    task_dir: Path, toml_text: str | None, arch_text: str | None, *, require_world: bool = True
):
    criteria = None
    verifiers = task_dir / VERIFIERS_FILE
    if verifiers.is_file():
        try:
            criteria = rubric_criteria(json.loads(verifiers.read_text("utf-8")))
        except (ValueError, UnicodeDecodeError):
            criteria = None
    return meta_from_texts(
        task_dir.name,
        toml_text,
        arch_text,
        where=str(task_dir),
        n_criteria=len(criteria) if criteria is not None else None,
        require_world=require_world,
    )


def try_task_meta(task_dir: Path) -> TaskMetadata | None:
    """read_task_meta, or None when the task describes itself in neither way."""
    try:
        return read_task_meta(task_dir)
    except BadRecordError:
        return None


def meta_from_texts(
    name: str,
    toml_text: str | None,
    arch_text: str | None,
    *,
    where: str,
    n_criteria: int | None = None,
    require_world: bool = True,
    table: dict[str, Any] | None = None,
) -> TaskMetadata:
    """TaskMetadata from the texts of task.toml and archipelago.json (either may be None);
    `table` is task.toml's [metadata] when the caller already parsed it (`metadata_of`)."""
    if table is None:
        table = _table(toml_text, where)
    arch = _archipelago(arch_text, where) if arch_text is not None else None
    if not table and arch is None:
        raise BadRecordError(
            where,
            f"no task metadata: {TASK_TOML} has no [metadata] and there is no {ARCHIPELAGO_FILE}",
            hint="convert the task with `apexrl tasks convert`, or add archipelago.json",
        )
    fields: dict[str, Any] = _from_archipelago(arch) if arch is not None else {}
    if table:
        fields.update({k: v for k, v in table.items() if v is not None})
        fields["source"] = "apexrl"
    fields.setdefault("task_id", name)
    fields.setdefault("task_name", fields["task_id"])
    fields.setdefault("task_slug", name)
    fields.setdefault("domain", "")
    if n_criteria is not None and not fields.get("n_criteria"):
        fields["n_criteria"] = n_criteria
    fields.setdefault("world_id", "")
    if require_world and not fields.get("world_id"):
        raise BadRecordError(
            where,
            "the task names no world (world_id in [metadata] or archipelago.json)",
            hint="add world_id: worlds are how datasets are split and served",
        )
    try:
        return TaskMetadata.model_validate(fields)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<record>"
        raise BadRecordError(where, f"task metadata field {loc!r}: {err['msg']}") from None


def metadata_of(toml_text: str | None, where: str) -> dict[str, Any]:
    """task.toml's [metadata] table ({} when there is none); BadRecordError if not TOML."""
    return _table(toml_text, where)


def _table(toml_text: str | None, where: str) -> dict[str, Any]:
    if toml_text is None:
        return {}
    try:
        table = tomllib.loads(metadata_table(toml_text)).get("metadata")
    except tomllib.TOMLDecodeError as e:
        raise BadRecordError(f"{where}/{TASK_TOML}", f"not valid TOML: {e}") from None
    return table if isinstance(table, dict) else {}


def _archipelago(text: str, where: str) -> ArchipelagoMeta:
    path = f"{where}/{ARCHIPELAGO_FILE}"
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise BadRecordError(path, f"not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise BadRecordError(path, "expected a JSON object")
    try:
        return ArchipelagoMeta.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "<record>"
        raise BadRecordError(
            path, f"field {loc!r}: {err['msg']}", hint="the recipe needs task_id and task_slug"
        ) from None


def _from_archipelago(a: ArchipelagoMeta) -> dict[str, Any]:
    image, digest = split_image_ref(a.ecr_image) if a.ecr_image else (None, None)
    return {
        "task_id": a.task_id,
        "task_name": a.task_name or a.task_id,
        "task_slug": a.task_slug,
        "domain": domain_from_short_name(a.world_short_name),
        "world_id": a.world_id,
        "world_short_name": a.world_short_name or None,
        "image": image,
        "image_digest": digest,
        "image_profile": ARCHIPELAGO_PROFILE if image else None,
        "required_env_keys": sorted({str(k) for k in a.required_env_keys}),
        "needs_snapshot": a.needs_snapshot,
        "source": "archipelago",
    }


def domain_from_short_name(short_name: str) -> str:
    """'law-world-433' -> 'law'; 'investment-banking-world-219' -> 'investment-banking';
    another prefix before '-world' is carried through; '' when there is none."""
    s = (short_name or "").strip().lower()
    for d in KNOWN_DOMAINS:
        if s == d or s.startswith(f"{d}-"):
            return d
    m = re.match(r"^(.+?)-world\b", s)
    return domain_slug(m.group(1)) if m else ""


def split_image_ref(ref: str) -> tuple[str, str | None]:
    """'repo:tag@sha256:..' / 'repo@sha256:..' -> (ref without digest, digest)."""
    if "@" in ref:
        base, digest = ref.split("@", 1)
        return base, digest
    return ref, None


def metadata_table(text: str) -> str:
    """Just the [metadata] table of a task.toml (and its sub-tables): parsing the whole
    file was a sixth of packing time and only these keys are needed."""
    if text.startswith("[metadata]"):
        start = 0
    else:
        start = text.find("\n[metadata]")
        if start < 0:
            return ""
    end = start + 1
    while True:
        end = text.find("\n[", end)
        if end < 0 or not text.startswith("\n[metadata.", end):
            break
        end += 1
    return text[start : end if end >= 0 else len(text)]


def _read_text(path: Path) -> str | None:
    if not path.is_file():
        return None
    try:
        return path.read_text("utf-8")
    except UnicodeDecodeError:
        raise BadRecordError(str(path), "not UTF-8") from None


# --- rubric -------------------------------------------------------------------------


def rubric_criteria(raw: object) -> list[dict]:
    """apexrl criteria ({verifier_id, criteria, check?, ...}) from a verifiers.json list in
    apexrl's shape or archipelago's ({verifier_id, verifier_values: {criteria, ...}}).

    ValueError when it is not a list of criteria with ids and text."""
    if not isinstance(raw, list):
        raise ValueError("expected a JSON list of criteria")
    out = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            raise ValueError(f"criterion {i} is not an object")
        c = dict(c)
        values = c.get("verifier_values")
        if not isinstance(c.get("criteria"), str) and isinstance(values, dict):
            c["criteria"] = values.get("criteria")
            if c.get("check") is None and isinstance(values.get("check"), dict):
                c["check"] = values["check"]
        if not c.get("verifier_id"):
            c["verifier_id"] = str(c.get("id") or f"criterion-{i}")
        if not isinstance(c.get("criteria"), str) or not c["criteria"].strip():
            raise ValueError(f"criterion {i} ({c['verifier_id']}) has no text")
        out.append(c)
    return out


def read_criteria(tests_dir: Path) -> list[dict]:
    """tests/verifiers.json of a task as apexrl criteria (ValueError / OSError on failure)."""
    return rubric_criteria(json.loads((Path(tests_dir) / "verifiers.json").read_text("utf-8")))


def read_gold(tests_dir: Path) -> dict:
    """tests/golden_responses.json as {gold_response, gold_response_type, gold_files}.

    apexrl writes that object; a list of golden records (another converter's shape) gives
    its first record's text answer."""
    path = Path(tests_dir) / "golden_responses.json"
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text("utf-8"))
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list) and raw and isinstance(raw[0], dict):
        first = raw[0]
        text = next(
            (
                first[k]
                for k in ("gold_response", "golden_text_response", "golden_response", "response")
                if isinstance(first.get(k), str)
            ),
            None,
        )
        return {"gold_response": text}
    return {}
