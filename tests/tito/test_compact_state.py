"""Compact token storage (arrays) writes the same records as the list-based state did."""

from __future__ import annotations

import json
import sys
from array import array

import pytest

from apexrl.tito.session import TitoSession
from apexrl.tito.state import TokenState, TokenStateError
from apexrl.tito.trajectory import TitoTrajectory, TitoTurn
from tests.scripted_engine import tool_call_text

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def _drive(sess: TitoSession, tok, steps: int = 4):
    """A conversation; returns what a list-based session would have recorded."""
    prompt = sess.start(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Sum it."}],
        tools=TOOLS,
    )
    turns: list[TitoTurn] = []
    stop = tok.token_to_id("<|im_end|>")
    for k in range(steps):
        text = tool_call_text("read", {"path": f"/f{k}.txt"}, think=f"step {k}")
        ids = [*tok.encode(text), stop]
        lps = [-(i % 5) / 3 - 1e-9 * k for i in range(len(ids))]  # full double precision
        sess.add_completion(ids, lps, finish_reason="stop")
        turns.append(
            TitoTurn(
                kind="sampled",
                token_ids=ids,
                logprobs=lps,
                message_index=len(sess.messages) - 1,
                finish_reason="stop",
            )
        )
        msgs = [{"role": "tool", "tool_call_id": f"c{k}", "content": f"value {k * 1234567}"}]
        if k % 2:  # observations tokenized elsewhere (the agent does it off the event loop)
            obs = sess.add_observations(msgs, ids=sess.tokenize_observations(msgs))
        else:
            obs = sess.add_observations(msgs)
        turns.append(
            TitoTurn(
                kind="observation",
                token_ids=obs,
                message_index=len(sess.messages) - 1,
                n_messages=1,
            )
        )
    final = [*tok.encode("The sum is 42."), stop]
    sess.add_completion(final, [-0.5] * len(final), finish_reason="stop")
    turns.append(
        TitoTurn(
            kind="sampled",
            token_ids=final,
            logprobs=[-0.5] * len(final),
            message_index=len(sess.messages) - 1,
            finish_reason="stop",
        )
    )
    return prompt, turns


def test_session_records_match_the_list_based_records(tok, stock):
    sess = TitoSession(tok, chat_template=stock, template_name="stock", model="m")
    prompt, turns = _drive(sess, tok)
    got = sess.to_trajectory("t1", status="complete", mask=sess.state.mask.tolist())
    ids = list(prompt) + [i for t in turns for i in t.token_ids]
    mask = [0] * len(prompt) + [
        m for t in turns for m in ([1 if t.kind == "sampled" else 0] * len(t.token_ids))
    ]
    want = TitoTrajectory(
        trajectory_id="t1",
        model="m",
        tokenizer=tok.name,
        chat_template="stock",
        template_kwargs={},
        tools=TOOLS,
        messages=sess.messages,
        prompt_ids=list(prompt),
        n_prompt_messages=2,
        turns=turns,
        extra={"status": "complete", "mask": mask},
    )
    assert got.model_dump_json() == want.model_dump_json()
    assert json.loads(got.model_dump_json())["turns"][0]["logprobs"] == turns[0].logprobs
    # the state and the record agree: ids, mask, logprobs, and the trainer views
    st = sess.state
    assert st.ids.tolist() == ids == got.ids
    assert st.mask.tolist() == mask
    back = got.to_state()
    assert back.ids == st.ids and back.mask == st.mask and back.logprobs == st.logprobs
    assert st.response_ids == ids[len(prompt) :] and isinstance(st.response_ids, list)
    assert st.prompt_ids == list(prompt)
    st.check_segments()


def test_state_is_compact():
    s = TokenState()
    n = 100_000
    s.set_prompt(list(range(1000, 1000 + n)))
    s.append_sampled(list(range(n)), [-0.1] * n)
    per_token = (sys.getsizeof(s.ids) + sys.getsizeof(s.mask) + sys.getsizeof(s.logprobs)) / len(s)
    assert per_token < 16  # 4 + 1 + 8 bytes (lists: ~50 and more)
    assert isinstance(s.ids, array) and s.ids.typecode == "i"


def test_state_accepts_any_int_sequence_and_refuses_bad_ids():
    s = TokenState(ids=[1, 2], mask=[0, 0], logprobs=[0.0, 0.0])
    assert s.ids.tolist() == [1, 2]
    s2 = TokenState()
    s2.set_prompt(array("i", [5, 6]))
    s2.append_observation((True, 7))  # ints of any kind (bool is an int)
    assert s2.ids.tolist() == [5, 6, 1, 7]
    with pytest.raises(TokenStateError, match="negative"):
        s2.append_observation([-1])
    with pytest.raises(TokenStateError, match="out of range"):
        s2.append_observation([2**40])
    assert len(s2) == 4


def test_async_tokenization_gives_the_same_ids(tok, stock):
    import asyncio

    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."}]
    a = TitoSession(tok, chat_template=stock)
    b = TitoSession(tok, chat_template=stock)
    assert a.start(msgs, tools=TOOLS) == asyncio.run(b.astart(msgs, tools=TOOLS))
    stop = tok.token_to_id("<|im_end|>")
    for s, cut in ((a, False), (b, False), (a, True)):
        done = [*tok.encode("ok"), stop]
        ids = done[:-1] if cut else done  # a turn cut at max_tokens gets its stop token back
        s.add_completion(ids, [0.0] * len(ids))
        obs = [{"role": "tool", "tool_call_id": "c", "content": "result " * 50}]
        assert asyncio.run(s.atokenize_observations(obs)) == s.tokenize_observations(obs)
        s.add_observations(obs, ids=asyncio.run(s.atokenize_observations(obs)))
    assert a.state.ids[: len(b.state)] == b.state.ids


def test_trajectory_json_is_the_pydantic_record_byte_for_byte(tok, stock):
    """session.trajectory_json (orjson from the arrays) == to_trajectory().model_dump_json(),
    on awkward content: control and non-ASCII characters, lone-ish escapes, every float
    shape a logprob can take (tiny, huge, -0.0, nan, inf), nested tool schemas."""
    import math
    import random

    sess = TitoSession(tok, chat_template=stock, template_name="stock", model="m")
    _drive(sess, tok)
    weird = 'a\u2028b\x00\x1f\x7f"\\/é😀 <>&\ud7ff\t\r\n'
    msgs = [{"role": "tool", "tool_call_id": "c\x01", "content": weird * 50}]
    sess.add_observations(msgs)
    rng = random.Random(3)
    lps = [-0.0, 0.0, 1e-5, -1.5e-7, -1e20, float("nan"), -float("inf"), 5e-324, -2 / 3]
    lps += [math.log(rng.random()) for _ in range(2000)]
    lps += [-rng.random() * 10 ** rng.randint(-12, 3) for _ in range(2000)]
    ids = [rng.randrange(150_000) for _ in lps]
    sess.add_completion(ids, lps, finish_reason="length")
    sess.tools = [*TOOLS, {"type": "function", "function": {"name": "é", "x": [1, 2.5, None]}}]
    extra = {"status": "complete", "mask": sess.state.mask.tolist(), "n": {"a": [True, None]}}
    want = sess.to_trajectory("t\u00e9", **extra).model_dump_json().encode()
    assert sess.trajectory_json("t\u00e9", **extra) == want
    assert sess.trajectory_json("t") == sess.to_trajectory("t").model_dump_json().encode()
    # what orjson would write differently (or not at all) goes the pydantic way
    big = {"status": "error", "huge": 2**70, "keys": {1: "int key"}}
    assert (
        sess.trajectory_json("t", **big)
        == sess.to_trajectory("t", **big).model_dump_json().encode()
    )
    # and it reads back as the same trajectory (nan is written as null, as pydantic does:
    # a record with nan logprobs does not read back, so this one has none)
    plain = TitoSession(tok, chat_template=stock, template_name="stock", model="m")
    _drive(plain, tok)
    back = TitoTrajectory.model_validate_json(plain.trajectory_json("t", status="complete"))
    assert back.ids == plain.state.ids.tolist() and back.turns == plain.turns


def test_the_off_loop_encode_gives_the_same_ids(tok):
    """encode_off_loop (tokenizers' batch entry: the GIL is released) == encode, special
    token strings, tool-call markup, whitespace runs and non-ASCII text included."""
    texts = [
        "",
        "plain words",
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
        tool_call_text("read", {"path": "/a b/é.txt"}, think="x  \t y\n\n\nz"),
        "数字 1,234.5% — ünïcode 😀" * 50,
    ]
    for t in texts:
        assert tok.encode_off_loop(t) == tok.encode(t)
