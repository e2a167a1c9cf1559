"""The tool-call format comes from the chat template: detection, schema-typed XML values,
strict parsing of the template's format, the checkpoint's chat_template.jinja, and the
fix `tito verify` names when a model's own template breaks the prefix property."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.tito.parsing import parse_completion, tool_call_format
from apexrl.tito.template import builtin_template, prefix_fix
from apexrl.tito.tokenizer import bundled_qwen3_dir, load_tokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "excel_read_tab",
            "parameters": {
                "type": "object",
                "properties": {
                    "file_path": {"type": "string"},
                    "tab_index": {"type": "integer"},
                    "cell_range": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "include_formulas": {"type": "boolean"},
                    "pages": {"type": "array", "items": {"type": "integer"}},
                    "code": {"type": "string"},
                },
            },
        },
    }
]


def _xml(**params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function=excel_read_tab>\n{body}</function>\n</tool_call>"


def test_format_is_read_from_the_template():
    stock = load_tokenizer("qwen3").chat_template
    assert tool_call_format(stock) == "hermes"
    assert tool_call_format(builtin_template("qwen3-verbatim")) == "hermes"
    assert tool_call_format(builtin_template("qwen3-xml-verbatim")) == "qwen3_xml"
    assert tool_call_format("{{ messages }}") is None and tool_call_format(None) is None


def test_xml_values_are_typed_by_the_schema_and_kept_as_written():
    text = _xml(
        file_path="/a.xlsx",
        tab_index="2",
        cell_range="null",
        include_formulas="true",
        pages="[1, 3]",
        code="5",
    )
    p = parse_completion(text, tool_format="qwen3_xml", tools=TOOLS)
    assert p.ok
    (c,) = p.tool_calls
    assert c.arguments == {
        "file_path": "/a.xlsx",
        "tab_index": 2,
        "cell_range": None,
        "include_formulas": True,
        "pages": [1, 3],
        "code": "5",  # a string parameter stays text, even when it looks like JSON
    }
    assert c.to_openai()["function"]["arguments"]["pages"] == "[1, 3]"  # as written
    # a value that does not fit its type is passed on as text (the tool reports it)
    (bad,) = parse_completion(_xml(tab_index="two"), tools=TOOLS).tool_calls
    assert bad.arguments == {"tab_index": "two"}


def test_only_the_templates_format_is_parsed():
    hermes = '<tool_call>\n{"name": "excel_read_tab", "arguments": {"tab_index": 0}}\n</tool_call>'
    assert parse_completion(hermes).ok and parse_completion(_xml(tab_index="0")).ok  # either
    wrong = parse_completion(hermes, tool_format="qwen3_xml")
    assert not wrong.tool_calls and wrong.errors[0].kind == "invalid_xml"
    wrong = parse_completion(_xml(tab_index="0"), tool_format="hermes")
    assert not wrong.tool_calls and wrong.errors[0].kind == "invalid_json"


def test_checkpoint_chat_template_jinja_wins(tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(bundled_qwen3_dir(), d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert cfg.get("chat_template")  # the config carries the stock template...
    (d / "chat_template.jinja").write_text(builtin_template("qwen3-xml-verbatim"))
    tok = load_tokenizer(str(d))  # ...but the .jinja file is the model's template
    assert tool_call_format(tok.chat_template) == "qwen3_xml"


def test_verify_names_the_fix_for_the_models_template(tmp_path):
    stock = load_tokenizer("qwen3").chat_template
    assert prefix_fix("tokenizer", stock) == "qwen3-verbatim"
    assert prefix_fix("qwen3-verbatim", builtin_template("qwen3-verbatim")) is None
    # an XML-tool-call template that also prunes earlier reasoning (as stock Qwen3 does)
    xml_pruning = stock + "{#- tool calls: <function=NAME><parameter=ARG> -#}"
    f = tmp_path / "model_template.jinja"
    f.write_text(xml_pruning)
    assert prefix_fix(str(f), xml_pruning) == "qwen3-xml-verbatim"
    r = CliRunner().invoke(
        app, ["tito", "verify", "-t", "qwen3", "--mode", "template", "--chat-template", str(f)]
    )
    assert r.exit_code == 1
    assert "pass --chat-template qwen3-xml-verbatim" in r.stderr
    findings = [json.loads(x) for x in r.stdout.splitlines()]
    assert any("qwen3-xml-verbatim" in x["message"] for x in findings if not x["ok"])
    ok = CliRunner().invoke(
        app,
        [
            "tito",
            "verify",
            "-t",
            "qwen3",
            "--mode",
            "template",
            "--chat-template",
            "qwen3-xml-verbatim",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "--chat-template" not in ok.stderr
