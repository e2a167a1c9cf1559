"""Pydantic models for every artifact record apexrl reads or writes.

Each record carries `schema_version`; bump it when a field changes meaning.
`apexrl schema NAME` prints the JSON Schema of any model in `SCHEMAS`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

SCHEMA_VERSION = "1"

Domain = Literal["investment-banking", "law", "management-consulting"]
DOMAINS: tuple[str, ...] = ("investment-banking", "law", "management-consulting")
# The published APEX-Agents data spells domains in title case ("Investment Banking");
# world short names start with the slug ("investment-banking-world-219").
SNAPSHOT_ID = re.compile(r"^snap_[0-9a-fA-F]{8,64}$")


def domain_slug(value: str) -> str:
    """'Investment Banking' / 'investment_banking' / 'IB' -> 'investment-banking'.

    Any other spelling is reduced to [a-z0-9-] and carried through (not rejected)."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(value).strip().lower()).strip("-")
    return {
        "ib": "investment-banking",
        "mc": "management-consulting",
        "consulting": "management-consulting",
    }.get(slug, slug)


# Ids are used as path components (task_files/<task_id>, world zips): keep them
# to one safe segment so a crafted id can never escape a directory.
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_safe_id(value: str, what: str) -> str:
    if not SAFE_ID.match(value) or ".." in value:
        raise ValueError(
            f"{what} {value!r} is not a safe identifier (letters, digits, '_', '-', '.'; "
            "no path separators or '..')"
        )
    return value


def _safe_id(what: str) -> AfterValidator:
    return AfterValidator(lambda v: check_safe_id(v, what))


def _non_blank(what: str) -> AfterValidator:
    def check(v: str) -> str:
        if not v.strip():
            raise ValueError(f"{what} is empty")
        return v

    return AfterValidator(check)


SafeTaskId = Annotated[str, _safe_id("task_id")]
SafeWorldId = Annotated[str, _safe_id("world_id")]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: str = SCHEMA_VERSION


# --- APEX-Agents expert data (input of `tasks convert`) -----------------------------


class DeterministicCheck(BaseModel):
    """A machine-checkable form of a rubric criterion (optional).

    kind:
      exact          the final answer contains `value` (case-insensitive, whitespace-normalised)
      contains       the same as exact
      equals         the whole final answer is `value` (case-insensitive, whitespace-normalised)
      number         a number in the final answer is within `tolerance` of `value`
      file_exists    `path` (relative to the world's filesystem/) exists after the run
      file_contains  `path` exists and its text contains `value`
      sheet_cell     cell `cell` (A1) of tab `sheet` (default: the first) of the .xlsx/.csv
                     at `path` equals `value` (numbers within `tolerance`)
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal[
        "exact", "contains", "equals", "number", "file_exists", "file_contains", "sheet_cell"
    ]
    value: str | float | None = None
    tolerance: float = 0.0
    path: str | None = None
    sheet: str | None = None
    cell: str | None = None


class RubricCriterion(BaseModel):
    model_config = ConfigDict(extra="allow")  # the public data carries extra fields
    verifier_id: str
    criteria: Annotated[str, _non_blank("criterion text")]
    check: DeterministicCheck | None = None


class ApexTask(BaseModel):
    """One record of `tasks_and_rubrics.json`."""

    model_config = ConfigDict(extra="allow")
    task_id: SafeTaskId
    task_name: str
    domain: str  # the slug (investment-banking, law, management-consulting, or another)
    domain_label: str | None = None  # the domain as the source spelled it
    world_id: SafeWorldId
    prompt: Annotated[str, _non_blank("prompt")]
    # null, an opaque snapshot id ("snap_<hex>": the files are task_files/<task_id>/),
    # a boolean, or file names under task_files/<task_id>/ (a list or one string)
    task_input_files: str | bool | list[Any] | None = None
    rubric: list[RubricCriterion]
    expected_output: str | None = None  # null means the answer is in the console
    gold_response: str | None = None
    gold_response_type: Literal["text", "file"] = "text"

    @model_validator(mode="before")
    @classmethod
    def _normalise_domain(cls, data: object) -> object:
        """Spellings of the published data: title-case domains (kept as domain_label), a
        null task name or answer type, criteria without ids, 'File' for 'file'."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("domain"), str):
            raw = data["domain"]
            data.setdefault("domain_label", raw)
            data["domain"] = domain_slug(raw)
        if not data.get("task_name") and isinstance(data.get("task_id"), str):
            data["task_name"] = data["task_id"]
        kind = data.get("gold_response_type")
        if kind is None:
            data.pop("gold_response_type", None)
        elif isinstance(kind, str):
            data["gold_response_type"] = kind.strip().lower()
        rubric = data.get("rubric")
        if isinstance(rubric, list):
            data["rubric"] = [
                {**c, "verifier_id": f"{data.get('task_id')}-c{i}"}
                if isinstance(c, dict) and not c.get("verifier_id")
                else c
                for i, c in enumerate(rubric)
            ]
        return data

    @field_validator("domain")
    @classmethod
    def _domain_non_empty(cls, v: str) -> str:
        if not v:
            raise ValueError("domain is empty (expected e.g. 'Investment Banking', 'Law')")
        return v

    @field_validator("rubric")
    @classmethod
    def _rubric_non_empty(cls, v: list[RubricCriterion]) -> list[RubricCriterion]:
        if not v:
            raise ValueError("rubric is empty: every task needs at least one criterion")
        return v


class ApexWorld(BaseModel):
    """One record of `world_descriptions.json`."""

    model_config = ConfigDict(extra="allow")
    world_id: SafeWorldId
    world_name: str
    world_description: str = ""
    apps: list[str] = Field(default_factory=list)

    @field_validator("apps", mode="before")
    @classmethod
    def _app_names(cls, v: object) -> object:
        """Apps as names, or as objects naming the app (service_name / name / app_name)."""
        if not isinstance(v, list):
            return v
        out = []
        for a in v:
            if isinstance(a, dict):
                a = a.get("service_name") or a.get("name") or a.get("app_name")
            if isinstance(a, str) and a.strip():
                out.append(a)
        return out


# --- apexrl's own artifacts --------------------------------------------------------


class DataTerms(BaseModel):
    """The licence and terms of use of a dataset's source, recorded where its tasks go
    (each task's [metadata], a packed dataset's _dataset.json): `apexrl train` refuses
    data marked evaluation-only unless the user states their right to train on it."""

    model_config = ConfigDict(extra="forbid")
    license: str | None = None  # an SPDX-like id or the card's licence name
    terms: str | None = None  # the terms of use in a sentence or two (the card's, or a flag's)
    evaluation_only: bool = False  # the terms allow evaluation and forbid training on it
    origin: str | None = None  # how they are known: the dataset card, a flag, a recognised source


class TaskMetadata(Record):
    """What apexrl keeps about a task; lives in task.toml's [metadata] table.

    Recipe-format tasks carry no [metadata]: `apexrl.tasks.meta.read_task_meta` builds
    this record from their archipelago.json instead (one reader for every command)."""

    model_config = ConfigDict(extra="ignore")
    task_id: str
    task_name: str
    task_slug: str
    domain: str
    domain_label: str | None = None  # the domain as the source spelled it ("Law")
    world_id: str
    world_name: str | None = None
    world_short_name: str | None = None  # archipelago.json's, e.g. "law-world-433"
    image: str | None = None  # registry reference (repo:tag or repo@digest)
    image_digest: str | None = None  # sha256:... manifest digest when known
    # how the image runs its world: "apexrl" (apexrl world pack) or "mercor"
    # (/app/tools/start.sh <task_slug>, port 8000, /filesystem); None: by source
    image_profile: str | None = None
    required_env_keys: list[str] = Field(default_factory=list)
    needs_snapshot: bool = False
    expected_output: str = "message_in_console"
    gold_response_type: Literal["text", "file"] = "text"
    n_criteria: int = 0
    source: Literal["apexrl", "archipelago"] = "apexrl"  # where the metadata was read
    data_terms: DataTerms | None = None  # the source's licence and terms (apexrl.tasks.terms)


class ArchipelagoMeta(BaseModel):
    """A task's archipelago.json, the metadata file the recipe's agent and generator read.

    The recipe reads task_slug (required: `/app/tools/start.sh <task_slug>`), ecr_image
    (the sandbox image), required_env_keys, needs_snapshot (default true) and
    world_short_name (its prefix is the domain). Unknown fields are kept."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    task_name: str = ""
    task_slug: str
    world_id: str = ""
    world_short_name: str = ""
    ecr_image: str | None = None
    required_env_keys: list[str] = Field(default_factory=list)
    needs_snapshot: bool = True


class TaskRecord(Record):
    """One line of `tasks convert` / `tasks ls` output."""

    path: str  # task directory name
    task_id: str
    task_name: str = ""
    domain: str = ""
    world_id: str = ""
    image: str | None = None
    n_criteria: int = 0
    size_bytes: int = 0
    task_dir: str | None = None  # the task folder, absolute


class DatasetRow(Record):
    """A Parquet dataset row without the binary (`task_binary` is the gzip tar)."""

    path: str
    task_id: str | None = None
    world_id: str | None = None
    domain: str | None = None
    sha256: str | None = None
    size_bytes: int = 0


class TaskListing(DatasetRow):
    """One line of `tasks ls`: a task's metadata and where it is, as absolute paths, so
    the record can be piped to any command in any folder (`eval run --tasks -`)."""

    dataset: str | None = None  # the dataset it was listed from
    shard: str | None = None  # with `row`: the Parquet file and row (0-based) holding it
    row: int | None = None
    task_dir: str | None = None  # or: its task folder


class DatasetManifest(Record):
    """`_dataset.json` beside the shards of a packed dataset."""

    n_tasks: int
    shards: list[str]
    digest: str  # sha256 over sorted (path, sha256) pairs
    domains: dict[str, int] = Field(default_factory=dict)
    worlds: dict[str, int] = Field(default_factory=dict)
    apexrl_version: str = ""
    data_terms: DataTerms | None = None  # the tasks' licence and terms (apexrl.tasks.terms)


class Finding(Record):
    """One problem found by `tasks validate` (or a skipped bad record)."""

    where: str  # task path, file:line, or dataset row
    check: str  # short machine name of the check
    message: str
    severity: Literal["error", "warning"] = "error"


class WorldRecord(Record):
    world_id: str
    world_name: str
    domain: str | None = None
    description: str = ""
    apps: list[str] = Field(default_factory=list)
    n_files: int = 0


class ImageRecord(Record):
    """One line of images.jsonl: the image built for a world and where it lives."""

    world_id: str
    ref: str  # repo:tag as pushed
    digest: str  # sha256:... manifest digest
    size_bytes: int = 0
    platform: str = "linux/amd64"
    profile: str = "apexrl"  # how the image runs its world: "apexrl" or "mercor"


class PackedImageRecord(Record):
    """One line of `world pack` output: a world's OCI image archive on disk."""

    world_id: str
    archive: str  # path of the OCI image archive (oci-archive tar)
    digest: str  # sha256:... manifest digest (the same after `image push`)
    size_bytes: int = 0  # archive size
    platform: str = "linux/amd64"


class TrialResult(Record):
    """One trial (one task attempted once): the row of results.parquet."""

    task_id: str
    domain: str = ""
    world_id: str = ""
    attempt: int = 0
    status: Literal[
        "complete", "agent_timeout", "context_length", "length", "error", "no_verifier_result"
    ] = "complete"
    error_class: str | None = None
    reward: float = 0.0
    criteria_met: int = 0
    criteria_total: int = 0
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    tool_call_success_rate: float | None = None
    started_at: str | None = None
    duration_s: float = 0.0
    criteria_unjudged: int = 0  # free-text criteria graded without a judge (--no-judge): unmet


SCHEMAS: dict[str, type[BaseModel]] = {
    "apex-task": ApexTask,
    "apex-world": ApexWorld,
    "task-metadata": TaskMetadata,
    "archipelago": ArchipelagoMeta,
    "task": TaskRecord,
    "dataset-row": DatasetRow,
    "task-listing": TaskListing,
    "dataset-manifest": DatasetManifest,
    "finding": Finding,
    "world": WorldRecord,
    "image": ImageRecord,
    "packed-image": PackedImageRecord,
    "trial-result": TrialResult,
}
