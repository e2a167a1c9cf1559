"""apexrl's Harbor verifier (`apexrl.grading.verifier:ApexVerifier`): grades on the host.

Harbor's default verifier runs tests/test.sh inside the sandbox and trusts the
reward file found in /logs/verifier afterwards; in its shared mode the agent can
write that file itself. This verifier never reads a reward from the sandbox. It
takes the evidence (the final answer, the world's files after the run), reads the
rubric and the gold output from the task folder on the host (the agent never sees
it), grades with apexrl.grading and writes reward.json, verdicts.json and
grading.json itself, after deleting whatever was in their place.

kwargs (Harbor `verifier.kwargs`): judge (a LiteLLM model; None or "none":
deterministic only, free-text criteria "unjudged"), judge_api_base, judge_timeout_s,
judge_max_attempts, worlds_dir (the world store, for the before-state when the
environment does not provide one), reward ("pass": 0/1, or "score": fraction met),
grader ("apexrl", or "archipelago": the peer's own grading runner from the checkout
`archipelago` names, apexrl.grading.archipelago).

Whatever the grader, the evidence is kept in verifier/inputs/ (apexrl.grading.inputs)
so that `apexrl eval regrade` can grade the trial again without running it.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from harbor.models.verifier.result import VerifierResult
from harbor.verifier.base import BaseVerifier

from apexrl.artifacts.atomic import atomic_path
from apexrl.artifacts.nofollow import read_regular
from apexrl.grading.evidence import collect_files, diff_world
from apexrl.grading.grader import check_options, final_answer, grade
from apexrl.grading.inputs import (
    INPUTS_DIR,
    GradingInputs,
    RubricError,
    read_inputs,
    task_rubric,
    write_inputs,
)
from apexrl.grading.judge import JudgeSettings
from apexrl.grading.requirements import judge_model
from apexrl.tasks.convert import ANSWER_FILE
from apexrl.worlds.store import FS_DIR, WorldState

OUT_NAMES = ("reward.json", "reward.txt", "verdicts.json", "grading.json")
MAX_ANSWER_BYTES = 2_000_000


class VerifierInputError(Exception):
    """The task's grading inputs are missing or malformed (a task problem)."""


class ApexVerifier(BaseVerifier):
    def __init__(
        self,
        *,
        judge: str | None = None,
        judge_api_base: str | None = None,
        judge_timeout_s: float | None = None,
        judge_max_attempts: int | None = None,
        worlds_dir: str | None = None,
        reward: str = "pass",
        grader: str = "apexrl",
        archipelago: str | None = None,
        grader_options: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.reward = reward
        self.grader = grader
        self.archipelago = archipelago
        self.options = check_options(grader_options)
        model = judge_model(judge)  # None: unset or "none" (--no-judge)
        self.judge = (
            JudgeSettings(
                model=model,
                api_base=judge_api_base,
                **({"timeout_s": judge_timeout_s} if judge_timeout_s else {}),
                **({"max_attempts": judge_max_attempts} if judge_max_attempts else {}),
            )
            if model
            else None
        )
        self.worlds_dir = Path(worlds_dir) if worlds_dir else None

    async def verify(self) -> VerifierResult:
        out = self.trial_paths.verifier_dir
        out.mkdir(parents=True, exist_ok=True)
        for name in OUT_NAMES:  # whatever the agent may have put there does not count
            (out / name).unlink(missing_ok=True)
        criteria, gold = self._task_inputs()
        task_id = str(self.task.config.metadata.get("task_id") or self.task.name)
        with tempfile.TemporaryDirectory(prefix="apexrl-grade-") as tmp:
            answer = await self._answer(Path(tmp))
            state = await self._world_state(Path(tmp))
            changes = diff_world(state)
            kept = GradingInputs(  # what re-grading needs, in the run folder
                task_id=task_id,
                task_prompt=self.task.instruction,
                answer=answer,
                messages=self._messages(),
                changes=changes,
            )
            write_inputs(out / INPUTS_DIR, kept, state.before, state.after_root)
            if self.grader == "archipelago":
                result = await self._grade_archipelago(criteria, out)
            else:
                result = await grade(
                    criteria,
                    answer=final_answer(answer, kept.messages, self.options),
                    fs_root=state.after_root / FS_DIR,
                    gold=gold,
                    task_prompt=self.task.instruction,
                    judge=self.judge,
                    changes=changes,
                    files=(
                        collect_files(state, changes, self.options) if changes is not None else None
                    )
                    if self.judge
                    else None,
                    task_id=task_id,
                    reward=self.reward,
                    options=self.options,
                )
        _write(out / "grading.json", result.model_dump_json(indent=2))
        _write(
            out / "verdicts.json",
            json.dumps([v.model_dump(mode="json") for v in result.verdicts], indent=2),
        )
        _write(out / "reward.json", json.dumps(result.rewards()))
        return VerifierResult(rewards=result.rewards())

    async def _grade_archipelago(self, criteria: list[dict], out: Path):
        import asyncio

        from apexrl.grading.archipelago import grade_archipelago, resolve_checkout

        if self.judge is None:
            raise VerifierInputError("--grader archipelago judges every criterion: set --judge")
        inputs, before, after = read_inputs(out / INPUTS_DIR)  # exactly what a regrade reads
        return await asyncio.to_thread(
            grade_archipelago,
            criteria,
            inputs,
            before,
            after,
            judge=self.judge,
            checkout=resolve_checkout(self.archipelago),
            reward=self.reward,
        )

    def _messages(self) -> list[dict] | None:
        """The agent's message list (tito.json beside its trajectory), if it kept one."""
        from apexrl.agent.records import TITO_FILE
        from apexrl.artifacts.nofollow import RefusedPath, read_regular

        try:
            raw = json.loads(read_regular(self.trial_paths.agent_dir / TITO_FILE))
        except (OSError, ValueError, RefusedPath):
            return None
        msgs = raw.get("messages") if isinstance(raw, dict) else None
        if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
            return None
        return msgs

    def _task_inputs(self) -> tuple[list[dict], dict]:
        try:
            return task_rubric(self.task.paths.tests_dir, self.task.paths.solution_dir)
        except RubricError as e:
            raise VerifierInputError(str(e)) from None

    async def _answer(self, tmp: Path) -> str:
        target = tmp / "answer.txt"
        host = getattr(self.environment, "host_path", None)
        src = host(ANSWER_FILE) if callable(host) else None
        try:
            if src is not None:  # the sandbox's own folder: never follow a link out of it
                return read_no_follow(src)
            else:
                await self.environment.download_file(ANSWER_FILE, target)
        except Exception:  # no answer file: the agent gave no final answer
            return ""
        return read_no_follow(target)

    async def _world_state(self, tmp: Path) -> WorldState:
        provided = getattr(self.environment, "world_state", None)
        if callable(provided):
            return provided()
        after = tmp / "world"
        await self.environment.download_dir("/world", after)
        before = None
        start = getattr(self.environment, "world_before_dir", None)
        if isinstance(start, Path) and start.is_dir():  # the image's own snapshot at start
            from apexrl.worlds.store import walk_files

            before = walk_files(start)
        elif self.worlds_dir is not None:
            from apexrl.worlds.store import WorldStore, overlay_sources, task_world

            tw = task_world(self.task.task_dir)
            before = overlay_sources(
                WorldStore(self.worlds_dir).pristine(tw.world_id), tw.task_files
            )
        return WorldState(after_root=after, before=before)


def read_no_follow(path: Path, limit: int = MAX_ANSWER_BYTES) -> str:
    """A regular file's text; "" for a missing file, a link (the agent could point one at
    any host file) or anything else."""
    try:
        return read_regular(path, max_bytes=limit).decode("utf-8", "replace")
    except OSError:  # missing, a link, not a regular file
        return ""


def _write(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
