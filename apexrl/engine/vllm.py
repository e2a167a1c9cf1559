"""vLLM's OpenAI-compatible server as a managed subprocess (GPU; extra `serve`).

`vllm_command` builds the command line a TITO agent needs:
  --served-model-name   the name agents send as `model`
  --max-model-len       the context window agents budget against (/v1/models reports it)
  --tensor-parallel-size  from the visible GPUs (largest power of two <= count)
  --generation-config vllm  sampling comes from the request only: without it vLLM
                        applies the checkpoint's generation_config defaults (e.g. Qwen3's
                        top_k=20) to every request that leaves them out, so the policy
                        sampled would differ from the one the trainer assumes
  --max-logprobs        enough for the sampled-token logprob plus a few alternatives
`VllmServer` starts it in its own process group with the log streamed to a file,
waits for /health (bounded), and stops it (SIGTERM to the group, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.errors import ApexError, ExitCode, UsageError


def visible_gpu_count(env: dict[str, str] | None = None) -> int:
    """GPUs this process may use: CUDA_VISIBLE_DEVICES, else nvidia-smi, else 0."""
    env = os.environ if env is None else env
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        cvd = cvd.strip()
        if cvd in ("", "-1", "none", "NoDevFiles"):
            return 0
        return len([d for d in cvd.split(",") if d.strip()])
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def tensor_parallel_size(n_gpus: int) -> int:
    """Largest power of two <= n_gpus (attention heads divide by powers of two)."""
    if n_gpus < 1:
        raise UsageError("vLLM needs at least one visible GPU", hint="use --engine local on CPU")
    tp = 1
    while tp * 2 <= n_gpus:
        tp *= 2
    return tp


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def served_name_for(model: str) -> str:
    """Default served name: a checkpoint dir's name, or the HF id as given."""
    p = Path(model)
    return p.name if p.is_dir() else model


@dataclass
class VllmOptions:
    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None  # None: from the visible GPUs
    gpu_memory_utilization: float | None = None
    dtype: str | None = None
    max_logprobs: int = 20
    seed: int | None = None
    api_key: str | None = None  # from APEXRL_ENGINE_API_KEY: given via env, not argv
    extra_args: list[str] = field(default_factory=list)


def vllm_command(
    opts: VllmOptions, *, n_gpus: int | None = None, python: str | None = None
) -> list[str]:
    tp = opts.tensor_parallel_size or tensor_parallel_size(
        visible_gpu_count() if n_gpus is None else n_gpus
    )
    cmd = [
        python or sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        opts.model,
        "--served-model-name",
        opts.served_model_name or served_name_for(opts.model),
        "--host",
        opts.host,
        "--port",
        str(opts.port),
        "--tensor-parallel-size",
        str(tp),
        "--generation-config",
        "vllm",
        "--max-logprobs",
        str(opts.max_logprobs),
        "--disable-uvicorn-access-log",
    ]
    if opts.max_model_len:
        cmd += ["--max-model-len", str(opts.max_model_len)]
    if opts.gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", str(opts.gpu_memory_utilization)]
    if opts.dtype:
        cmd += ["--dtype", opts.dtype]
    if opts.seed is not None:
        cmd += ["--seed", str(opts.seed)]
    cmd += list(opts.extra_args)
    return cmd


def vllm_env(opts: VllmOptions, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    if opts.api_key:
        env["VLLM_API_KEY"] = opts.api_key  # vLLM reads it; never on the command line
    env.setdefault("VLLM_LOGGING_LEVEL", "INFO")
    return env


def wait_healthy(
    url: str, *, timeout_s: float, proc: subprocess.Popen | None = None, interval_s: float = 1.0
) -> float:
    """Poll GET {url}/health until 200; fail early if `proc` exits. Returns seconds waited."""
    import httpx

    t0 = time.monotonic()
    last = "no answer"
    while True:
        if proc is not None and proc.poll() is not None:
            raise ApexError(
                f"the engine exited with code {proc.returncode} before it was healthy",
                hint="read its log file for the reason",
                code=ExitCode.REMOTE,
            )
        try:
            r = httpx.get(url.rstrip("/") + "/health", timeout=5)
            if r.status_code == 200:
                return time.monotonic() - t0
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            last = type(e).__name__
        if time.monotonic() - t0 > timeout_s:
            raise ApexError(
                f"the engine at {url} was not healthy within {timeout_s:.0f}s ({last})",
                hint="raise --ready-timeout (large checkpoints load slowly) or read its log",
                code=ExitCode.REMOTE,
            )
        time.sleep(interval_s)


class VllmServer:
    """vLLM as a subprocess: start() -> wait for /health -> stop()."""

    def __init__(
        self,
        opts: VllmOptions,
        *,
        log_path: str | Path,
        ready_timeout_s: float = 1800.0,
        command: Sequence[str] | None = None,
    ) -> None:
        self.opts = opts
        self.log_path = Path(log_path)
        self.ready_timeout_s = ready_timeout_s
        self.command = list(command) if command is not None else vllm_command(opts)
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.opts.host in ("0.0.0.0", "") else self.opts.host
        return f"http://{host}:{self.opts.port}"

    def start(self) -> VllmServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=vllm_env(self.opts),
            start_new_session=True,  # its own process group: stop() reaches its workers
        )
        try:
            wait_healthy(self.url, timeout_s=self.ready_timeout_s, proc=self.proc)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace_s: float = 30.0) -> int | None:
        proc, self.proc = self.proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            code = proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
