"""What a trial is graded on, kept in its run folder so it can be re-graded later.

`<trial logs>/verifier/inputs/`: inputs.json (GradingInputs: the task prompt, both
final-answer readings, the message list, what changed) and changes.zip (`before/<rel>`
for modified and deleted files, `after/<rel>` for created and modified ones). With
the world store (unchanged files are the pristine world's), that is the whole final
world; for archipelago's grader the changed files alone give the same snapshot diff.

Everything here came from a sandbox: files are read without following links, and a
bundle is read back with size limits and safe names only.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from apexrl.artifacts.nofollow import RefusedPath, read_regular
from apexrl.grading.models import FileChangeSummary

INPUTS_DIR = "inputs"  # inside the trial's verifier/ folder
INPUTS_FILE = "inputs.json"
CHANGES_FILE = "changes.zip"
MAX_FILE_BYTES = 64 * 1024 * 1024  # one changed file kept for re-grading
MAX_TOTAL_BYTES = 512 * 1024 * 1024


class RubricError(Exception):
    """A task's rubric or gold output is missing or malformed (a task problem)."""


def task_rubric(tests_dir: Path, solution_dir: Path) -> tuple[list[dict], dict]:
    """(criteria, gold) of a task, read on the host where the agent never was."""
    from apexrl.tasks.convert import gold_file_hashes
    from apexrl.tasks.meta import read_criteria, read_gold

    try:  # apexrl criteria or archipelago's verifier shape (verifier_values.criteria)
        criteria = read_criteria(tests_dir)
    except (OSError, ValueError) as e:
        raise RubricError(f"{tests_dir / 'verifiers.json'}: {e}") from None
    try:
        gold = read_gold(tests_dir)
    except (OSError, ValueError) as e:
        raise RubricError(f"{tests_dir / 'golden_responses.json'}: {e}") from None
    gold_dir = solution_dir / "gold_files"
    if gold_dir.is_dir():  # trusted host copy: hash it here
        gold["gold_files"] = gold_file_hashes(gold_dir)
    return criteria, gold


class GradingInputs(BaseModel):
    """inputs.json: the evidence one trial was graded on."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = "1"
    task_id: str = ""
    task_prompt: str = ""
    answer: str = ""  # the agent's final answer (last assistant text; answer.txt)
    messages: list[dict] | None = None  # the whole conversation, when the agent kept one
    changes: FileChangeSummary | None = None  # None: the before-state was unknown
    omitted: list[str] = Field(default_factory=list)  # changed files not kept (size, links)
    elapsed_s: float = 0.0

    def final_message(self) -> str:
        """archipelago's final answer: the last message's content, whatever its role."""
        if not self.messages:
            return self.answer
        return content_text(self.messages[-1].get("content"))


def content_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def conversation(messages: list[dict] | None, task_prompt: str, answer: str) -> list[dict]:
    """The message list a grader sees: the agent's own, else the task and the answer
    (an agent that keeps none, e.g. the oracle)."""
    if messages:
        return messages
    return [{"role": "user", "content": task_prompt}, {"role": "assistant", "content": answer}]


def write_inputs(
    folder: Path,
    inputs: GradingInputs,
    before: dict[str, Path] | None,
    after_root: Path | None,
) -> None:
    """inputs.json and changes.zip into `folder` (replaced whole)."""
    from apexrl.artifacts.atomic import atomic_dir

    ch = inputs.changes
    omitted: list[str] = []
    total = 0
    with atomic_dir(folder, force=True, marker=False) as tmp:
        with zipfile.ZipFile(tmp / CHANGES_FILE, "w", zipfile.ZIP_DEFLATED) as z:
            plan: list[tuple[str, Path]] = []
            if ch is not None and before is not None:
                plan += [
                    (f"before/{r}", before[r]) for r in ch.modified + ch.deleted if r in before
                ]
            if ch is not None and after_root is not None:
                plan += [(f"after/{r}", after_root / r) for r in ch.created + ch.modified]
            for name, src in plan:
                try:
                    data = read_regular(src, max_bytes=MAX_FILE_BYTES + 1)
                except (RefusedPath, OSError):
                    omitted.append(name)
                    continue
                if len(data) > MAX_FILE_BYTES or total + len(data) > MAX_TOTAL_BYTES:
                    omitted.append(name)
                    continue
                total += len(data)
                z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
        rec = inputs.model_copy(update={"omitted": sorted(set(inputs.omitted) | set(omitted))})
        (tmp / INPUTS_FILE).write_text(rec.model_dump_json(indent=1), encoding="utf-8")


def read_inputs(folder: Path) -> tuple[GradingInputs, dict[str, bytes], dict[str, bytes]]:
    """(inputs, before files, after files) of a kept bundle; OSError/ValueError if bad."""
    inputs = GradingInputs.model_validate_json(read_regular(folder / INPUTS_FILE))
    before: dict[str, bytes] = {}
    after: dict[str, bytes] = {}
    zpath = folder / CHANGES_FILE
    if zpath.is_file() and not zpath.is_symlink():
        with zipfile.ZipFile(zpath) as z:
            total = 0
            for info in z.infolist():
                side, _, rel = info.filename.partition("/")
                if side not in ("before", "after") or not _safe_rel(rel):
                    raise ValueError(f"{zpath}: unexpected entry {info.filename!r}")
                total += info.file_size
                if info.file_size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
                    raise ValueError(f"{zpath}: entry {info.filename!r} is over the size limit")
                (before if side == "before" else after)[rel] = z.read(info)
    return inputs, before, after


def _safe_rel(rel: str) -> bool:
    parts = rel.split("/")
    return (
        bool(rel)
        and parts[0] in ("filesystem", ".apps_data")
        and not rel.startswith("/")
        and all(p not in ("", ".", "..") for p in parts)
    )
