"""Template mode: the prefix property over the built-in suite, on the real Qwen3 tokenizer."""

from __future__ import annotations

import json

import orjson
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.tito.suite import builtin_cases
from apexrl.tito.verify import verify_template

runner = CliRunner()


def test_render_matches_transformers(tok, qwen3_dir, stock, verbatim):
    """Our jinja rendering equals transformers' apply_chat_template on every suite case."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast.from_pretrained(str(qwen3_dir))
    for case in builtin_cases():
        for gen in (False, True):
            for src in (stock, verbatim):
                ours = tok.apply_chat_template(
                    case.messages,
                    tools=case.tools,
                    add_generation_prompt=gen,
                    chat_template=src,
                    **case.kwargs,
                )
                theirs = hf.apply_chat_template(
                    case.messages,
                    tools=case.tools,
                    add_generation_prompt=gen,
                    chat_template=src,
                    tokenize=False,
                    **case.kwargs,
                )
                assert ours == theirs, case.name
                assert tok.encode(ours) == hf(ours, add_special_tokens=False)["input_ids"]


def test_stock_qwen3_template_breaks_on_reasoning(tok, stock):
    found = {f.case: f for f in verify_template(tok, stock, builtin_cases())}
    chain = found["long_multi_turn_chain"]
    assert not chain.ok and chain.causes == ["reasoning_pruned"]
    d = chain.first_divergence
    assert (
        d is not None and "<think>" in d.expected and "<think>" not in d.actual.split("⟦")[1][:10]
    )
    assert "<|im_start|>" in d.expected  # special tokens visible
    assert found["thinking_on_no_tools"].causes == ["reasoning_pruned"]
    assert found["thinking_off"].causes == ["reasoning_pruned"]
    assert found["single_tool_call"].ok  # one user turn: reasoning is kept


def test_verbatim_template_passes_everything(tok, verbatim):
    findings = verify_template(tok, verbatim, builtin_cases())
    assert [f.case for f in findings if not f.ok] == []
    assert len(findings) >= 8


def test_cli_template_stock_exits_1_with_ndjson():
    r = runner.invoke(app, ["tito", "verify", "--tokenizer", "qwen3", "--mode", "template"])
    assert r.exit_code == 1, r.output
    lines = [orjson.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == len(builtin_cases())
    bad = [x for x in lines if not x["ok"]]
    assert bad and all(x["causes"] == ["reasoning_pruned"] for x in bad)
    assert all(x["first_divergence"]["index"] > 0 for x in bad)


def test_cli_template_verbatim_builtin_and_file(tmp_path):
    r = runner.invoke(
        app, ["tito", "verify", "-t", "qwen3", "--chat-template", "qwen3-verbatim", "--json"]
    )
    assert r.exit_code == 0, r.output
    from apexrl.tito.template import builtin_template

    f = tmp_path / "t.jinja"
    f.write_text(builtin_template("qwen3-verbatim"))
    r = runner.invoke(app, ["tito", "verify", "-t", "qwen3", "--chat-template", str(f)])
    assert r.exit_code == 0, r.output


def test_cli_allow_and_usage_errors(qwen3_dir):
    r = runner.invoke(app, ["tito", "verify", "-t", str(qwen3_dir), "--allow", "reasoning_pruned"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["tito", "verify", "-t", "qwen3", "--allow", "bogus"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["tito", "verify", "-t", "qwen3", "--chat-template", "nope"])
    assert r.exit_code == 2 and "built-in names" in r.output
    r = runner.invoke(app, ["tito", "verify", "-t", "./no/such/dir"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["tito", "verify", "-t", "qwen3", "--mode", "replay"])
    assert r.exit_code == 2 and "--trajectories" in r.output
    r = runner.invoke(app, ["tito", "verify", "-t", "qwen3", "--mode", "live"])
    assert r.exit_code == 2 and "--endpoint" in r.output


def test_tokenizer_config_as_template_source(qwen3_dir):
    r = runner.invoke(
        app,
        [
            "tito",
            "verify",
            "-t",
            str(qwen3_dir / "tokenizer.json"),
            "--chat-template",
            str(qwen3_dir / "tokenizer_config.json"),
            "--json",
        ],
    )
    assert r.exit_code == 1  # the stock template, read from the config file
    assert json.loads(r.stdout.splitlines()[0])["mode"] == "template"


def test_cli_no_thinking():
    args = ["tito", "verify", "-t", "qwen3", "--no-thinking", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1  # stock Qwen3 drops the empty think block of earlier turns
    r = runner.invoke(app, [*args, "--chat-template", "qwen3-verbatim"])
    assert r.exit_code == 0, r.output
