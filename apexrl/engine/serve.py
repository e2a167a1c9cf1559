"""Choosing and running an engine; `--endpoint URL` for a server that already runs.

choose_engine("auto")      the registry's engines by auto_rank, the first usable one:
                           "vllm" with CUDA GPUs and vLLM installed, else "local";
                           "vllm" named also takes vLLM's CPU build (`make vllm`), which
                           may live in another interpreter (--vllm-python,
                           APEXRL_VLLM_PYTHON): apexrl.engine.vllm.check_selectable
start_engine(model, ...)   a RunningEngine (url, model, max_model_len, stop())
probe_endpoint(url)        (apexrl.engine.probe) EndpointInfo from GET /v1/models
open_engine(endpoint=..., model=...)   context manager (eval's running_engine): use
                           the endpoint when given, else start an engine, stop it after
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apexrl.engine.probe import probe_endpoint
from apexrl.errors import RemoteError, UsageError

EngineKind = str  # "auto" or an ENGINES name (apexrl.engine.registry.engine_choices)


def choose_engine(kind: EngineKind = "auto", *, vllm_python: str | None = None) -> str:
    """The engine to start, from the registry (apexrl.engine.registry): a named one after
    its entry's `check` (UsageError when it cannot run here); "auto": the first engine by
    `auto_rank` whose `usable` says yes. vllm_python: the engine's interpreter option."""
    from apexrl.engine.registry import ENGINES, get_engine
    from apexrl.importpath import load

    if kind != "auto":
        entry = get_engine(kind)
        if entry.check:
            load(entry.check)(vllm_python)
        return entry.name
    ranked = sorted((e for e in ENGINES.values() if e.auto_rank is not None), key=_rank)
    for e in ranked:
        if e.usable is None or load(e.usable)(vllm_python):
            return e.name
    raise UsageError("no engine can run here", hint="see `apexrl doctor`")


def _rank(entry) -> int:
    return entry.auto_rank


@dataclass
class RunningEngine:
    kind: str  # an ENGINES name, or "endpoint" (a server that already runs)
    url: str
    model: str
    max_model_len: int | None
    log_path: Path | None = None
    _stop: Any = None

    def stop(self) -> None:
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()

    def record(self) -> dict:
        return {
            "engine": self.kind,
            "url": self.url,
            "model": self.model,
            "max_model_len": self.max_model_len,
            "log": str(self.log_path) if self.log_path else None,
        }


def resolve_local_model(model: str) -> Path:
    """A checkpoint directory for the local engine: a path, or an HF id downloaded once."""
    p = Path(model).expanduser()
    if p.is_dir():
        return p
    if model.count("/") == 1 and not model.startswith((".", "/")):
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError

        try:
            return Path(
                snapshot_download(
                    model,
                    allow_patterns=["*.json", "*.safetensors", "*.txt", "*.jinja", "*.model"],
                )
            )
        except HfHubHTTPError as e:
            raise RemoteError(
                f"could not download {model} from the Hub: {e}", retryable=True
            ) from e
    raise UsageError(f"model {model!r}: no such checkpoint directory and not an HF id")


def start_engine(model: str, *, engine: EngineKind = "auto", **options: Any) -> RunningEngine:
    """Start the engine `engine` names (auto: choose_engine) through its registry entry
    (apexrl.engine.registry.ENGINES): its `launch` returns a started Engine. `options` are
    StartOptions' fields (host, port, served_model_name, max_model_len, log_path, ...)."""
    from apexrl.engine.protocol import StartOptions
    from apexrl.engine.registry import get_engine
    from apexrl.importpath import load

    opts = StartOptions(model=model, **options)
    kind = choose_engine(engine, vllm_python=opts.vllm_python)
    running = load(get_engine(kind).launch)(opts)
    caps = running.capabilities()
    log = getattr(running, "log_path", None)
    return RunningEngine(kind, running.endpoint, caps.model, caps.max_model_len, log, running.stop)


@contextlib.contextmanager
def open_engine(
    *, endpoint: str | None = None, model: str | None = None, **start_kw: Any
) -> Iterator[RunningEngine]:
    """`endpoint` (a server that already runs), or start `model` (start_engine's keywords)
    and stop it when the block ends (eval starts its engine here)."""
    if endpoint:
        info = probe_endpoint(endpoint, model=model)
        yield RunningEngine("endpoint", info.url, info.model, info.max_model_len)
        return
    if not model:
        raise UsageError("pass an engine --endpoint URL or a MODEL to serve")
    running = start_engine(model, **start_kw)
    try:
        yield running
    finally:
        running.stop()
