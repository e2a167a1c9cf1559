"""The LLM judge: one binary verdict per rubric criterion, through LiteLLM.

Any LiteLLM model works (`gemini/gemini-2.5-flash`, `openai/gpt-4.1`, or
`openai/<name>` with `api_base` for any OpenAI-compatible server such as
`apexrl engine serve`). The judge must answer with JSON
`{"rationale": str, "is_criteria_true": bool}`; a reply that is not such JSON is
retried (the model is told what was wrong) up to `max_attempts` times, then the
grading fails with a classified JudgeError: the trial has no verifier result
rather than a wrong score.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from apexrl.artifacts.file_types import criterion_label, file_scope
from apexrl.errors import RemoteError

PROMPT_VERSION = "apexrl-judge-v3"

# Size caps of what the judge is shown (stated in the prompt, see evidence.py).
MAX_ANSWER_CHARS = 20_000

# The grading semantics follow archipelago's output grader (Mercor's public grading
# runner for APEX-Agents): evidence rules for files, strict criterion matching,
# tolerance for formatting and rounding, and an evaluation scope per criterion. The
# wording is apexrl's own.
SYSTEM_PROMPT = """You are an expert grader checking the work of an AI agent against ONE criterion
of a rubric. Decide from the evidence given whether the criterion is met. Be precise,
objective and consistent.

HOW TO GRADE
- Judge exactly what the criterion asks: nothing more, nothing less. Do not penalise
  aspects the criterion does not mention.
- Use only the evidence in AGENT OUTPUT. Do not guess or invent content you are not shown.

EVIDENCE FROM FILES
- File contents count only when they appear in a FILE block. What the agent says in its
  answer about files ("I updated the model") is not evidence of a file change.
- No FILE block means the agent created or changed no file: a criterion that needs a
  file is not met.
- If the criterion names a file, only that file counts; if it names a kind of file (a
  spreadsheet, a memo, a deck), only files of that kind count. Changes to other files
  do not help.

STRICT MATCHING
- Every specific detail the criterion states (numbers, names, dates, identifiers, units)
  must be present and correct. Partial or approximate matches do not satisfy it.
- Both the conclusion and the reasoning must agree with the criterion: a right answer
  with a wrong explanation fails.
- A criterion with several requirements ("X and Y") is met only if each one is met.
- Match the criterion's level of detail: when it asks for a whole category, a subset
  does not satisfy it; when it asks for a specific term, a vaguer one does not.

TOLERANCE
- Formatting differences are fine when the substance is right: $153.5 equals $153.50,
  10.0 equals 10, 1,200 equals 1200.
- A value that rounds to the precision the criterion uses meets it: $2.07B meets
  "$2.1bn", 26.83% meets "26.8%". This holds for billions, millions, percentages and
  other units. Rounding rules stated in the criterion take precedence.
- Legacy and current variants of a file format are the same format (.xls/.xlsx,
  .doc/.docx, .ppt/.pptx).

WHAT YOU ARE SHOWN
{size_rule}
- Spreadsheets are shown cell by cell with computed values (and the formula), PDFs as
  their page text, documents and slides as their text. A document's tracked changes
  (insertions and deletions) and comments are listed after its text; a changed file's
  DIFF block shows what changed since the start.

Reply with one JSON object and nothing else:
{{"rationale": "<the criterion's requirement, the evidence you found, your conclusion>",
 "is_criteria_true": true or false}}"""

SCOPE_TEXT = {
    "answer": "Grade the agent's final answer only. File changes are not part of this criterion.",
    "files": "Grade the agent's file changes only. Its final answer is not part of this criterion.",
    "both": "Grade both the agent's final answer and the file changes it made.",
}


def criterion_scope(criterion: dict, *, lenient: bool = False) -> tuple[str, tuple[str, ...]]:
    """(scope, file suffixes) of a criterion: scope answer | files | both (archipelago's
    evaluation scope); suffixes limit the files shown (empty: all). Read from the
    criterion's `evaluation_scope` (answer/files/both) or `expected_file_type` (flat, or
    in archipelago's verifier_values; apexrl.artifacts.file_types); neither: both. An
    unknown label raises UnknownFileType: it is never widened to all output."""
    scope = str(criterion.get("evaluation_scope") or "").strip().lower()
    if scope in SCOPE_TEXT:
        return scope, ()
    label = criterion_label(criterion)
    if label is None:
        return "both", ()
    return file_scope(label, lenient=lenient)


SIZE_CAPPED = """- The answer is shown up to {answer_cap} characters, each file up to {file_cap}
  characters and all files together up to {total_cap} characters. Content cut at a limit
  is marked [... truncated ...]; grade on what is visible."""
SIZE_WHOLE = """- The answer and every created or changed file are shown whole."""


def system_prompt(file_cap: int | None = None, total_cap: int | None = None) -> str:
    """The judge's instructions; with caps (the `evidence_caps` option) they are stated."""
    if file_cap is None and total_cap is None:
        rule = SIZE_WHOLE
    else:
        rule = SIZE_CAPPED.format(
            answer_cap=f"{MAX_ANSWER_CHARS:,}",
            file_cap=f"{file_cap or 0:,}",
            total_cap=f"{total_cap or 0:,}",
        )
    return SYSTEM_PROMPT.format(size_rule=rule)


# The verdict's structure, sent as the request's response schema (unless `free_json`).
VERDICT_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "criterion_verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "rationale": {"type": "string"},
                "is_criteria_true": {"type": "boolean"},
            },
            "required": ["rationale", "is_criteria_true"],
            "additionalProperties": False,
        },
    },
}


# The selection step's instructions and reply schema (the field name is archipelago's, so
# one judge model serves either grader).
SELECT_SYSTEM = """You prepare the grading of an AI agent's work against ONE rubric criterion.
The agent's output consists of numbered items (files, or single sheets and slides of
files). There are too many to show the grader at once: pick every item the grader needs
to decide the criterion, and only those. When unsure whether an item matters, pick it.
Reply with JSON only: {"rationale": "...", "selected_artifact_indices": [1-based indices]}"""
SELECT_PROMPT = """ORIGINAL TASK
{task}

CRITERION
{criterion}"""
SELECTION_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "item_selection",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "rationale": {"type": "string"},
                "selected_artifact_indices": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["rationale", "selected_artifact_indices"],
            "additionalProperties": False,
        },
    },
}


def _json_part(text: str) -> str:
    s = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S).strip()
    start, end = s.find("{"), s.rfind("}")
    return s[start : end + 1] if 0 <= start < end else s


RETRY_NOTE = (
    "Your reply was not valid: {why}. Reply again with JSON only: "
    '{{"rationale": "...", "is_criteria_true": true or false}}'
)


class JudgeError(RemoteError):
    """The judge could not give a verdict. kind: bad_json, unavailable, bad_request."""

    def __init__(self, message: str, *, kind: str, retryable: bool) -> None:
        super().__init__(
            message,
            retryable=retryable,
            hint="check the judge model name, its API key and api_base; rerun the grading",
        )
        self.kind = kind


@dataclass
class JudgeSettings:
    """Defaults are archipelago's: no temperature or output cap sent (a reasoning judge's
    thinking tokens count against a cap), 10 attempts per criterion, 3600 s per call,
    a response schema. The `fixed_sampling`, `few_retries` and `free_json` grader
    options restore apexrl's earlier settings (apexrl.grading.grader.apply_options)."""

    model: str
    api_base: str | None = None
    api_key: str | None = None  # None: LiteLLM reads the provider's key from the environment
    timeout_s: float = 3600.0
    max_attempts: int = 10  # judge calls per criterion when the reply is not valid JSON
    transport_retries: int = 2  # LiteLLM retries of timeouts/5xx/rate limits
    temperature: float | None = None  # None: not sent
    max_tokens: int | None = None  # None: not sent
    response_schema: bool = True  # send VERDICT_SCHEMA as response_format
    concurrency: int = 8
    context_tokens: int | None = None  # the judge's window (None: LiteLLM's, else 128,000)
    cache: Any = None  # apexrl.grading.judge_cache.JudgeCache: by (identity(), prompt sha256)

    def identity(self) -> str:
        """The judge half of a cache key: model, server and the sampling settings sent."""
        return judge_identity(
            self.model,
            self.api_base,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            response_schema=self.response_schema,
        )


def judge_identity(model: str, api_base: str | None = None, **sampling: object) -> str:
    """The judge half of a cache key (apexrl.grading.judge_cache): what besides the prompt
    decides its reply (the model, the server it is asked on, the sampling settings sent)."""
    base = (api_base or "").rstrip("/") or None
    return json.dumps({"model": model, "api_base": base, **sampling}, sort_keys=True)


@dataclass
class JudgeVerdict:
    met: bool
    rationale: str
    attempts: int
    prompt_sha256: str = ""  # of the system + user prompt the judge was sent


def parse_verdict(text: str) -> tuple[bool, str]:
    """(is_criteria_true, rationale) from a reply; ValueError saying what is wrong."""
    s = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S).strip()  # reasoning models
    fence = re.search(r"```(?:json)?\s*(.*?)```", s, re.S)
    if fence:
        s = fence.group(1).strip()
    if not s.startswith("{"):
        start, end = s.find("{"), s.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("no JSON object in the reply")
        s = s[start : end + 1]
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise ValueError("the JSON is not an object")
    val = obj.get("is_criteria_true")
    if isinstance(val, str) and val.strip().lower() in ("true", "false"):
        val = val.strip().lower() == "true"
    if not isinstance(val, bool):
        raise ValueError("is_criteria_true is missing or not true/false")
    rationale = obj.get("rationale")
    if not isinstance(rationale, str):
        raise ValueError("rationale is missing or not a string")
    return val, rationale


def user_prompt(
    task: str,
    criterion: str,
    answer: str,
    changes: str,
    scope: str = "both",
    answer_cap: int | None = MAX_ANSWER_CHARS,
) -> str:
    """The judge's user message: task, the agent's output (per scope), the criterion."""
    shown = (answer or "").strip() or "(no final answer)"
    if answer_cap is not None and len(shown) > answer_cap:
        cut = len(shown) - answer_cap
        shown = shown[:answer_cap] + f"\n[... truncated: {cut} more characters ...]"
    parts = [f"ORIGINAL TASK\n{task.strip() or '(not given)'}", "AGENT OUTPUT"]
    if scope in ("answer", "both"):
        parts.append(f"Final answer:\n{shown}")
    if scope in ("files", "both"):
        parts.append(f"Files created, changed or deleted:\n{changes.strip() or '(none)'}")
    parts += [
        f"CRITERION\n{criterion.strip()}",
        f"EVALUATION SCOPE\n{SCOPE_TEXT.get(scope, SCOPE_TEXT['both'])}",
        "Decide whether the criterion is met, within the evaluation scope. "
        'Reply with JSON only: {"rationale": "...", "is_criteria_true": true or false}',
    ]
    return "\n\n".join(parts) + "\n"


class Judge:
    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self._sem = asyncio.Semaphore(max(1, settings.concurrency))

    async def _complete(self, messages: list[dict], schema: dict | None = None) -> str:
        s = self.settings
        kw: dict = {}
        if s.response_schema:
            kw["response_format"] = schema or VERDICT_SCHEMA
        message = await self.request(messages, **kw)
        return message.content or ""

    async def request(self, messages: list[dict], **extra):
        """One judge call; the reply's message (content, tool_calls). `extra` goes to
        LiteLLM as is (response_format, tools)."""
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
        import litellm

        s = self.settings
        kw: dict = dict(extra)
        if s.api_base:
            kw["api_base"] = s.api_base
            kw["api_key"] = s.api_key or "none"
        elif s.api_key:
            kw["api_key"] = s.api_key
        if s.temperature is not None:
            kw["temperature"] = s.temperature
        if s.max_tokens is not None:
            kw["max_tokens"] = s.max_tokens
        try:
            resp = await litellm.acompletion(
                model=s.model,
                messages=messages,
                timeout=s.timeout_s,
                num_retries=s.transport_retries,
                **kw,
            )
        except (litellm.BadRequestError, litellm.AuthenticationError, litellm.NotFoundError) as e:
            raise JudgeError(
                f"judge {s.model} refused the request: {_short(e)}",
                kind="bad_request",
                retryable=False,
            ) from None
        except Exception as e:  # timeouts, 5xx, rate limits after LiteLLM's retries
            raise JudgeError(
                f"judge {s.model} unavailable: {type(e).__name__}: {_short(e)}",
                kind="unavailable",
                retryable=True,
            ) from None
        return resp.choices[0].message

    async def select(self, task: str, criterion: str, items: list[tuple[str, str]]) -> list[int]:
        """The items (label, body) that matter for the criterion, as 0-based indices: the
        judge's pick when the evidence takes more than half its window (archipelago's
        selection step). A reply that names none, or is not valid, keeps every item."""
        from apexrl.grading import budget

        window = budget.context_tokens(self.settings.model, self.settings.context_tokens)
        head = SELECT_PROMPT.format(task=task.strip() or "(not given)", criterion=criterion.strip())
        room = int(window * budget.SELECT_SHARE) - budget.count_tokens(
            SELECT_SYSTEM + head, self.settings.model
        )
        bodies = budget.fit_bodies(
            [b for _, b in items], max(room - 50 * len(items), 0), self.settings.model
        )
        listing = "\n\n".join(
            f'<ITEM index="{i}" name="{label}">\n{body}\n</ITEM>'
            for i, ((label, _), body) in enumerate(zip(items, bodies, strict=True), 1)
        )
        messages = [
            {"role": "system", "content": SELECT_SYSTEM},
            {"role": "user", "content": f"{head}\n\nITEMS\n{listing}\n"},
        ]
        async with self._sem:
            if self.settings.cache is not None:
                self.settings.cache.count_call()
            reply = await self._complete(messages, SELECTION_SCHEMA)
        try:
            picked = json.loads(_json_part(reply)).get("selected_artifact_indices")
        except (ValueError, AttributeError):
            picked = None
        if not isinstance(picked, list):
            return list(range(len(items)))
        chosen = sorted({i - 1 for i in picked if isinstance(i, int) and 1 <= i <= len(items)})
        return chosen or list(range(len(items)))

    async def judge(
        self,
        task: str,
        criterion: str,
        answer: str,
        changes: str,
        *,
        scope: str = "both",
        system: str | None = None,
        answer_cap: int | None = None,
    ) -> JudgeVerdict:
        if system is None:
            system = system_prompt()
        prompt = user_prompt(task, criterion, answer, changes, scope, answer_cap)
        digest = prompt_hash(system, prompt)
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": prompt},
        ]
        why = ""
        cache = self.settings.cache
        identity = self.settings.identity()
        if cache is not None:
            hit = cache.get(identity, digest)
            if hit is not None:
                try:
                    met, rationale = parse_verdict(hit)
                    return JudgeVerdict(
                        met=met, rationale=rationale, attempts=0, prompt_sha256=digest
                    )
                except ValueError:
                    pass
        async with self._sem:
            for attempt in range(1, self.settings.max_attempts + 1):
                if cache is not None:
                    cache.count_call()
                reply = await self._complete(messages)
                try:
                    met, rationale = parse_verdict(reply)
                    if cache is not None:
                        cache.put(identity, digest, reply)
                    return JudgeVerdict(
                        met=met, rationale=rationale, attempts=attempt, prompt_sha256=digest
                    )
                except ValueError as e:
                    why = str(e)
                    messages = messages[:2] + [
                        {"role": "assistant", "content": reply[:2000]},
                        {"role": "user", "content": RETRY_NOTE.format(why=why)},
                    ]
        raise JudgeError(
            f"judge {self.settings.model} gave no valid JSON verdict in "
            f"{self.settings.max_attempts} attempts (last: {why})",
            kind="bad_json",
            retryable=True,
        )


def prompt_hash(system: str, user: str) -> str:
    """sha256 of exactly what the judge was sent (system, then user message)."""
    return hashlib.sha256(f"{system}\n\n{user}".encode()).hexdigest()


def _short(e: Exception, n: int = 300) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= n else s[:n] + "..."


PROBE_PROMPT = (
    "This is a connectivity check before grading. Reply with JSON only: "
    '{"rationale": "ok", "is_criteria_true": true}'
)


def probe(settings: JudgeSettings, *, timeout_s: float = 60.0) -> str:
    """One tiny request to the judge, sent as grading sends it (model, api_base, key,
    response format), with one transport retry and a short timeout: its reply, or
    JudgeError. Runners call it before any trial, so that a judge that cannot answer
    stops the run instead of leaving every trial ungraded."""
    import dataclasses

    s = dataclasses.replace(
        settings, timeout_s=min(settings.timeout_s, timeout_s), transport_retries=1, cache=None
    )
    messages = [
        {"role": "system", "content": "You grade answers against criteria."},
        {"role": "user", "content": PROBE_PROMPT},
    ]
    return asyncio.run(Judge(s)._complete(messages))
