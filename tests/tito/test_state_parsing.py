"""Token state invariants and completion parsing."""

from __future__ import annotations

import pytest

from apexrl.tito.parsing import parse_completion
from apexrl.tito.state import TokenState, TokenStateError


def test_token_state_alignment_and_views():
    s = TokenState()
    with pytest.raises(TokenStateError):
        s.append_sampled([1], [0.0])
    s.set_prompt([1, 2, 3])
    s.append_sampled([4, 5], [-0.1, -0.2])
    s.append_observation([6])
    s.append_sampled([7], [-0.3])
    assert s.ids.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert s.mask.tolist() == [0, 0, 0, 1, 1, 0, 1]
    assert s.response_ids == [4, 5, 6, 7] and s.response_mask == [1, 1, 0, 1]
    assert s.response_logprobs == [-0.1, -0.2, 0.0, -0.3]
    assert s.sampled_positions() == [3, 4, 6]
    with pytest.raises(TokenStateError):
        s.append_sampled([8, 9], [-0.1])
    with pytest.raises(TokenStateError):
        s.append_sampled([8], None)
    with pytest.raises(TokenStateError):
        s.set_prompt([1])
    assert len(s) == 7  # failed appends left nothing behind
    s.mask.append(1)
    with pytest.raises(TokenStateError):
        s.check()


def test_parse_hermes_with_thinking_keeps_raw_arguments():
    text = (
        "<think>\nI need the file.\n</think>\n\nLet me look.\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path":"a.txt",  "n": 2}}\n</tool_call>\n'
        '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call><|im_end|>'
    )
    p = parse_completion(text)
    assert p.ok and p.reasoning == "I need the file." and p.content == "Let me look."
    assert [c.name for c in p.tool_calls] == ["read_file", "search"]
    assert p.tool_calls[0].arguments == {"path": "a.txt", "n": 2}
    assert p.tool_calls[0].arguments_json == '{"path":"a.txt",  "n": 2}'
    msg = p.to_message()
    assert msg["tool_calls"][1]["function"]["arguments"] == '{"query": "x"}'


def test_parse_qwen3_xml_tool_call():
    text = (
        "<think>\n\n</think>\n\n<tool_call>\n<function=sheets_read>\n<parameter=path>\nq3.xlsx\n"
        "</parameter>\n<parameter=rows>\n[1, 2]\n</parameter>\n</function>\n</tool_call>"
    )
    p = parse_completion(text)
    assert p.ok and p.reasoning == "" and p.content == ""
    c = p.tool_calls[0]
    assert c.format == "qwen3_xml" and c.name == "sheets_read"
    assert c.arguments == {"path": "q3.xlsx", "rows": [1, 2]}


def test_unclosed_tool_call_is_an_error_not_a_guess():
    p = parse_completion('ok\n<tool_call>\n{"name": "search", "arguments": {"query": "x"}}')
    assert not p.ok and p.errors[0].kind == "unclosed_tool_call" and p.tool_calls == []
    p = parse_completion(
        '<tool_call>\n{"name": "a", "arguments": {}}\n<tool_call>\n{"name": "b", "arguments": {}}'
        "\n</tool_call>"
    )
    assert p.errors[0].kind == "unclosed_tool_call"


def test_bad_json_and_unclosed_think():
    p = parse_completion('<tool_call>\n{"name": "a", "arguments": {oops}\n</tool_call>')
    assert p.errors[0].kind == "invalid_json"
    p = parse_completion('<tool_call>\n{"arguments": {}}\n</tool_call>')
    assert p.errors[0].kind == "missing_name"
    p = parse_completion("<think>\nstill thinking")
    assert p.errors[0].kind == "unclosed_think" and p.reasoning == "still thinking"
    p = parse_completion("plain answer")
    assert p.ok and p.reasoning is None and p.content == "plain answer"
