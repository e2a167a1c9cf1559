"""Prompt files for the agent: the system prompt and the extra prompt appended to each
task's instruction (the recipe's tool guidance and text-only note). Read once on the host,
recorded with their sha256 (run.json, the training manifest), and passed to trials as
text."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apexrl.errors import UsageError

MAX_PROMPT_BYTES = 256 * 1024


class PromptInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = None  # where it was read from (informational)
    sha256: str  # of the UTF-8 text
    text: str
    commit: str | None = None  # read from a checkout (recipe:PATH): its git commit


def prompt_info(text: str, path: str | None = None) -> PromptInfo:
    return PromptInfo(path=path, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), text=text)


def read_prompt(path: str | Path, what: str) -> PromptInfo:
    """Read a prompt file; a clear usage error when it is missing, empty, huge or not UTF-8."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} {p}: no such file", hint=f"pass a text file to {what}")
    data = p.read_bytes()
    if len(data) > MAX_PROMPT_BYTES:
        raise UsageError(f"{what} {p}: {len(data)} bytes; at most {MAX_PROMPT_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{what} {p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text.strip():
        raise UsageError(f"{what} {p}: the file is empty")
    return prompt_info(text, str(p.resolve()))


def with_extra_prompt(instruction: str, extra: str | None) -> str:
    """The instruction the agent sends: the task's, then the extra prompt (as the recipe)."""
    return f"{instruction}\n\n{extra}" if extra else instruction
