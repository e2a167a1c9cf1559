"""Parse raw completion text: `<think>` reasoning and tool calls.

Two tool-call formats inside `<tool_call>...</tool_call>`:
- Hermes JSON (Qwen3, Qwen2.5): `{"name": "f", "arguments": {...}}`
- Qwen3 XML (Qwen3-Coder, Qwen3.5/3.6):
  `<function=f>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>`
A `<tool_call>` that is never closed is a parse error, never a guess.

Separators the chat template writes around the parts (`<think>\\n`, `\\n</think>\\n\\n`,
`\\n<tool_call>`) are removed exactly once, so rendering the parsed message with a
verbatim template gives back the text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

ParseErrorKind = Literal[
    "unclosed_tool_call", "unclosed_think", "invalid_json", "invalid_xml", "missing_name"
]

TOOL_OPEN = "<tool_call>"
TOOL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_TRAILING_STOPS = ("<|im_end|>", "<|endoftext|>", "<|observation|>", "<|eot_id|>", "</s>")

_FUNC_RE = re.compile(r"<function=([^>\n]+)>(.*?)</function>", re.S)
_PARAM_RE = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.S)


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_json: str = "{}"  # as the model wrote it (Hermes) or canonical JSON (XML)
    format: Literal["hermes", "qwen3_xml"] = "hermes"

    def to_openai(self) -> dict:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json},
        }


class ParseError(BaseModel):
    kind: ParseErrorKind
    message: str
    offset: int  # character offset in the completion text


class ParsedCompletion(BaseModel):
    reasoning: str | None = None  # None: no <think> block; "" an empty one
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    trailing_text: str = ""  # non-blank text after the last tool call
    errors: list[ParseError] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_message(self) -> dict:
        """An OpenAI-style assistant message (arguments as the JSON text)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            msg["reasoning_content"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [t.to_openai() for t in self.tool_calls]
        return msg


def _strip_once(s: str, prefix: str = "", suffix: str = "") -> str:
    if prefix and s.startswith(prefix):
        s = s[len(prefix) :]
    if suffix and s.endswith(suffix):
        s = s[: -len(suffix)]
    return s


def _parse_hermes(body: str, offset: int, idx: int) -> ToolCall | ParseError:
    text = body.strip()
    try:
        obj = json.loads(text)
    except ValueError as e:
        return ParseError(kind="invalid_json", message=f"tool call {idx}: {e}", offset=offset)
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ParseError(kind="missing_name", message=f"tool call {idx}: no name", offset=offset)
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models double-encode
        raw = args
        try:
            args = json.loads(args)
        except ValueError:
            return ParseError(
                kind="invalid_json",
                message=f"tool call {idx}: arguments are not JSON",
                offset=offset,
            )
    else:
        raw = _raw_arguments(text) or json.dumps(args, ensure_ascii=False)
    if not isinstance(args, dict):
        return ParseError(
            kind="invalid_json",
            message=f"tool call {idx}: arguments are not an object",
            offset=offset,
        )
    return ToolCall(
        id=f"call_{idx}", name=obj["name"], arguments=args, arguments_json=raw, format="hermes"
    )


def _raw_arguments(text: str) -> str | None:
    """The `arguments` value exactly as written in the JSON object `text`."""
    m = re.search(r'"arguments"\s*:\s*', text)
    if not m:
        return None
    try:
        _, end = json.JSONDecoder().raw_decode(text, m.end())
    except ValueError:
        return None
    return text[m.end() : end]


def _xml_value(raw: str) -> Any:
    v = _strip_once(raw, "\n", "\n")
    try:
        return json.loads(v)
    except ValueError:
        return v


def _parse_xml(body: str, offset: int, idx: int) -> ToolCall | ParseError:
    m = _FUNC_RE.search(body)
    if not m:
        return ParseError(
            kind="invalid_xml",
            message=f"tool call {idx}: no <function=...></function>",
            offset=offset,
        )
    name = m.group(1).strip()
    args = {p.group(1).strip(): _xml_value(p.group(2)) for p in _PARAM_RE.finditer(m.group(2))}
    return ToolCall(
        id=f"call_{idx}",
        name=name,
        arguments=args,
        arguments_json=json.dumps(args, ensure_ascii=False),
        format="qwen3_xml",
    )


def parse_completion(text: str) -> ParsedCompletion:
    """Split a completion into reasoning, content and tool calls."""
    out = ParsedCompletion()
    for stop in _TRAILING_STOPS:
        if text.endswith(stop):
            text = text[: -len(stop)]
            break
    rest = text
    base = 0
    close = rest.find(THINK_CLOSE)
    open_ = rest.find(THINK_OPEN)
    if close >= 0:
        head = rest[:close]
        start = head.find(THINK_OPEN)
        reasoning = head[start + len(THINK_OPEN) :] if start >= 0 else head
        out.reasoning = _strip_once(reasoning, "\n", "\n")
        base = close + len(THINK_CLOSE)
        rest = rest[base:]
        rest = _strip_once(rest, "\n\n") if rest.startswith("\n\n") else _strip_once(rest, "\n")
        base = len(text) - len(rest)
    elif open_ >= 0:
        out.reasoning = _strip_once(rest[open_ + len(THINK_OPEN) :], "\n")
        out.errors.append(
            ParseError(kind="unclosed_think", message="<think> is never closed", offset=open_)
        )
        out.content = rest[:open_]
        return out

    first = rest.find(TOOL_OPEN)
    if first < 0:
        out.content = rest
        return out
    out.content = _strip_once(rest[:first], suffix="\n")
    pos = first
    idx = 0
    while True:
        start = rest.find(TOOL_OPEN, pos)
        if start < 0:
            tail = rest[pos:]
            if tail.strip():
                out.trailing_text = tail
            break
        end = rest.find(TOOL_CLOSE, start)
        nxt = rest.find(TOOL_OPEN, start + len(TOOL_OPEN))
        if end < 0 or (0 <= nxt < end):
            out.errors.append(
                ParseError(
                    kind="unclosed_tool_call",
                    message=f"tool call {idx} opened at character {base + start} is never closed",
                    offset=base + start,
                )
            )
            break
        body = rest[start + len(TOOL_OPEN) : end]
        between = rest[pos:start]
        if idx and between.strip():
            out.trailing_text += between
        parser = _parse_xml if body.lstrip().startswith("<function=") else _parse_hermes
        res = parser(body, base + start, idx)
        if isinstance(res, ParseError):
            out.errors.append(res)
        else:
            out.tool_calls.append(res)
        idx += 1
        pos = end + len(TOOL_CLOSE)
    return out
