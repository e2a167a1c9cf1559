"""Parse raw completion text: `<think>` reasoning and tool calls.

Two tool-call formats inside `<tool_call>...</tool_call>`:
- Hermes JSON (Qwen3, Qwen2.5): `{"name": "f", "arguments": {...}}`
- Qwen3 XML (Qwen3-Coder, Qwen3.5/3.6):
  `<function=f>\\n<parameter=p>\\nvalue\\n</parameter>\\n</function>`
A `<tool_call>` that is never closed is a parse error, never a guess.

Which format a model writes is the one its chat template teaches: `tool_call_format`
reads it from the template (`<function=` in the template: XML, else Hermes JSON), and
`parse_completion(text, tool_format=...)` then parses only that format, the way vLLM's
`qwen3_xml` / `hermes` parsers do. XML parameter values are typed from the tool's
JSON schema (strings stay text; numbers, booleans, arrays and objects are decoded),
and the raw text of each value is kept so the parsed message renders back verbatim.

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
    raw_arguments: dict[str, str] | None = None  # XML: each value's text as written

    def to_openai(self) -> dict:
        """OpenAI-style; XML calls carry the values as written (a dict of strings), which is
        what an XML chat template renders back verbatim."""
        args: Any = self.raw_arguments if self.format == "qwen3_xml" else self.arguments_json
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": args},
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


ToolFormat = Literal["hermes", "qwen3_xml"]


def tool_call_format(template: str | None) -> ToolFormat | None:
    """The tool-call format a chat template teaches: qwen3_xml (Qwen3.5/3.6, Qwen3-Coder:
    `<function=name><parameter=p>`), hermes (Qwen3, Qwen2.5: JSON in `<tool_call>`), or
    None when the template shows neither."""
    if not template:
        return None
    if "<function=" in template:
        return "qwen3_xml"
    if "<tool_call>" in template:
        return "hermes"
    return None


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    t = schema.get("type")
    out = set(t) if isinstance(t, list) else ({t} if isinstance(t, str) else set())
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or []:
            out |= _types(sub)
    if not out and ("properties" in schema):
        out.add("object")
    return out


def _xml_value(raw: str, schema: Any = None) -> Any:
    """A parameter's text typed as vLLM's qwen3_xml parser does: by the tool's schema
    (string stays text); without a schema, JSON when it decodes to a non-string."""
    v = _strip_once(raw, "\n", "\n")
    types = _types(schema) - {"null"}
    if v == "null" and "null" in _types(schema):
        return None
    if "string" in types and not (types - {"string"}):
        return v
    try:
        dec = json.loads(v)
    except ValueError:
        return v
    if not types:
        return v if isinstance(dec, str) else dec
    kind = {bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}
    got = "null" if dec is None else kind.get(type(dec), "string")
    if got in types or (got == "integer" and "number" in types):
        return dec
    return v


def _tool_schemas(tools: list[dict] | None) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for t in tools or []:
        fn = t.get("function", t) if isinstance(t, dict) else {}
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters") or fn.get("input_schema") or {}
            out[fn["name"]] = (params.get("properties") or {}) if isinstance(params, dict) else {}
    return out


def _parse_xml(
    body: str, offset: int, idx: int, props: dict[str, dict] | None = None
) -> ToolCall | ParseError:
    m = _FUNC_RE.search(body)
    if not m:
        return ParseError(
            kind="invalid_xml",
            message=f"tool call {idx}: no <function=...></function>",
            offset=offset,
        )
    name = m.group(1).strip()
    schema = (props or {}).get(name, {})
    raw = {p.group(1).strip(): p.group(2) for p in _PARAM_RE.finditer(m.group(2))}
    args = {k: _xml_value(v, schema.get(k)) for k, v in raw.items()}
    return ToolCall(
        id=f"call_{idx}",
        name=name,
        arguments=args,
        arguments_json=json.dumps(args, ensure_ascii=False),
        format="qwen3_xml",
        raw_arguments={k: _strip_once(v, "\n", "\n") for k, v in raw.items()},
    )


def parse_completion(
    text: str, *, tool_format: ToolFormat | None = None, tools: list[dict] | None = None
) -> ParsedCompletion:
    """Split a completion into reasoning, content and tool calls.

    tool_format: parse tool calls only in this format (from `tool_call_format(template)`);
    None accepts either. tools: the tool list the prompt was rendered with (types XML
    parameter values by their schemas)."""
    props = _tool_schemas(tools)
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
        is_xml = body.lstrip().startswith("<function=")
        if tool_format == "qwen3_xml" and not is_xml:
            res: ToolCall | ParseError = ParseError(
                kind="invalid_xml",
                message=f"tool call {idx}: expected <function=NAME><parameter=ARG>...</parameter>"
                "</function> (this model's tool-call format), got something else",
                offset=base + start,
            )
        elif tool_format == "hermes" and is_xml:
            res = ParseError(
                kind="invalid_json",
                message=f'tool call {idx}: expected JSON {{"name": ..., "arguments": {{...}}}} '
                "(this model's tool-call format), got XML",
                offset=base + start,
            )
        elif is_xml:
            res = _parse_xml(body, base + start, idx, props)
        else:
            res = _parse_hermes(body, base + start, idx)
        if isinstance(res, ParseError):
            out.errors.append(res)
        else:
            out.tool_calls.append(res)
        idx += 1
        pos = end + len(TOOL_CLOSE)
    return out
