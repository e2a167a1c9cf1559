"""`apexrl eval regrade`: grade an eval run's trials again, without running them.

Each graded trial kept its evidence in `logs/<trial>/verifier/inputs/`
(apexrl.grading.inputs). A regrade reads it, grades it with each grader asked for
(apexrl's, archipelago's runner), and writes a new run folder: run.json (the old run's
with the new judge and grader), results and summary from the first grader,
`grades/<grader>/<trial>.json` (each GradeResult), and with two graders
`comparison.jsonl`, one record per criterion with the verdict under each.

Every trial whose agent finished is graded, whatever its grading's outcome was: a trial
whose judge was unavailable (status `no_verifier_result`, its evidence kept before the
judge was asked) is graded now. Trials whose agent did not finish keep their rows
(the model's failures score 0; infrastructure errors stay ungraded): nothing to grade.

A trial whose task is broken since its run (its rubric or gold output no longer reads)
is recorded ungraded with the task's error class (`bad_task_rubric`, apexrl.eval.infra)
and the others are graded: the regrade is partial (exit 5), and once the task is fixed
the same regrade grades it.

Resumable: NEW_RUN/regrade.json records what the folder holds (the source run, graders,
judge and its URL, reward, options); a rerun with the same ones reuses each trial's
`grades/<grader>/<trial>.json`, and one with others is refused, so grades of another
run or judge are never mixed in. Judge replies are cached in `judge_cache/`
(apexrl.grading.judge_cache), so a rerun makes no judge call for a prompt seen.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from apexrl.artifacts.atomic import write_bytes_atomic
from apexrl.errors import ApexError, UsageError
from apexrl.eval import resume
from apexrl.eval.metrics import summarize
from apexrl.eval.models import LOGS_DIR, EvalResultRow, EvalRunConfig, plan_ids, planned_trials
from apexrl.grading.models import GradeResult

GRADES_DIR = "grades"
MARKER_FILE = "regrade.json"
AGENT_FINISHED = frozenset({"complete", "no_verifier_result"})  # statuses a regrade grades
CACHE_DIR = "judge_cache"
COMPARISON_FILE = "comparison.jsonl"
GRADERS = ("apexrl", "archipelago")


class UnreadableEvidenceError(ApexError):
    """A trial's kept grading inputs do not read (the sandbox's side wrote them: never
    trusted): that trial's row is kept as it was, as one that kept none."""


class BrokenTaskError(ApexError):
    """The task of a trial cannot be graded (its rubric or gold output does not read):
    the task's fault, recorded on that trial; the regrade goes on with the others."""

    error_class = "bad_task_rubric"


@dataclass
class RegradeRequest:
    run_dir: Path
    out: Path
    graders: list[str]
    judge: str | None = None  # None: the run's
    judge_api_base: str | None = None
    archipelago: str | None = None
    reward: str | None = None  # None: the run's
    options: list[str] | None = None  # apexrl's grader options; None: the run's


@dataclass
class RegradeReport:
    graded: int = 0  # trials graded now (per grader)
    reused: int = 0  # trials whose grade was already in OUT
    kept: int = 0  # trials that did not complete: rows kept as they were
    missing: list[str] = field(default_factory=list)  # finished trials with no readable evidence
    task_errors: dict[str, str] = field(default_factory=dict)  # trial -> why its task is broken
    judge_calls: int = 0
    criteria: int = 0  # criteria compared (two graders)
    same: int = 0


def regrade(req: RegradeRequest, *, log: Callable[[str], None] = lambda m: None) -> RegradeReport:
    from apexrl.eval.runner import resolve_tasks, trial_id

    run_dir, out = Path(req.run_dir), Path(req.out)
    old = resume.load_config(run_dir)
    if old is None:
        raise UsageError(f"{run_dir} is not an eval run (no run.json)", hint="pass a RUN_DIR")
    if out.resolve() == run_dir.resolve():
        raise UsageError("-o must name a new folder, not the run being regraded")
    bad = [g for g in req.graders if g not in GRADERS]
    if bad or not req.graders:
        raise UsageError(f"unknown grader {bad[0] if bad else ''!r}", hint=f"one of {GRADERS}")
    judge = judge_settings(req, old)
    checkout = None
    if "archipelago" in req.graders:
        from apexrl.grading.archipelago import resolve_checkout, runner_dir

        checkout = resolve_checkout(req.archipelago or old.archipelago)
        runner_dir(checkout, log=log)
    rows = resume.load_journal(run_dir)
    if not rows:
        rows = _rows_from_results(run_dir)
    tasks, _ = resolve_tasks(old.dataset.source, run_dir)
    by_trial = {trial_id(t, r.attempt): t for r in rows.values() for t in tasks}
    reward = req.reward or old.reward
    from apexrl.grading.grader import check_options

    try:
        options = check_options(old.grader_options if req.options is None else req.options)
    except ValueError as e:
        raise UsageError(str(e), hint="see `apexrl eval regrade --help`") from None
    claim_output(out, regrade_identity(run_dir, old, req, judge, reward, options))
    from apexrl.grading.judge_cache import JudgeCache

    cache = JudgeCache(out / CACHE_DIR)
    report = RegradeReport()
    new_rows: dict[str, EvalResultRow] = {}
    grades: dict[str, dict[str, GradeResult]] = {g: {} for g in req.graders}
    for tid, row in sorted(rows.items()):
        folder = run_dir / LOGS_DIR / tid / "verifier" / "inputs"
        task = by_trial.get(tid)
        if row.status not in AGENT_FINISHED:  # the agent did not finish: nothing to grade
            report.kept += 1
            new_rows[tid] = row
            continue
        if task is None or not folder.is_dir():
            report.missing.append(tid)
            new_rows[tid] = row
            continue
        try:
            for g in req.graders:
                target = out / GRADES_DIR / g / f"{tid}.json"
                if target.is_file():
                    grades[g][tid] = GradeResult.model_validate_json(target.read_bytes())
                    report.reused += 1
                    continue
                log(f"regrade {tid} with {g}")
                result = grade_trial(
                    g,
                    folder,
                    task.path,
                    judge=judge,
                    reward=reward,
                    checkout=checkout,
                    cache=cache,
                    worlds_dir=old.worlds_dir,
                    options=options,
                )
                report.judge_calls += result.judge_calls or 0
                write_bytes_atomic(target, result.model_dump_json(indent=1).encode())
                grades[g][tid] = result
                report.graded += 1
        except UnreadableEvidenceError as e:  # as a trial that kept none: row unchanged
            log(f"regrade {tid}: {e}")
            report.missing.append(tid)
            for g in req.graders:
                grades[g].pop(tid, None)
            new_rows[tid] = row
            continue
        except BrokenTaskError as e:  # this task's to fix; the other trials are graded
            log(f"regrade {tid}: its task is broken: {e}")
            report.task_errors[tid] = str(e)
            for g in req.graders:
                grades[g].pop(tid, None)
            new_rows[tid] = row.model_copy(
                update={
                    "status": "error",
                    "error_class": BrokenTaskError.error_class,
                    "error_message": str(e),
                    "reward": 0.0,
                    "criteria_met": 0,
                    "criteria_unjudged": 0,
                }
            )
            continue
        first = grades[req.graders[0]][tid]
        new_rows[tid] = row.model_copy(
            update={
                "status": "complete",  # graded now, whatever the first grading's outcome
                "error_class": None,
                "error_message": None,
                "reward": first.reward,
                "criteria_met": first.criteria_met,
                "criteria_total": first.criteria_total,
                "criteria_unjudged": sum(v.source == "unjudged" for v in first.verdicts),
            }
        )
    _write_run(out, old, req, judge, reward, options, new_rows, grades[req.graders[0]])
    if len(req.graders) > 1:
        report.criteria, report.same = write_comparison(out / COMPARISON_FILE, req.graders, grades)
    return report


def regrade_identity(run_dir: Path, old: EvalRunConfig, req, judge, reward, options) -> dict:
    """What NEW_RUN's grades depend on: the source run, graders, judge (model and URL),
    reward and grader options. Recorded in regrade.json; a rerun must match it."""
    return {
        "source": str(run_dir.resolve()),
        "source_created_at": old.created_at,
        "source_fingerprint": old.fingerprint(),
        "graders": list(req.graders),
        "judge": judge.model if judge else None,
        "judge_api_base": judge.api_base if judge else None,
        "reward": reward,
        "grader_options": sorted(options),
        "archipelago": req.archipelago or old.archipelago if "archipelago" in req.graders else None,
    }


def claim_output(out: Path, identity: dict) -> None:
    """NEW_RUN is new, empty, or a regrade of the same run with the same judge and
    options (its regrade.json): anything else is refused, never merged into."""
    marker = out / MARKER_FILE
    if marker.is_file():
        try:
            held = orjson.loads(marker.read_bytes())
        except ValueError:
            held = {}
        diff = [
            f"{k}: {held.get(k)!r} -> {identity[k]!r}"
            for k in identity
            if held.get(k) != identity[k]
        ]
        if diff:
            raise UsageError(
                f"{out} holds a regrade of another run, judge or options ({'; '.join(diff)})",
                hint="pick a new -o NEW_RUN (its grades would otherwise be mixed with these)",
            )
        return
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(
            f"{out} is not empty and holds no {MARKER_FILE}: not a folder `eval regrade` wrote",
            hint="pick a new or empty -o NEW_RUN",
        )
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(marker, orjson.dumps(identity, option=orjson.OPT_INDENT_2) + b"\n")


def judge_settings(req: RegradeRequest, old: EvalRunConfig):
    from apexrl.grading.judge import JudgeSettings
    from apexrl.grading.requirements import judge_model

    model = judge_model(req.judge or old.judge)
    if model is None:
        if "archipelago" in req.graders:
            raise UsageError(
                "archipelago's grader judges every criterion: it needs --judge",
                hint="pass --judge openai/NAME --judge-api-base URL (or a provider model)",
            )
        return None
    api_base = req.judge_api_base or (old.judge_api_base if not req.judge else None)
    return JudgeSettings(model=model, api_base=api_base)


def grade_trial(
    grader: str,
    folder: Path,
    task_dir: Path,
    *,
    judge,
    reward: str,
    checkout,
    cache,
    worlds_dir: Path | None,
    options: frozenset[str] = frozenset(),
) -> GradeResult:
    """One trial's kept evidence, graded by `grader`."""

    from apexrl.grading.inputs import RubricError, read_inputs, task_rubric

    try:
        inputs, before, after = read_inputs(folder)
    except (OSError, ValueError) as e:
        raise UnreadableEvidenceError(
            f"{folder}: the kept grading inputs are unreadable: {e}"
        ) from None
    try:
        criteria, gold = task_rubric(task_dir / "tests", task_dir / "solution")
    except RubricError as e:
        raise BrokenTaskError(str(e)) from None
    return grade_kept(
        grader,
        inputs,
        before,
        after,
        criteria,
        gold,
        judge=judge,
        reward=reward,
        checkout=checkout,
        cache=cache,
        task_dir=task_dir,
        worlds_dir=worlds_dir,
        options=options,
    )


def grade_kept(
    grader: str,
    inputs,
    before: dict[str, bytes],
    after: dict[str, bytes],
    criteria: list[dict],
    gold: dict,
    *,
    judge,
    reward: str = "pass",
    checkout=None,
    cache=None,
    task_dir: Path | None = None,
    worlds_dir: Path | None = None,
    options=frozenset(),  # apexrl.grading.grader.GRADER_OPTIONS names (apexrl's grader)
) -> GradeResult:
    """Kept evidence (apexrl.grading.inputs) graded by `grader`."""
    import dataclasses

    if judge is not None and cache is not None:
        judge = dataclasses.replace(judge, cache=cache)
    if grader == "archipelago":
        from apexrl.grading.archipelago import grade_archipelago

        return grade_archipelago(
            criteria,
            inputs,
            before,
            after,
            judge=judge,
            checkout=checkout,
            reward=reward,
            cache=cache,
        )
    from apexrl.grading.evidence import collect_files, diff_world
    from apexrl.grading.grader import final_answer, grade
    from apexrl.worlds.store import FS_DIR

    with tempfile.TemporaryDirectory(prefix="apexrl-regrade-") as tmp:
        state = world_state(Path(tmp), inputs, before, after, task_dir, worlds_dir)
        changes = diff_world(state) if inputs.changes is not None else None
        files = (
            collect_files(state, changes, frozenset(options))
            if changes is not None and judge
            else None
        )
        return asyncio.run(
            grade(
                criteria,
                answer=final_answer(inputs.answer, inputs.messages, frozenset(options)),
                fs_root=state.after_root / FS_DIR,
                gold=gold,
                task_prompt=inputs.task_prompt,
                judge=judge,
                changes=changes,
                files=files,
                task_id=inputs.task_id,
                reward=reward,
                options=frozenset(options),
            )
        )


def world_state(tmp: Path, inputs, before, after, task_dir: Path | None, worlds_dir: Path | None):
    """The trial's worlds again: the pristine world (when the store is at hand) with the
    kept changes applied; without the store, only the changed files (the same diff)."""
    from apexrl.worlds.store import WorldState, WorldStore, overlay_sources, task_world

    sources: dict[str, Path] = {}
    if task_dir is not None and worlds_dir is not None and Path(worlds_dir).is_dir():
        try:
            tw = task_world(task_dir)
            sources = overlay_sources(
                WorldStore(Path(worlds_dir)).pristine(tw.world_id), tw.task_files
            )
        except ApexError:
            sources = {}
    b_root, a_root = tmp / "before", tmp / "after"
    for rel, data in before.items():
        (b_root / rel).parent.mkdir(parents=True, exist_ok=True)
        (b_root / rel).write_bytes(data)
        sources[rel] = b_root / rel
    ch = inputs.changes
    gone = set(ch.deleted) if ch is not None else set()
    for rel, src in sources.items():
        if rel in gone or rel in after:
            continue
        (a_root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, a_root / rel)
    for rel, data in after.items():
        (a_root / rel).parent.mkdir(parents=True, exist_ok=True)
        (a_root / rel).write_bytes(data)
    a_root.mkdir(exist_ok=True)
    return WorldState(after_root=a_root, before=sources if ch is not None else None)


def write_comparison(path: Path, graders: list[str], grades) -> tuple[int, int]:
    """comparison.jsonl: per criterion, the verdict under each grader and whether they agree."""
    lines, n, same = [], 0, 0
    a, rest = graders[0], graders[1:]
    for tid in sorted(grades[a]):
        others = [grades[g].get(tid) for g in rest]
        if any(o is None for o in others):
            continue
        first = grades[a][tid]
        maps = [{v.verifier_id: v for v in o.verdicts} for o in others]  # type: ignore[union-attr]
        for v in first.verdicts:
            verdicts = {a: v.met}
            for g, m in zip(rest, maps, strict=True):
                o = m.get(v.verifier_id)
                verdicts[g] = o.met if o is not None else None
            agree = len(set(verdicts.values())) == 1
            n += 1
            same += agree
            rec = {
                "task_id": first.task_id,
                "trial_id": tid,
                "verifier_id": v.verifier_id,
                "criterion": v.criteria,
                "verdicts": verdicts,
                "same": agree,
            }
            lines.append(orjson.dumps(rec))
    write_bytes_atomic(path, b"".join(x + b"\n" for x in lines))
    return n, same


def _rows_from_results(run_dir: Path) -> dict[str, EvalResultRow]:
    table = resume.read_results_table(run_dir)
    return {r["trial_id"]: EvalResultRow.model_validate(r) for r in table.to_pylist()}


def _write_run(out, old, req, judge, reward, options, rows, first_grades) -> None:
    from apexrl.eval.models import RUN_FILE, TRAJECTORIES_DIR

    cfg = old.model_copy(
        update={
            "judge": judge.model if judge else old.judge,
            "judge_api_base": judge.api_base if judge else old.judge_api_base,
            "grader": req.graders[0],
            "archipelago": req.archipelago or old.archipelago,
            "reward": reward,
            "grader_options": sorted(options),
            "regraded_from": str(Path(req.run_dir).resolve()),
            "command": None,  # `eval run`'s resume command does not apply here
        }
    )
    write_bytes_atomic(out / RUN_FILE, cfg.model_dump_json(indent=2).encode() + b"\n")
    for tid, g in first_grades.items():
        verdicts = orjson.dumps({"verdicts": [v.model_dump(mode="json") for v in g.verdicts]})
        write_bytes_atomic(out / TRAJECTORIES_DIR / tid / "verdicts.json", verdicts)
    (out / resume.JOURNAL_FILE).unlink(missing_ok=True)
    for row in rows.values():
        resume.append_result(out, row)
    ids = plan_ids(old)
    planned = [r for tid, r in rows.items() if ids is None or tid in ids]
    resume.write_results(out, planned)
    resume.write_summary(out, summarize(planned, planned=planned_trials(old)))
