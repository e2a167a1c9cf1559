"""Does a rubric need the LLM judge, and is one configured? (checked before any trial)

A criterion needs the judge when it has no deterministic `check`: every criterion of
the published APEX-Agents rubrics is free text (docs/facts.md section 3). Running such
tasks without a judge scores every one of those criteria 0, silently, so runners
(`eval run`, `train`) call `check_judge` first:

  judge unset, some criterion needs one   -> UsageError (exit 2) naming --judge / --no-judge
  judge = "none" (--no-judge)             -> runs; those criteria are "unjudged" (unmet)
  judge = a LiteLLM model                 -> its credentials must be present (else exit 3)

The judge setting is ONE value carried from the CLI or the recipe to grading:
None (not configured), NO_JUDGE ("none", explicitly off) or a LiteLLM model name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.errors import AuthError, BadRecordError, UsageError

NO_JUDGE = "none"  # the judge setting of `--no-judge` / recipe `judge = "none"`
JUDGE_FLAGS = "--judge MODEL (e.g. gemini/gemini-2.5-flash, or openai/<name> with --judge-api-base)"


def judge_model(judge: str | None) -> str | None:
    """The LiteLLM model of a judge setting; None when there is no judge (unset or off)."""
    if judge is None or not judge.strip() or judge.strip().lower() == NO_JUDGE:
        return None
    return judge.strip()


def criterion_needs_judge(criterion: dict) -> bool:
    """True when only the LLM judge can decide this criterion (it has no `check`)."""
    return not criterion.get("check")


def rubric_of(task_dir: Path) -> list[dict]:
    """The task's rubric (tests/verifiers.json), read on the host."""
    path = Path(task_dir) / "tests" / "verifiers.json"
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise BadRecordError(
            str(path), "the task has no rubric", hint="reconvert it with `apexrl tasks convert`"
        ) from None
    except (OSError, ValueError) as e:
        raise BadRecordError(str(path), f"unreadable rubric: {e}") from None
    if not isinstance(data, list) or not all(isinstance(c, dict) for c in data):
        raise BadRecordError(str(path), "expected a JSON list of criteria objects")
    return data


@dataclass
class JudgeNeeds:
    """What a set of tasks asks of the judge."""

    n_tasks: int = 0
    n_criteria: int = 0
    n_judge_criteria: int = 0  # criteria without a deterministic check
    tasks_needing: list[str] = field(default_factory=list)  # task dir names

    @property
    def needed(self) -> bool:
        return self.n_judge_criteria > 0

    def count(self, rubric: list[dict], name: str) -> None:
        """Add one task's rubric (`name`: how tasks_needing names the task)."""
        n = sum(1 for c in rubric if criterion_needs_judge(c))
        self.n_tasks += 1
        self.n_criteria += len(rubric)
        self.n_judge_criteria += n
        if n:
            self.tasks_needing.append(name)


def judge_needs(task_dirs: Iterable[Path], *, missing_ok: bool = False) -> JudgeNeeds:
    """missing_ok: a task without tests/verifiers.json counts as no criteria (its own
    validation reports it) instead of an error."""
    out = JudgeNeeds()
    for d in task_dirs:
        if missing_ok and not (Path(d) / "tests" / "verifiers.json").exists():
            continue
        out.count(rubric_of(Path(d)), Path(d).name)
    return out


MAX_RUBRIC_BYTES = 10_000_000


def _rubric_from_blob(blob: bytes, where: str) -> list[dict]:
    """tests/verifiers.json of a packed task (gzip tar), read in memory: nothing extracted."""
    from apexrl.artifacts.archive_extract import gunzip, tar_members

    # dataset bytes: the shared reader (size and ratio limits), as `tasks unpack` uses
    try:
        members, _ = tar_members(gunzip(blob, where), where)
    except BadRecordError as e:
        raise BadRecordError(where, f"task_binary is not a readable gzip tar: {e.detail}") from None
    for m in members:
        parts = m.name.strip("/").split("/")
        if parts[-2:] == ["tests", "verifiers.json"] and len(parts) <= 3 and m.kind == "file":
            if m.size > MAX_RUBRIC_BYTES:
                raise BadRecordError(where, "tests/verifiers.json is too large")
            try:
                with m.read() as fh:  # type: ignore[misc]
                    data = json.loads(fh.read())
            except ValueError as e:
                raise BadRecordError(where, f"tests/verifiers.json is not JSON: {e}") from None
            if isinstance(data, list) and all(isinstance(c, dict) for c in data):
                return data
            raise BadRecordError(where, "tests/verifiers.json is not a list of criteria")
    return []  # no rubric: the dataset's own validation reports it


def dataset_judge_needs(source: str) -> JudgeNeeds | None:
    """judge_needs of a dataset: a folder of task dirs, or Parquet (`tasks pack` output:
    rubrics read from task_binary in memory). None for a remote dataset (hf://, s3://):
    checked when the trials run."""
    from apexrl.tasks.pack import find_task_dirs

    text = str(source)
    if "://" in text:
        return None
    path = Path(text).expanduser()
    if path.is_dir():
        dirs = find_task_dirs(path)
        if dirs:
            return judge_needs(dirs, missing_ok=True)
    if not path.exists():
        return None
    from apexrl.tasks.dataset import iter_rows

    out = JudgeNeeds()
    for where, row in iter_rows(text):
        rubric = _rubric_from_blob(row.get("task_binary") or b"", where)
        out.count(rubric, str(row.get("path") or where))
    return out


def judge_credentials(model: str, api_base: str | None = None, environ=None) -> None:
    """AuthError (exit 3) when the judge's provider key is not in the environment.

    A judge at an explicit api_base (an OpenAI-compatible server such as
    `apexrl engine serve`) needs no key. Otherwise LiteLLM says which variables the
    provider reads (GEMINI_API_KEY / GOOGLE_API_KEY for gemini/..., OPENAI_API_KEY ...).
    """
    if api_base:
        return
    env = os.environ if environ is None else environ
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    import litellm

    litellm.suppress_debug_info = True
    try:
        litellm.get_llm_provider(model)
        found = litellm.validate_environment(model=model)
    except Exception as e:  # an unknown provider prefix
        raise UsageError(
            f"judge model {model!r} is not a LiteLLM model: {type(e).__name__}: {e}",
            hint="use provider/model, e.g. gemini/gemini-2.5-flash or openai/gpt-4.1",
        ) from None
    missing = list(found.get("missing_keys") or [])
    if model.startswith(("gemini/", "vertex_ai/")) and any(
        env.get(k) for k in ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    ):
        missing = []  # the recipe's GOOGLE_API_KEY serves Gemini too
    missing = [k for k in missing if not env.get(k)]
    if missing:
        raise AuthError(
            f"the judge {model} needs {' or '.join(missing)} and it is not set",
            hint=f"export {missing[0]}=... (or put it in .env); or serve the judge on an "
            "OpenAI-compatible server and give its URL (--judge-api-base, or the recipe's "
            "agent.judge_api_base)",
        )


def check_judge(
    task_dirs: Iterable[Path] | JudgeNeeds,
    judge: str | None,
    *,
    api_base: str | None = None,
    environ=None,
    flags: str = "--judge MODEL ... or --no-judge",
) -> JudgeNeeds:
    """Refuse to start when the rubric needs a judge and none is set (exit 2); check the
    judge's credentials when one is set (exit 3). Returns what the tasks need.

    flags: how the caller's user sets the judge (the CLI flags by default)."""
    needs = task_dirs if isinstance(task_dirs, JudgeNeeds) else judge_needs(task_dirs)
    model = judge_model(judge)
    if judge is None and needs.needed:
        shown = ", ".join(needs.tasks_needing[:3])
        more = len(needs.tasks_needing) - 3
        hint = (
            f"pass {JUDGE_FLAGS}; or --no-judge to run anyway with those criteria "
            "unjudged (scored as unmet)"
            if flags.startswith("--judge")
            else flags
        )
        raise UsageError(
            f"{needs.n_judge_criteria} of {needs.n_criteria} rubric criteria in "
            f"{len(needs.tasks_needing)} task(s) ({shown}{f' and {more} more' if more > 0 else ''})"
            " are free text that only an LLM judge can grade, and no judge is configured",
            hint=hint,
        )
    if model is not None:
        judge_credentials(model, api_base, environ)
    return needs


TRAIN_FLAGS = (
    "set the recipe's agent.judge (--set agent.judge=gemini/gemini-2.5-flash, or an "
    "openai/<name> with --set agent.judge_api_base=URL), the equivalent of --judge; or "
    "--set agent.judge=none, the equivalent of --no-judge, to train with those criteria "
    "unjudged (reward 0 for them)"
)


def check_recipe_judge(
    sources: list[str | None], judge: str | None, api_base: str | None, *, agent: str = "apexrl"
) -> list[JudgeNeeds]:
    """`train` (dry-run and launch): the check above over the recipe's datasets."""
    if judge is None and agent == "oracle":
        judge = NO_JUDGE
    out = []
    for src in sources:
        if not src:
            continue
        needs = dataset_judge_needs(src)
        if needs is not None:
            out.append(check_judge(needs, judge, api_base=api_base, flags=TRAIN_FLAGS))
    if not out and judge_model(judge):
        judge_credentials(judge_model(judge), api_base)  # type: ignore[arg-type]
    return out
