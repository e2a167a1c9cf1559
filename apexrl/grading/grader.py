"""Grade one trial: deterministic checks, the reference match, then the LLM judge.

The score is the fraction of criteria met; the trial passes when every criterion is
met. The reward is one of them, a setting (`reward`): "pass" (0/1) or "score" (the
recipe trains on the fraction met). Pass@k always uses pass/fail, whatever the reward.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from apexrl.grading.evidence import MAX_FILE_CHARS, MAX_TOTAL_CHARS, FileEvidence, render_files
from apexrl.grading.judge import (
    PROMPT_VERSION,
    Judge,
    JudgeSettings,
    criterion_scope,
    system_prompt,
)
from apexrl.grading.models import FileChangeSummary, GradeResult, Verdict
from apexrl.tasks.vendored import grade as runner

REWARD_MODES = ("pass", "score")


def host_cell_reader(path: Path, sheet: str | None, cell: str | None) -> Any:
    """A cell's value; formulas nobody computed (files written by libraries) are evaluated."""
    value = runner.sheet_cell_value(path, sheet, cell)
    if value is not None or path.suffix.lower() not in (".xlsx", ".xlsm"):
        return value
    import openpyxl

    from apexrl.worlds.formulas import Evaluator

    wb = openpyxl.load_workbook(str(path), data_only=False)
    ws = wb[sheet] if sheet else wb.worksheets[0]
    raw = ws[str(cell).replace("$", "").upper()].value
    if isinstance(raw, str) and raw.startswith("="):
        return Evaluator(wb).value(ws.title, str(cell).replace("$", "").upper())
    return raw


async def grade(
    criteria: list[dict],
    *,
    answer: str,
    fs_root: Path,
    gold: dict | None = None,
    task_prompt: str = "",
    judge: JudgeSettings | None = None,
    changes: FileChangeSummary | None = None,
    changes_text: str = "",
    task_id: str = "",
    files: list[FileEvidence] | None = None,
    reward: str = "pass",
) -> GradeResult:
    """Raises JudgeError when the judge cannot decide a criterion (no result, not a 0).

    files: the created/changed files' text (evidence.collect_files), shown per
    criterion's evaluation scope; without it, `changes_text` is shown whole."""
    if reward not in REWARD_MODES:
        raise ValueError(f"reward must be one of {REWARD_MODES}, not {reward!r}")
    t0 = time.monotonic()
    raw = runner.grade_deterministic(criteria, answer, gold or {}, fs_root, host_cell_reader)
    verdicts: list[Verdict | None] = [None] * len(raw)
    pending: list[int] = []
    for i, v in enumerate(raw):
        if v["met"] is None:
            if judge is None:
                verdicts[i] = Verdict(
                    verifier_id=v["verifier_id"],
                    criteria=v["criteria"],
                    met=False,
                    source="unjudged",
                    error="needs the LLM judge and none was configured",
                )
            else:
                pending.append(i)
        else:
            verdicts[i] = Verdict(
                verifier_id=v["verifier_id"],
                criteria=v["criteria"],
                met=bool(v["met"]),
                source=v["source"],
                error=v.get("error"),
            )
    system = system_prompt(MAX_FILE_CHARS, MAX_TOTAL_CHARS)
    if pending and judge is not None:
        j = Judge(judge)
        jobs = []
        for i in pending:
            scope, suffixes = criterion_scope(criteria[i])
            shown = render_files(files, suffixes) if files is not None else changes_text
            if files is not None and scope == "files" and suffixes and not shown:
                verdicts[i] = Verdict(  # archipelago's auto-fail: no file of that type
                    verifier_id=raw[i]["verifier_id"],
                    criteria=raw[i]["criteria"],
                    met=False,
                    source="judge",
                    rationale="no created or changed file of the expected type "
                    f"({', '.join(suffixes)}): not met without asking the judge",
                    judge_model=judge.model,
                )
                continue
            jobs.append(
                (
                    i,
                    j.judge(
                        task_prompt, raw[i]["criteria"], answer, shown, scope=scope, system=system
                    ),
                )
            )
        results = await asyncio.gather(*(job for _, job in jobs))
        for (i, _), r in zip(jobs, results, strict=True):
            verdicts[i] = Verdict(
                verifier_id=raw[i]["verifier_id"],
                criteria=raw[i]["criteria"],
                met=r.met,
                source="judge",
                rationale=r.rationale,
                judge_model=judge.model,
                attempts=r.attempts,
                prompt_sha256=r.prompt_sha256,
            )
    final = [v for v in verdicts if v is not None]
    met = sum(v.met for v in final)
    total = len(final)
    passed = total > 0 and met == total
    score = met / total if total else 0.0
    calls = sum(v.attempts for v in final if v.source == "judge") if judge else None
    return GradeResult(
        task_id=task_id,
        judge_calls=calls,
        reward=score if reward == "score" else float(passed),
        reward_mode=reward,  # type: ignore[arg-type]
        passed=passed,
        score=score,
        criteria_met=met,
        criteria_total=total,
        verdicts=final,
        changes=changes,
        answer_chars=len(answer),
        judge_model=judge.model if judge else None,
        judge_prompt_version=PROMPT_VERSION if judge else None,
        judge_system_prompt=system if judge else None,
        duration_s=time.monotonic() - t0,
    )
