"""The vLLM path without a GPU: its command line, GPU counting, and the process manager
(start, health wait, log streaming, clean stop) driven by a stand-in server process."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

from apexrl.engine import vllm
from apexrl.engine.serve import choose_engine
from apexrl.engine.vllm import (
    VllmOptions,
    VllmServer,
    tensor_parallel_size,
    visible_gpu_count,
    vllm_command,
    vllm_env,
)
from apexrl.errors import ApexError, UsageError


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


def test_command_has_the_flags_a_tito_agent_needs(tmp_path):
    ckpt = tmp_path / "qwen3-8b-step40"
    ckpt.mkdir()
    opts = VllmOptions(model=str(ckpt), port=8123, max_model_len=262144, seed=3)
    cmd = vllm_command(opts, n_gpus=8, python="/usr/bin/python3")
    assert cmd[:3] == ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(cmd, "--model") == str(ckpt)
    assert _flag(cmd, "--served-model-name") == "qwen3-8b-step40"  # a dir: its name
    assert _flag(cmd, "--max-model-len") == "262144"
    assert _flag(cmd, "--tensor-parallel-size") == "8"
    assert _flag(cmd, "--generation-config") == "vllm"  # no hidden top_k from the checkpoint
    assert int(_flag(cmd, "--max-logprobs")) >= 1
    assert (_flag(cmd, "--host"), _flag(cmd, "--port")) == ("127.0.0.1", "8123")
    assert _flag(cmd, "--seed") == "3"


def test_command_defaults_and_hf_ids():
    cmd = vllm_command(VllmOptions(model="Qwen/Qwen3-0.6B"), n_gpus=6)
    assert _flag(cmd, "--served-model-name") == "Qwen/Qwen3-0.6B"
    assert _flag(cmd, "--tensor-parallel-size") == "4"  # largest power of two <= 6
    assert "--max-model-len" not in cmd  # the model's own unless asked
    cmd = vllm_command(
        VllmOptions(model="m", tensor_parallel_size=2, extra_args=["--enforce-eager"]), n_gpus=8
    )
    assert _flag(cmd, "--tensor-parallel-size") == "2" and cmd[-1] == "--enforce-eager"


def test_api_key_goes_through_the_environment_not_argv():
    opts = VllmOptions(model="m", api_key="engine-key-123456")
    cmd = vllm_command(opts, n_gpus=1)
    assert all("engine-key-123456" not in a for a in cmd)
    assert vllm_env(opts, base={})["VLLM_API_KEY"] == "engine-key-123456"


def test_visible_gpus_and_tensor_parallel(monkeypatch):
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0
    monkeypatch.setattr(vllm.shutil, "which", lambda name: None)
    assert visible_gpu_count({}) == 0  # no nvidia-smi: no GPU
    assert [tensor_parallel_size(n) for n in (1, 2, 3, 4, 7, 8, 12)] == [1, 2, 2, 4, 4, 8, 8]
    with pytest.raises(UsageError):
        tensor_parallel_size(0)


def test_choose_engine(monkeypatch):
    monkeypatch.delenv(vllm.VLLM_PYTHON_ENV, raising=False)
    monkeypatch.setattr(vllm, "probe_vllm", lambda python=None: None)
    monkeypatch.setattr(vllm, "vllm_available", lambda python=None: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert choose_engine("auto") == "vllm"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert choose_engine("auto") == "local"
    with pytest.raises(UsageError, match="CUDA"):
        choose_engine("vllm")
    monkeypatch.setattr(vllm, "vllm_available", lambda python=None: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert choose_engine("auto") == "local"
    with pytest.raises(UsageError, match="serve"):
        choose_engine("vllm")


def test_cpu_build_needs_no_gpu_and_another_interpreter_is_used(monkeypatch, tmp_path):
    """vLLM's CPU build in another interpreter (APEXRL_VLLM_PYTHON / --vllm-python)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    seen = []

    def fake_probe(python=None):
        seen.append(python)
        return vllm.VllmBuild(python=python, version="0.32.0", device="cpu")

    monkeypatch.setattr(vllm, "probe_vllm", fake_probe)
    monkeypatch.setenv(vllm.VLLM_PYTHON_ENV, sys.executable)
    assert choose_engine("vllm") == "vllm" and seen[-1] == sys.executable
    assert choose_engine("auto") == "local"  # auto takes vLLM only with GPUs
    monkeypatch.delenv(vllm.VLLM_PYTHON_ENV)
    assert choose_engine("vllm", vllm_python=sys.executable) == "vllm"
    monkeypatch.setattr(vllm, "probe_vllm", lambda python=None: None)
    with pytest.raises(UsageError, match="no vLLM in"):
        choose_engine("vllm", vllm_python=sys.executable)
    with pytest.raises(UsageError, match="not an executable"):
        choose_engine("vllm", vllm_python=str(tmp_path / "nope" / "python"))


def test_probe_of_an_interpreter_without_vllm():
    vllm._probe_cache.pop(sys.executable, None)
    assert vllm.probe_vllm(sys.executable) is None  # this test venv has no vLLM


def test_cpu_command_is_safe_for_seeded_long_prompts(tmp_path):
    """CPU flags: prefills never split (a split seeded prefill kills vLLM CPU's engine)."""
    from apexrl.engine.tiny import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint(tmp_path / "tiny", max_position_embeddings=20000)
    cmd = vllm_command(VllmOptions(model=str(ckpt), device="cpu"), python="/x/python")
    assert cmd[0] == "/x/python" and "--tensor-parallel-size" not in cmd
    assert "--no-enable-chunked-prefill" in cmd and "--enforce-eager" in cmd
    assert int(_flag(cmd, "--max-num-batched-tokens")) == 20000  # the checkpoint's window
    assert _flag(cmd, "--dtype") == "float32"  # not downcast to bfloat16
    cmd = vllm_command(VllmOptions(model=str(ckpt), device="cpu", max_model_len=1024))
    assert int(_flag(cmd, "--max-num-batched-tokens")) == 2048  # never below vLLM's default
    env = vllm_env(VllmOptions(model="m", device="cpu"), base={})
    assert env["VLLM_CPU_KVCACHE_SPACE"] == vllm.CPU_KVCACHE_GIB
    mine = vllm_env(VllmOptions(model="m", device="cpu"), base={"VLLM_CPU_KVCACHE_SPACE": "8"})
    assert mine["VLLM_CPU_KVCACHE_SPACE"] == "8"  # the caller's setting wins


# A stand-in for vLLM's server: logs, becomes healthy after a delay, spawns a worker
# child (as vLLM does) so stop() must reach the whole process group.
STANDIN = textwrap.dedent(
    """
    import http.server, subprocess, sys, time
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(sys.argv[3], "w").write(str(child.pid))
    print("INFO loading weights", flush=True)
    time.sleep(delay)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *a): pass
    print("INFO ready", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_server_waits_for_health_streams_log_and_stops_the_group(tmp_path):
    port = _free_port()
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    pidfile = tmp_path / "child.pid"
    log = tmp_path / "logs" / "vllm.log"
    opts = VllmOptions(model="m", port=port)
    cmd = [sys.executable, str(script), str(port), "0.5", str(pidfile)]
    server = VllmServer(opts, log_path=log, ready_timeout_s=30, command=cmd)
    t0 = time.monotonic()
    server.start()
    assert time.monotonic() - t0 >= 0.5
    import httpx

    assert httpx.get(server.url + "/health", timeout=5).status_code == 200
    child = int(pidfile.read_text())
    assert _alive(child)
    code = server.stop(grace_s=10)
    assert code is not None
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)  # the worker went with its group
    text = log.read_text()
    assert "loading weights" in text and "ready" in text


def test_server_that_exits_or_never_gets_healthy_fails_fast(tmp_path):
    log = tmp_path / "vllm.log"
    crash = [sys.executable, "-c", "import sys; print('CUDA error: no device'); sys.exit(3)"]
    t0 = time.monotonic()
    with pytest.raises(ApexError, match="exited with code 3"):
        VllmServer(VllmOptions(model="m", port=_free_port()), log_path=log, command=crash).start()
    assert time.monotonic() - t0 < 10
    assert "no device" in log.read_text()

    hang = [sys.executable, "-c", "import time; time.sleep(600)"]
    server = VllmServer(
        VllmOptions(model="m", port=_free_port()), log_path=log, ready_timeout_s=1.5, command=hang
    )
    t0 = time.monotonic()
    with pytest.raises(ApexError, match="not healthy within"):
        server.start()
    assert time.monotonic() - t0 < 15
    assert server.proc is None  # stopped after the failed start
