"""The local engine's OpenAI /v1/chat/completions (what a served judge answers on)."""

from __future__ import annotations

import httpx
import pytest

from apexrl.engine.cpu import EngineServer, LocalEngine
from tests.grading.chain_model import make_chain_checkpoint

REPLY = '{"rationale":"Met.","is_criteria_true":true}'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = make_chain_checkpoint(tmp_path_factory.mktemp("chat") / "m", REPLY)
    with EngineServer(LocalEngine(d, served_model_name="verdict", max_model_len=4096)) as srv:
        yield srv


def _post(srv, body, path="/v1/chat/completions"):
    return httpx.post(srv.url + path, json=body, timeout=60)


def test_chat_renders_the_template_and_answers(server):
    msgs = [
        {"role": "system", "content": "You grade."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Is it "}, {"type": "text", "text": "met?"}],
        },
    ]
    r = _post(server, {"model": "verdict", "messages": msgs, "temperature": 0, "max_tokens": 64})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == "verdict"
    (choice,) = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": REPLY}
    assert choice["finish_reason"] == "stop"  # <|im_end|>, not shown in the content
    assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 5
    r = _post(server, {"messages": msgs, "temperature": 0, "max_tokens": 3})
    assert r.json()["choices"][0]["finish_reason"] == "length"
    r = _post(server, {"messages": msgs, "temperature": 0, "max_tokens": 64, "stop": ["Met"]})
    assert r.json()["choices"][0]["message"]["content"] == '{"rationale":"'


def test_chat_through_litellm(server):
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    resp = litellm.completion(
        model="openai/verdict",
        api_base=server.url + "/v1",
        api_key="none",
        messages=[{"role": "user", "content": "grade this"}],
        temperature=0,
        max_tokens=64,
    )
    assert resp.choices[0].message.content == REPLY


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"model": "other", "messages": [{"role": "user", "content": "x"}]}, 404, "does not exist"),
        ({"messages": []}, 400, "non-empty list"),
        ({"messages": [{"content": "x"}]}, 400, "with a role"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "text"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": True}, 400, "stream"),
        (
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5000},
            400,
            "context length",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}, 400, "positive"),
    ],
)
def test_chat_bad_requests(server, body, status, needle):
    r = _post(server, body)
    assert r.status_code == status and needle in r.json()["error"]["message"], r.text
