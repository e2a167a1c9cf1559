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

from apexrl.errors import RemoteError

PROMPT_VERSION = "apexrl-judge-v1"

SYSTEM_PROMPT = """You grade one criterion of a rubric for a task an AI agent attempted.
You see the task, the agent's final answer, and the files the agent created, changed
or deleted in its workspace. Decide whether the criterion is met by that output alone.
Be strict: a criterion is met only when the output clearly satisfies it.
Reply with JSON only, no other text:
{"rationale": "<one or two sentences>", "is_criteria_true": true or false}"""

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
    model: str
    api_base: str | None = None
    api_key: str | None = None  # None: LiteLLM reads the provider's key from the environment
    timeout_s: float = 120.0
    max_attempts: int = 3  # judge calls per criterion when the reply is not valid JSON
    transport_retries: int = 2  # LiteLLM retries of timeouts/5xx/rate limits
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = 8


@dataclass
class JudgeVerdict:
    met: bool
    rationale: str
    attempts: int
    prompt_sha256: str = ""  # of the user prompt the judge saw (task, criterion, evidence)


def parse_verdict(text: str) -> tuple[bool, str]:
    """(is_criteria_true, rationale) from a reply; ValueError saying what is wrong."""
    s = (text or "").strip()
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


def user_prompt(task: str, criterion: str, answer: str, changes: str) -> str:
    return (
        f"## Task\n{task.strip()}\n\n"
        f"## Criterion\n{criterion.strip()}\n\n"
        f"## Agent's final answer\n{answer.strip() or '(empty)'}\n\n"
        f"## Files the agent created, changed or deleted\n{changes.strip() or '(none)'}\n"
    )


class Judge:
    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self._sem = asyncio.Semaphore(max(1, settings.concurrency))

    async def _complete(self, messages: list[dict]) -> str:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
        import litellm

        s = self.settings
        kw: dict = {}
        if s.api_base:
            kw["api_base"] = s.api_base
            kw["api_key"] = s.api_key or "none"
        elif s.api_key:
            kw["api_key"] = s.api_key
        try:
            resp = await litellm.acompletion(
                model=s.model,
                messages=messages,
                temperature=s.temperature,
                max_tokens=s.max_tokens,
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
        return resp.choices[0].message.content or ""

    async def judge(self, task: str, criterion: str, answer: str, changes: str) -> JudgeVerdict:
        prompt = user_prompt(task, criterion, answer, changes)
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": prompt},
        ]
        why = ""
        async with self._sem:
            for attempt in range(1, self.settings.max_attempts + 1):
                reply = await self._complete(messages)
                try:
                    met, rationale = parse_verdict(reply)
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


def _short(e: Exception, n: int = 300) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= n else s[:n] + "..."
