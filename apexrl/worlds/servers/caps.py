"""How much one tool reply may carry, capped where the reply is made.

A world's files are hostile input: a 200 MB text file read whole became a 200 MB reply
that the host's agent driver held several times over while decoding it. Every tool reply
goes through `capped` (the servers' `guard`): text longer than the limit keeps its head
(2/3) and tail (1/3) around a note the model reads; an image over the image limit is
replaced by a note. Readers of files (`read_text_file`, `read_image_file`) check sizes
before reading, so the gateway never loads what it would cut.

Limits, set for the gateway's process (0 turns a limit off):
  APEXRL_TOOL_REPLY_MAX_CHARS   characters of text in one reply (default 1,000,000)
  APEXRL_TOOL_IMAGE_MAX_BYTES   bytes of one image, before base64 (default 10 MiB)
The agent driver refuses a reply above its own byte limit as well (`tool_reply_max_bytes`,
`apexrl.agent.mcp_tools`), whatever server made it.
"""

from __future__ import annotations

import os
from typing import Any

REPLY_MAX_CHARS_ENV = "APEXRL_TOOL_REPLY_MAX_CHARS"
IMAGE_MAX_BYTES_ENV = "APEXRL_TOOL_IMAGE_MAX_BYTES"
DEFAULT_REPLY_MAX_CHARS = 1_000_000
DEFAULT_IMAGE_MAX_BYTES = 10 * 1024 * 1024


def _limit(env: str, default: int) -> int:
    raw = os.environ.get(env, "").strip()
    if not raw:
        return default
    try:
        return max(0, int(raw))
    except ValueError:
        return default  # a malformed setting must not lift the cap


def reply_max_chars() -> int:
    return _limit(REPLY_MAX_CHARS_ENV, DEFAULT_REPLY_MAX_CHARS)


def image_max_bytes() -> int:
    return _limit(IMAGE_MAX_BYTES_ENV, DEFAULT_IMAGE_MAX_BYTES)


def truncation_note(shown: int, total: str) -> str:
    return (
        f"[... truncated by the tool server: {shown:,} characters shown of {total}; one tool "
        f"reply holds at most {reply_max_chars():,} characters. Ask for a smaller part "
        "(a page, a range of lines or cells, a search) to see the rest ...]"
    )


def cap_text(text: str, limit: int | None = None) -> str:
    """`text`, or its head (2/3) and tail (1/3) around a truncation note."""
    limit = reply_max_chars() if limit is None else limit
    if limit <= 0 or len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    note = truncation_note(limit, f"{len(text):,}")
    return f"{text[:head]}\n\n{note}\n\n{text[len(text) - tail :]}"


def image_note(nbytes: int) -> str:
    return (
        f"[image not returned: {nbytes:,} bytes is over the {image_max_bytes():,}-byte limit "
        "of one image in a tool reply]"
    )


def capped(result: Any) -> Any:
    """A tool's result (a string, MCP content, a list of it, or a CallToolResult) with
    its text capped and any image over the image limit replaced by a note."""
    from mcp.types import CallToolResult, ImageContent, TextContent

    if isinstance(result, str):
        return cap_text(result)
    if isinstance(result, CallToolResult):
        return result.model_copy(update={"content": capped(list(result.content))})
    if isinstance(result, TextContent):
        return capped([result])[0]
    if isinstance(result, ImageContent):
        return capped([result])[0]
    if not isinstance(result, list):
        return result
    limit = reply_max_chars()
    left = limit
    out = []
    for c in result:
        if isinstance(c, TextContent) and limit > 0 and len(c.text) > left:
            text = cap_text(c.text, left) if left else truncation_note(0, f"{len(c.text):,}")
            c = c.model_copy(update={"text": text})
        if isinstance(c, TextContent):
            left = max(0, left - len(c.text))
        elif isinstance(c, ImageContent):
            nbytes = len(c.data) * 3 // 4  # base64
            if 0 < image_max_bytes() < nbytes:
                c = TextContent(type="text", text=image_note(nbytes))
        out.append(c)
    return out
