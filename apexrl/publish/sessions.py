"""One trial as a Session Traces file: the JSONL the Hub's trace viewer renders (its
"Session Trace Simple Format"). Line 1 is the session header (`type` "session",
`harness`, `id`, an optional `name`; other keys are kept as metadata), then one
`{"type": "message", "message": {...}}` line per message: `role` (system, user,
assistant, tool), `content` (text), and where they apply `reasoningContent`,
`toolCalls` ([{id, function: {name, arguments}}], arguments a JSON string), `toolCallId`
(on a tool result) and `model`.

Built from messages the publish redactor already scanned; nothing here reads a file.
"""

from __future__ import annotations

import json
import re

HARNESS = "apexrl"
ROLES = ("system", "user", "assistant", "tool")
SESSIONS_DIR = "sessions"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def session_path(task_id: str | None, trial_id: str) -> str:
    """`sessions/<task>/<trial>.jsonl`: one folder per task keeps every folder far under
    the Hub's files-per-folder limit however many attempts a run made."""
    task = _UNSAFE.sub("_", str(task_id or "unknown")).strip("._") or "unknown"
    trial = _UNSAFE.sub("_", trial_id).strip("._") or "trial"
    return f"{SESSIONS_DIR}/{task}/{trial}.jsonl"


def session_lines(header: dict, messages: list[dict], model: str | None) -> list[dict]:
    """The header line then one line per message (messages as apexrl records them:
    role, content, reasoning_content, tool_calls, tool_call_id)."""
    lines = [{"type": "session", "harness": HARNESS, **header}]
    for m in messages:
        lines.append({"type": "message", "message": _message(m, model)})
    return lines


def _message(m: dict, model: str | None) -> dict:
    role = str(m.get("role") or "")
    if role not in ROLES:  # e.g. "developer": shown as a system message
        role = "system"
    out: dict = {"role": role, "content": m.get("content") or ""}
    if m.get("reasoning_content"):
        out["reasoningContent"] = m["reasoning_content"]
    calls = [_call(c) for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    if calls and role == "assistant":
        out["toolCalls"] = calls
    if role == "tool" and m.get("tool_call_id"):
        out["toolCallId"] = str(m["tool_call_id"])
    if role == "assistant" and model:
        out["model"] = model
    return out


def _call(c: dict) -> dict:
    fn = c.get("function") if isinstance(c.get("function"), dict) else c
    args = fn.get("arguments")
    if not isinstance(args, str):  # the format wants the arguments as a JSON string
        args = json.dumps(args if args is not None else {}, ensure_ascii=False)
    name = str(fn.get("name") or "")
    return {"id": str(c.get("id") or ""), "function": {"name": name, "arguments": args}}


def to_jsonl(lines: list[dict]) -> bytes:
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()
