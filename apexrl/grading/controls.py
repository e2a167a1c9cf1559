"""The two controls of a task's rubric, graded here without a sandbox or an agent.

- no-op (negative): the task's initial world (its world, its input files over it) and an
  empty final answer. Every criterion must fail: one that is met rewards doing nothing.
- oracle (positive): the same world with the gold files written and the gold answer.
  Every criterion must be met: one that is not cannot be met by the task's own gold output.

Criteria only an LLM judge decides are judged when `judge` is given; without one they are
counted as unjudged (neither control says anything about them).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.grading.evidence import collect_files, diff_world
from apexrl.grading.grader import grade
from apexrl.grading.inputs import task_rubric
from apexrl.grading.judge import JudgeSettings
from apexrl.worlds.store import FS_DIR, WorldState, WorldStore, overlay_sources, task_world

CONTROLS = ("no-op", "oracle")


@dataclass
class ControlResult:
    task: str  # the task folder's name
    control: str  # no-op | oracle
    wrong: list[str] = field(default_factory=list)  # criteria the control got wrong
    unjudged: int = 0  # criteria that needed a judge and had none
    total: int = 0
    world: bool = True  # whether the task's world was found (else its input files only)


def run_control(
    task_dir: Path, control: str, *, store: WorldStore | None, judge: JudgeSettings | None = None
) -> ControlResult:
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {CONTROLS}")
    task_dir = Path(task_dir)
    criteria, gold = task_rubric(task_dir / "tests", task_dir / "solution")
    tw = task_world(task_dir)
    instruction = (task_dir / "instruction.md").read_text("utf-8", "replace")
    found = store is not None and store.has(tw.world_id)
    with tempfile.TemporaryDirectory(prefix="apexrl-control-") as tmp:
        root = Path(tmp) / "world"
        if found:
            before = overlay_sources(store.pristine(tw.world_id), tw.task_files)  # type: ignore[union-attr]
        else:
            before = overlay_sources(Path(tmp) / "none", tw.task_files)
        for rel, src in before.items():
            dest = root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        (root / FS_DIR).mkdir(parents=True, exist_ok=True)
        answer = ""
        if control == "oracle":
            answer = str(gold.get("gold_response") or "")
            gold_files = task_dir / "solution" / "gold_files"
            if gold_files.is_dir():
                shutil.copytree(gold_files, root / FS_DIR, dirs_exist_ok=True)
        state = WorldState(after_root=root, before=before)
        changes = diff_world(state)
        result = asyncio.run(
            grade(
                criteria,
                answer=answer,
                fs_root=root / FS_DIR,
                gold=gold,
                task_prompt=instruction,
                judge=judge,
                changes=changes,
                files=collect_files(state, changes) if judge else None,
                task_id=tw.task_id,
            )
        )
    out = ControlResult(task=task_dir.name, control=control, total=len(result.verdicts))
    out.world = found
    for v in result.verdicts:
        if v.source == "unjudged":
            out.unjudged += 1
        elif bool(v.met) == (control == "no-op"):
            out.wrong.append(f"{v.verifier_id}: {v.criteria}")
    return out
