"""The scripted engine's contract, endpoint helpers, and `apexrl engine serve/check`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.engine.probe import probe_endpoint
from apexrl.engine.serve import open_engine
from apexrl.errors import RemoteError, UsageError
from apexrl.tito.client import EngineClient, EngineError, RetryPolicy
from apexrl.tito.parsing import parse_completion
from apexrl.tito.tokenizer import load_tokenizer
from tests.scripted_engine import FIXED_LOGPROB, Fault, ScriptedEngine, tool_call_text

runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory):
    from apexrl.engine.tiny import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-qwen3", seed=0)


def test_scripted_engine_speaks_the_tito_contract():
    tok = load_tokenizer("qwen3")
    text = tool_call_text("files_read", {"path": "a.txt"}, think="read it")
    with ScriptedEngine([text, "short answer that is long"]) as eng:
        c = EngineClient(eng.url, model="scripted", retry=RetryPolicy(max_retries=0))
        prompt = tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
        out = c.complete(prompt, max_tokens=500, stop_token_ids=[tok.token_to_id("<|im_end|>")])
        assert out.token_ids == tok.encode(text) + [tok.token_to_id("<|im_end|>")]
        assert out.logprobs == [FIXED_LOGPROB] * len(out.token_ids)
        assert out.finish_reason == "stop"
        parsed = parse_completion(tok.decode(out.token_ids))
        assert parsed.tool_calls[0].name == "files_read" and parsed.reasoning == "read it"
        cut = c.complete(prompt, max_tokens=2)  # cut at max_tokens, as vLLM does
        assert len(cut.token_ids) == 2 and cut.finish_reason == "length"
        # requests that break the contract are refused like vLLM refuses them
        bad = httpx.post(eng.url + "/v1/completions", json={"prompt": "text", "max_tokens": 3})
        assert bad.status_code == 400
        bad = httpx.post(eng.url + "/v1/completions", json={"prompt": [1, 2]})
        assert bad.status_code == 400 and "max_tokens" in bad.text
        with pytest.raises(EngineError) as e:  # the script is exhausted: 400, not retried
            c.complete(prompt, max_tokens=5)
        assert e.value.kind == "bad_request"
        assert len(eng.requests) == 5
        c.close()


def test_scripted_faults_through_the_client():
    with ScriptedEngine(
        [Fault("status", status=502), Fault("drop"), Fault("hang", seconds=None), "ok"]
    ) as eng:
        c = EngineClient(eng.url, timeout_s=0.5, retry=RetryPolicy(max_retries=0))
        kinds = []
        for _ in range(3):
            with pytest.raises(EngineError) as e:
                c.complete([1, 2, 3], max_tokens=4)
            kinds.append(e.value.kind)
        assert kinds == ["transient", "transient", "timeout"]
        assert c.complete([1, 2, 3], max_tokens=4).text.startswith("ok")
        c.close()


def test_probe_endpoint():
    with ScriptedEngine([], model="m1", max_model_len=4096) as eng:
        info = probe_endpoint(eng.url + "/v1")
        assert (info.model, info.max_model_len, info.url) == ("m1", 4096, eng.url)
        with pytest.raises(UsageError, match="does not serve"):
            probe_endpoint(eng.url, model="other")
        with open_engine(endpoint=eng.url) as running:
            assert running.kind == "endpoint" and running.model == "m1"
    t0 = time.monotonic()
    with pytest.raises(RemoteError) as e:
        probe_endpoint("http://127.0.0.1:9", timeout_s=2)
    assert e.value.retryable and time.monotonic() - t0 < 10
    with pytest.raises(UsageError), open_engine():
        pass


def test_engine_check_cli():
    with ScriptedEngine(["hi"], model="m1", max_model_len=2048) as eng:
        r = runner.invoke(app, ["engine", "check", "--endpoint", eng.url])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert rec["model"] == "m1" and rec["max_model_len"] == 2048 and rec["sampled_ids"]
    r = runner.invoke(
        app, ["engine", "check", "--endpoint", "http://127.0.0.1:9", "--timeout", "2"]
    )
    assert r.exit_code == 4


def test_engine_serve_model_positional_local_cpu(tiny_ckpt):
    """`apexrl engine serve MODEL --port 0` with the local CPU engine answers /v1/completions."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "apexrl", "engine", "serve", str(tiny_ckpt), "--port", "0"]
        + ["--engine", "auto", "--max-model-len", "1024"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "CUDA_VISIBLE_DEVICES": ""},
    )
    try:
        line = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not line and proc.poll() is None:
            line = proc.stdout.readline()
        info = json.loads(line)
        assert info["engine"] == "local" and info["model"] == "tiny-qwen3"
        assert info["max_model_len"] == 1024
        tok = load_tokenizer("qwen3")
        with EngineClient(info["url"], model=info["model"], max_context=1024) as c:
            out = c.complete(tok.encode("hello"), max_tokens=4, temperature=1.0, seed=1)
        assert 1 <= len(out.token_ids) <= 4 and len(out.logprobs) == len(out.token_ids)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)


def test_serve_usage_errors():
    r = runner.invoke(app, ["engine", "serve"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["engine", "serve", "m", "--engine", "tpu"])
    assert r.exit_code == 2


def test_scripted_and_teacher_engines_launch_through_their_entries():
    """Both test engines start through one launcher (tests/scripted_engine.launcher): the
    entry's class, the served name (else the class's default) and the options' port."""
    from apexrl.engine.protocol import StartOptions
    from apexrl.importpath import load
    from tests.acting_teacher import ENGINE as TEACHER
    from tests.acting_teacher import TeacherEngine
    from tests.scripted_engine import ENGINE as SCRIPTED

    for entry, cls, name, served in (
        (SCRIPTED, ScriptedEngine, "scripted", None),
        (TEACHER, TeacherEngine, "teacher", None),
        (TEACHER, TeacherEngine, "mine", "mine"),
    ):
        eng = load(entry.launch)(StartOptions(model="x", served_model_name=served))
        try:
            assert type(eng) is cls and eng.model == name and eng.max_model_len == 32768
            assert eng.url.startswith("http://127.0.0.1:")
        finally:
            eng.stop()
