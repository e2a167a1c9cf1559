"""Issue 20: the settings of an event loop that carries many trials (tokenize threads,
their priority, the GC) and the loop-side costs cut for it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from array import array

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, **env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


POOL = """
import asyncio, json, os, threading
from apexrl.tito import workers
def probe():
    tid = threading.get_native_id()
    return threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, tid)
async def main():
    return await asyncio.gather(*(workers.off_loop(probe) for _ in range(8)))
res = asyncio.run(main())
print(json.dumps({"names": sorted({n for n, _ in res}), "nice": sorted({p for _, p in res}),
                  "loop_nice": os.getpriority(os.PRIO_PROCESS, threading.get_native_id()),
                  "threads": workers.tokenize_pool()._max_workers}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness: Linux")
def test_tokenize_threads_are_bounded_and_run_below_the_loop():
    got = _run(POOL, APEXRL_ROLLOUT_TOKENIZE_THREADS="2", APEXRL_ROLLOUT_TOKENIZE_NICE="7")
    assert got["threads"] == 2
    assert all(n.startswith("apexrl-tokenize") for n in got["names"])
    assert got["nice"] == [min(19, got["loop_nice"] + 7)]  # the loop's own is untouched
    same = _run(POOL, APEXRL_ROLLOUT_TOKENIZE_NICE="0")
    assert same["nice"] == [same["loop_nice"]]
    assert 1 <= same["threads"] <= 4  # auto: one per core but one


GC = """
import gc, json
from apexrl.agent import runtime
before, frozen = gc.get_threshold(), gc.get_freeze_count()
first, again = runtime.tune_gc_once(), runtime.tune_gc_once()
print(json.dumps({"before": before, "after": gc.get_threshold(), "first": first,
                  "again": again, "frozen": gc.get_freeze_count() - frozen}))
"""


def test_loop_gc_tuned_by_default_once_per_process_and_default_leaves_python_alone():
    tuned = _run(GC)
    assert tuned["first"] is True and tuned["again"] is False
    assert tuple(tuned["after"]) == (10_000, 10, 100) and tuned["frozen"] > 0
    plain = _run(GC, APEXRL_ROLLOUT_GC="default")
    assert plain["first"] is False and plain["after"] == plain["before"]
    assert plain["frozen"] == 0


def test_observations_tokenize_in_the_tokenize_threads_to_the_same_ids():
    from apexrl.tito.session import TitoSession
    from apexrl.tito.tokenizer import load_tokenizer

    tok = load_tokenizer("qwen3")
    msgs = [{"role": "tool", "tool_call_id": "c1", "content": "revenue 1,234 margin " * 300}]
    names = []
    enc = tok.encode_off_loop

    def spy(text: str) -> list[int]:
        names.append(threading.current_thread().name)
        return enc(text)

    a = TitoSession(tok)
    a.start([{"role": "user", "content": "hi"}])
    b = TitoSession(tok)
    b.start([{"role": "user", "content": "hi"}])
    tok.encode_off_loop = spy  # type: ignore[method-assign]
    try:
        ids = asyncio.run(b.atokenize_observations(msgs))
    finally:
        del tok.encode_off_loop
    assert ids == a.tokenize_observations(msgs)
    assert names and all(n.startswith("apexrl-tokenize") for n in names)


def test_the_sign_scan_finds_every_negative_id():
    from apexrl.tito.state import TokenStateError, _has_negative, int_array

    for ids, neg in (
        ([], False),
        ([0, 1, 2**31 - 1], False),
        ([-1], True),
        ([5, -(2**31), 3], True),
        ([7] * 1000 + [-5], True),
    ):
        assert _has_negative(array("i", ids)) is neg
        if neg:
            with pytest.raises(TokenStateError):
                int_array(ids)
        else:
            assert list(int_array(ids)) == ids


def test_the_recipe_rollout_keys_reach_the_trial_processes_environment():
    from apexrl.train.generator import GeneratorSettings, rollout_env
    from apexrl.train.recipe import RolloutSection

    r = RolloutSection()
    assert (r.tokenize_threads, r.tokenize_nice, r.loop_gc) == (0, 10, "tuned")
    s = GeneratorSettings(
        tasks_dir="t", logs_dir="l", tokenize_threads=3, tokenize_nice=5, loop_gc="default"
    )
    assert rollout_env(s) == {
        "APEXRL_ROLLOUT_TOKENIZE_THREADS": "3",
        "APEXRL_ROLLOUT_TOKENIZE_NICE": "5",
        "APEXRL_ROLLOUT_GC": "default",
    }
