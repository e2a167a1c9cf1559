"""Pydantic models for every artifact record apexrl reads or writes.

Each record carries `schema_version`; bump it when a field changes meaning.
`apexrl schema NAME` prints the JSON Schema of any model in `SCHEMAS`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SCHEMA_VERSION = "1"

Domain = Literal["investment-banking", "law", "management-consulting"]
DOMAINS: tuple[str, ...] = ("investment-banking", "law", "management-consulting")

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
    criteria: str
    check: DeterministicCheck | None = None

    @field_validator("criteria")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("criterion text is empty")
        return v


class ApexTask(BaseModel):
    """One record of `tasks_and_rubrics.json`."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    task_name: str
    domain: Domain
    world_id: str
    prompt: str
    task_input_files: str | list[str] | None = None
    rubric: list[RubricCriterion]
    expected_output: str | None = None  # null means the answer is in the console
    gold_response: str | None = None
    gold_response_type: Literal["text", "file"] = "text"

    @field_validator("task_id")
    @classmethod
    def _safe_task_id(cls, v: str) -> str:
        return check_safe_id(v, "task_id")

    @field_validator("world_id")
    @classmethod
    def _safe_world_id(cls, v: str) -> str:
        return check_safe_id(v, "world_id")

    @field_validator("prompt")
    @classmethod
    def _prompt_non_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("prompt is empty")
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
    world_id: str
    world_name: str
    world_description: str = ""
    apps: list[str] = Field(default_factory=list)

    @field_validator("world_id")
    @classmethod
    def _safe(cls, v: str) -> str:
        return check_safe_id(v, "world_id")


# --- apexrl's own artifacts --------------------------------------------------------


class TaskMetadata(Record):
    """What apexrl keeps about a task; lives in task.toml's [metadata] table."""

    task_id: str
    task_name: str
    task_slug: str
    domain: str
    world_id: str
    world_name: str | None = None
    image: str | None = None  # registry reference (repo:tag or repo@digest)
    image_digest: str | None = None  # sha256:... manifest digest when known
    required_env_keys: list[str] = Field(default_factory=list)
    needs_snapshot: bool = False
    expected_output: str = "message_in_console"
    gold_response_type: Literal["text", "file"] = "text"
    n_criteria: int = 0


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


class DatasetRow(Record):
    """A Parquet dataset row without the binary (`task_binary` is the gzip tar)."""

    path: str
    task_id: str | None = None
    world_id: str | None = None
    domain: str | None = None
    sha256: str | None = None
    size_bytes: int = 0


class DatasetManifest(Record):
    """`_dataset.json` beside the shards of a packed dataset."""

    n_tasks: int
    shards: list[str]
    digest: str  # sha256 over sorted (path, sha256) pairs
    domains: dict[str, int] = Field(default_factory=dict)
    worlds: dict[str, int] = Field(default_factory=dict)
    apexrl_version: str = ""


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
    "task": TaskRecord,
    "dataset-row": DatasetRow,
    "dataset-manifest": DatasetManifest,
    "finding": Finding,
    "world": WorldRecord,
    "image": ImageRecord,
    "packed-image": PackedImageRecord,
    "trial-result": TrialResult,
}
