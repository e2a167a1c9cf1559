"""The judge cache and the caching pass-through (issue 42, findings 2 and 5).

The pass-through (`CachingProxy`, in front of the judge for archipelago's runner) listens
on host loopback and adds the judge's key: it answers only a client holding its per-run
secret, and keys its cache on the whole request body and the server it forwards to, so
a request with other parameters cannot plant a verdict for the real one. apexrl's own
judge keys its cache on the model, the server and the sampling settings as well as the
prompt. A real HTTP judge (the scripted engine) answers what is not cached.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from apexrl.grading.judge import Judge, JudgeSettings
from apexrl.grading.judge_cache import CachingProxy, JudgeCache

TRUE = json.dumps({"is_criteria_true": True, "rationale": "planted"})
FALSE = json.dumps({"is_criteria_true": False, "rationale": "the real judge"})
SCHEMA = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {}}}
REQUEST = {
    "model": "judge",
    "messages": [{"role": "user", "content": "Is the criterion met? MK-CACHE-1"}],
    "response_format": SCHEMA,
}


def engine(answer):
    from tests.scripted_engine import ScriptedEngine

    return ScriptedEngine([], chat=answer).start()


@pytest.fixture
def judge_server():
    eng = engine(lambda body: FALSE)
    yield eng
    eng.stop()


def post(proxy: CachingProxy, body: dict, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(f"{proxy.url}/chat/completions", json=body, headers=headers, timeout=30)


def verdict(r: httpx.Response) -> dict:
    assert r.status_code == 200, r.text
    return json.loads(r.json()["choices"][0]["message"]["content"])


def secret(proxy: CachingProxy) -> str:
    return getattr(proxy, "token", "none")


def test_the_proxy_answers_only_its_runs_secret(tmp_path, judge_server):
    with CachingProxy(judge_server.url + "/v1", "openai/judge", JudgeCache(tmp_path)) as proxy:
        for token in (None, "none", "sk-guess", secret(proxy)[:-1]):
            r = post(proxy, REQUEST, token)
            assert r.status_code == 401, (token, r.text)
        assert judge_server.chat_requests == [] and proxy.calls == 0
        r = post(proxy, REQUEST, secret(proxy))
        assert verdict(r)["rationale"] == "the real judge"
        assert len(judge_server.chat_requests) == 1
    with CachingProxy(judge_server.url + "/v1", "openai/judge", None) as other:
        assert secret(other) != secret(proxy)  # one secret per run


def test_a_request_with_other_parameters_cannot_plant_a_verdict(tmp_path):
    """A request with the runner's messages and schema plus another parameter (one the
    judge answers differently: here any temperature) must not answer the runner's own."""
    judge = engine(lambda body: TRUE if "temperature" in body else FALSE)
    cache = JudgeCache(tmp_path)
    try:
        with CachingProxy(judge.url + "/v1", "openai/judge", cache) as proxy:
            planted = {**REQUEST, "temperature": 1.9}
            assert verdict(post(proxy, planted, secret(proxy)))["rationale"] == "planted"
            r = post(proxy, REQUEST, secret(proxy))
            assert verdict(r)["rationale"] == "the real judge"
            assert len(judge.chat_requests) == 2
            # asked again: now from the cache, no judge call
            assert verdict(post(proxy, REQUEST, secret(proxy)))["rationale"] == "the real judge"
            assert len(judge.chat_requests) == 2
    finally:
        judge.stop()


def test_the_proxy_cache_is_per_server(tmp_path, judge_server):
    cache = JudgeCache(tmp_path)
    with CachingProxy(judge_server.url + "/v1", "openai/judge", cache) as proxy:
        assert verdict(post(proxy, REQUEST, secret(proxy)))["rationale"] == "the real judge"
    second = engine(lambda body: TRUE)
    try:
        with CachingProxy(second.url + "/v1", "openai/judge", cache) as proxy:
            assert verdict(post(proxy, REQUEST, secret(proxy)))["rationale"] == "planted"
        assert len(second.chat_requests) == 1  # asked, not answered from the other's cache
    finally:
        second.stop()


def test_apexrl_judge_cache_is_per_server_and_sampling(tmp_path):
    """A verdict cached for one server (or with no temperature sent) is not reused for
    another server (or a temperature): each is asked."""
    sure = engine(lambda body: TRUE if "temperature" not in body else FALSE)
    other = engine(lambda body: FALSE)
    cache = JudgeCache(tmp_path)

    def ask(api_base: str, **kw):
        s = JudgeSettings(model="openai/judge", api_base=api_base, cache=cache, **kw)
        return asyncio.run(Judge(s).judge("task", "criterion MK-2", "answer", ""))

    try:
        first = ask(sure.url + "/v1")
        assert (first.met, first.attempts) == (True, 1)
        again = ask(sure.url + "/v1")
        assert (again.met, again.attempts) == (True, 0)  # from the cache
        elsewhere = ask(other.url + "/v1")
        assert (elsewhere.met, elsewhere.attempts) == (False, 1), elsewhere
        cold = ask(sure.url + "/v1", temperature=0.0)
        assert (cold.met, cold.attempts) == (False, 1), cold
        assert len(sure.chat_requests) == 2 and len(other.chat_requests) == 1
    finally:
        sure.stop()
        other.stop()
