"""Chat-template rendering the way Hugging Face does it.

A sandboxed jinja2 environment with `trim_blocks`/`lstrip_blocks`, the
`loopcontrols` extension, a `tojson` filter that does not HTML-escape, and the
globals templates expect (`raise_exception`, `strftime_now`, `namespace`).
Templates are rendered with `messages`, `tools`, `add_generation_prompt` and
the tokenizer's special tokens, plus any extra keyword (e.g. `enable_thinking`).
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from apexrl.errors import UsageError

# Built-in templates shipped with apexrl (apexrl/tito/templates/<name>.jinja).
BUILTIN_TEMPLATES = ("qwen3-verbatim", "qwen3-xml-verbatim")


def _env():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


@lru_cache(maxsize=32)
def compile_template(source: str):
    return _env().from_string(source)


def _plain(value: Any) -> Any:
    """Pydantic models / tuples -> plain dicts and lists the template can read."""
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(exclude_none=True))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def render(
    source: str,
    messages: list[dict],
    *,
    tools: list[dict] | None = None,
    add_generation_prompt: bool = False,
    special_tokens: dict[str, str | None] | None = None,
    **kwargs: Any,
) -> str:
    """Render `messages` with the template `source` (as transformers' apply_chat_template)."""
    tpl = compile_template(source)
    msgs = _plain(messages)
    for m in msgs:
        # HF aliases older reasoning field names to `reasoning_content`.
        if m.get("reasoning_content") is None:
            for key in ("thinking", "reasoning"):
                if m.get(key) is not None:
                    m["reasoning_content"] = m[key]
                    break
    ctx = dict(special_tokens or {})
    ctx.update(kwargs)
    return tpl.render(
        messages=msgs,
        tools=_plain(tools) if tools else None,
        documents=None,
        add_generation_prompt=add_generation_prompt,
        **ctx,
    )


def builtin_template(name: str) -> str:
    ref = resources.files("apexrl.tito").joinpath("templates", f"{name}.jinja")
    return ref.read_text(encoding="utf-8")


def resolve_template(spec: str | None, default: str | None) -> tuple[str, str]:
    """`--chat-template` value -> (name, source). None means the tokenizer's own."""
    if spec is None or spec in ("", "default", "tokenizer"):
        if not default:
            raise UsageError(
                "the tokenizer has no chat template",
                hint="pass --chat-template FILE or a built-in name: "
                + ", ".join(BUILTIN_TEMPLATES),
            )
        return "tokenizer", default
    if spec in BUILTIN_TEMPLATES:
        return spec, builtin_template(spec)
    path = Path(spec)
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":  # a tokenizer_config.json
            try:
                text = json.loads(text)["chat_template"]
            except (KeyError, ValueError) as e:
                raise UsageError(f"{spec}: no chat_template in this JSON file") from e
            if isinstance(text, list):  # named templates: take "default"
                text = next((t["template"] for t in text if t.get("name") == "default"), None)
                if text is None:
                    raise UsageError(f"{spec}: no default chat template")
        return str(path), text
    raise UsageError(
        f"chat template {spec!r} is neither a file nor a built-in name",
        hint="built-in names: " + ", ".join(BUILTIN_TEMPLATES),
    )


def prefix_fix(template_name: str, source: str) -> str | None:
    """The `--chat-template` to pass when `source` (a model's own template) breaks the
    prefix property: the built-in verbatim template with the same tool-call format, for
    ChatML templates; None when no built-in fits (or `source` is already a built-in)."""
    from apexrl.tito.parsing import tool_call_format

    if template_name in BUILTIN_TEMPLATES or "<|im_start|>" not in source:
        return None
    return "qwen3-xml-verbatim" if tool_call_format(source) == "qwen3_xml" else "qwen3-verbatim"
