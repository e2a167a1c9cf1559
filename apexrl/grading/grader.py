"""Grade one trial: deterministic checks, then the LLM judge.

The score is the fraction of criteria met; the trial passes when every criterion is
met. The reward is one of them, a setting (`reward`): "pass" (0/1) or "score" (the
recipe trains on the fraction met). Pass@k always uses pass/fail, whatever the reward.

By default the judge sees what archipelago's grader shows it (the benchmark's
scores): the last message as the final answer, every created or changed file whole
with a diff, tracked changes and comments, labels read exactly, a response schema,
archipelago's judge settings. apexrl's own choices are named options (GRADER_OPTIONS,
`--grader-option NAME`), off unless asked for.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from apexrl.grading import budget
from apexrl.grading.evidence import (
    MAX_FILE_CHARS,
    MAX_TOTAL_CHARS,
    FileEvidence,
    file_block,
    item_body,
    render_files,
    select_files,
)
from apexrl.grading.judge import (
    MAX_ANSWER_CHARS,
    PROMPT_VERSION,
    Judge,
    JudgeSettings,
    criterion_scope,
    system_prompt,
    user_prompt,
)
from apexrl.grading.models import FileChangeSummary, GradeResult, Verdict
from apexrl.tasks.vendored import grade as runner

REWARD_MODES = ("pass", "score")

# apexrl's grading choices that archipelago's grader does not make: off by default.
GRADER_OPTIONS: dict[str, str] = {
    "last_assistant_answer": "the final answer is the agent's last assistant text "
    "(default: the last message's content, whatever its role)",
    "evidence_caps": "show the judge at most 20,000 characters of answer, 20,000 per file "
    "and 60,000 for all files (default: everything, whole)",
    "reference_shortcut": "a final output equal to the gold output meets free-text criteria "
    "without a judge call (always on when no judge is set)",
    "lenient_file_types": "match expected_file_type labels whatever their case "
    "(default: exact labels; a label not known is refused, never widened to all output)",
    "free_json": "send no response schema: the prompt alone asks for JSON",
    "fixed_sampling": "judge at temperature 0 with at most 1,024 output tokens "
    "(default: neither sent)",
    "few_retries": "3 judge attempts per criterion, 120 s per call (default: 10 and 3600 s)",
    "show_hidden_sheets": "show hidden and very hidden sheets of a workbook "
    "(default: left out, as archipelago)",
    "show_hidden_paths": "show files under dot-named folders, dot files and compiled Python "
    "(default: left out, as archipelago)",
    "sniff_text": "show any file that decodes as text, such as .mbox mailboxes "
    "(default: only archipelago's text suffixes; other files are listed by path)",
    "deleted_paths_only": "list a deleted file by its path only (default: its former content)",
    "workbook_whole": "show a workbook as one item of at most 20,000 cells "
    "(default: each sheet its own item, as archipelago)",
    "db_as_file": "judge a 'Database Files (.db)' criterion on the row diff as text in one "
    "prompt (default: the judge explores the diff with tools, as archipelago)",
}


def check_options(names) -> frozenset[str]:
    """The option names, checked; ValueError naming the unknown one and the choices."""
    out = frozenset(names or ())
    for n in out:
        if n not in GRADER_OPTIONS:
            raise ValueError(f"unknown grader option {n!r}: one of {', '.join(GRADER_OPTIONS)}")
    return out


def apply_options(judge: JudgeSettings | None, options: frozenset[str]) -> JudgeSettings | None:
    import dataclasses

    if judge is None:
        return None
    change: dict = {}
    if "fixed_sampling" in options:
        change.update(temperature=0.0, max_tokens=1024)
    if "few_retries" in options:
        change.update(max_attempts=3, timeout_s=120.0)
    if "free_json" in options:
        change.update(response_schema=False)
    return dataclasses.replace(judge, **change) if change else judge


def final_answer(answer: str, messages: list[dict] | None, options: frozenset[str]) -> str:
    """The answer graded: the last message's content (archipelago's rule), or with
    `last_assistant_answer` the agent's last assistant text (answer.txt)."""
    if "last_assistant_answer" in options or not messages:
        return answer
    from apexrl.grading.inputs import content_text

    return content_text(messages[-1].get("content"))


def _is_db_criterion(criterion: dict) -> bool:
    from apexrl.grading.db_judge import DB_LABEL

    values = criterion.get("verifier_values")
    kind = criterion.get("expected_file_type") or (
        values.get("expected_file_type") if isinstance(values, dict) else None
    )
    return kind == DB_LABEL


async def _judge_one(
    j: Judge,
    task: str,
    criterion: str,
    answer: str,
    files: list[FileEvidence] | None,
    changes_text: str,
    scope: str,
    suffixes: tuple[str, ...],
    system: str,
    caps: bool,
):
    """One criterion's judge call with the evidence fitted to the judge's budget: the
    items of the criterion's file types; past half the judge's window, the items the
    judge selects; each cut in the middle to an equal share when they still do not fit
    (apexrl.grading.budget). With `evidence_caps`, apexrl's character caps instead."""
    if files is None or caps:
        shown = (
            render_files(files, suffixes, total=MAX_TOTAL_CHARS, file_cap=MAX_FILE_CHARS)
            if files is not None
            else changes_text
        )
        return await j.judge(
            task,
            criterion,
            answer,
            shown,
            scope=scope,
            system=system,
            answer_cap=MAX_ANSWER_CHARS if caps else None,
        )
    model = j.settings.model
    limit = budget.prompt_limit(budget.context_tokens(model, j.settings.context_tokens))
    chosen = select_files(files, suffixes) if scope != "answer" else []
    bodies = [item_body(f) for f in chosen]
    window = budget.context_tokens(model, j.settings.context_tokens)
    selected = sum(budget.count_tokens(b, model) for b in bodies) > window * budget.SELECT_SHARE
    if selected:
        keep = await j.select(
            task,
            criterion,
            [(f"{f.label} ({f.change})", b) for f, b in zip(chosen, bodies, strict=True)],
        )
        chosen, bodies = [chosen[k] for k in keep], [bodies[k] for k in keep]
    base = system + user_prompt(task, criterion, answer, "", scope, None)
    room = limit - budget.count_tokens(base, model)
    if room < limit // 4:  # an answer too long for the window: its middle goes first
        have = budget.count_tokens(answer, model)
        answer = budget.middle_cut(answer, max(have - (limit // 4 - room), 0), model)
        base = system + user_prompt(task, criterion, answer, "", scope, None)
        room = limit - budget.count_tokens(base, model)
    overhead = sum(budget.count_tokens(file_block(f, ""), model) + 2 for f in chosen) + 16
    fitted = budget.fit_bodies(bodies, room - overhead, model)
    shown = render_files(chosen, bodies=fitted)
    for _ in range(20):  # the blocks' own wrapping: shrink until the whole prompt fits
        sent = system + user_prompt(task, criterion, answer, shown, scope, None)
        if not fitted or budget.count_tokens(sent, model) <= limit:
            break
        fitted = [
            budget.middle_cut(b, int(budget.count_tokens(b, model) * 0.8), model) for b in fitted
        ]
        shown = render_files(chosen, bodies=fitted)
    verdict = await j.judge(task, criterion, answer, shown, scope=scope, system=system)
    verdict.attempts += int(selected)  # the selection call is a judge call too
    return verdict


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
    options: frozenset[str] = frozenset(),
) -> GradeResult:
    """Raises JudgeError when the judge cannot decide a criterion (no result, not a 0).

    answer: the final answer as graded (final_answer()). files: the created/changed
    files' text (evidence.collect_files), shown per criterion's evaluation scope;
    without it, `changes_text` is shown whole. options: GRADER_OPTIONS names."""
    if reward not in REWARD_MODES:
        raise ValueError(f"reward must be one of {REWARD_MODES}, not {reward!r}")
    options = check_options(options)
    judge = apply_options(judge, options)
    t0 = time.monotonic()
    raw = runner.grade_deterministic(criteria, answer, gold or {}, fs_root, host_cell_reader)
    if judge is not None and "reference_shortcut" not in options:
        for v in raw:  # archipelago asks the judge about every criterion
            if v.get("source") == "reference":
                v.update(met=None, source="judge")
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
    caps = "evidence_caps" in options
    system = system_prompt(MAX_FILE_CHARS, MAX_TOTAL_CHARS) if caps else system_prompt()
    if pending and judge is not None:
        j = Judge(judge)
        jobs = []
        for i in pending:
            scope, suffixes = criterion_scope(criteria[i], lenient="lenient_file_types" in options)
            if (
                files is not None
                and scope == "files"
                and suffixes
                and not select_files(files, suffixes)
            ):
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
            if files is not None and _is_db_criterion(criteria[i]) and "db_as_file" not in options:
                from apexrl.grading.db_judge import judge_databases

                jobs.append((i, judge_databases(j, raw[i]["criteria"], files)))
                continue
            jobs.append(
                (
                    i,
                    _judge_one(
                        j,
                        task_prompt,
                        raw[i]["criteria"],
                        answer,
                        files,
                        changes_text,
                        scope,
                        suffixes,
                        system,
                        caps,
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
    calls = sum(v.attempts for v in final if v.source == "judge") if judge else None
    return GradeResult(
        task_id=task_id,
        judge_calls=calls,
        grader_options=sorted(options),
        **GradeResult.tally(final, reward),
        changes=changes,
        answer_chars=len(answer),
        judge_model=judge.model if judge else None,
        judge_prompt_version=PROMPT_VERSION if judge else None,
        judge_system_prompt=system if judge else None,
        duration_s=time.monotonic() - t0,
    )
