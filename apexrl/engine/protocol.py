"""The engine interface: what apexrl needs from any engine it starts.

Every engine serves the OpenAI-compatible `/v1/completions` token-id contract
(apexrl.tito.client) over HTTP; this protocol is the host-side handle around it:

    engine = launch(StartOptions(model=...))   # started and healthy
    engine.endpoint        base URL (http://host:port)
    engine.health()        True while it answers GET /health
    engine.capabilities()  served model, context window, device, token-id contract
    engine.stop()          idempotent

`launch` functions are named by apexrl.engine.registry.ENGINES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

HEALTH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class EngineCapabilities:
    model: str  # the served model name clients send
    max_model_len: int | None = None  # context window in tokens
    device: str = "cpu"  # cpu | cuda
    token_ids: bool = True  # token-id prompts, return_token_ids, per-token logprobs


@dataclass
class StartOptions:
    """How to start an engine (`apexrl engine serve` flags; eval fills the model only)."""

    model: str  # checkpoint directory or Hub id
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    served_model_name: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None  # vLLM
    threads: int | None = None  # local: torch CPU threads
    log_path: Path | None = None  # vLLM: its log
    ready_timeout_s: float = 1800.0
    extra_args: list[str] = field(default_factory=list)  # vLLM: extra server flags
    vllm_python: str | None = None  # vLLM: the interpreter with vLLM


@runtime_checkable
class Engine(Protocol):
    kind: str

    @property
    def endpoint(self) -> str: ...

    def start(self) -> Engine: ...

    def stop(self) -> object: ...

    def health(self) -> bool: ...

    def capabilities(self) -> EngineCapabilities: ...


class HttpEngine:
    """What the HTTP engines share (local, vLLM, the tests' scripted one): the endpoint is
    the server's `url`, health is GET /health, and a `with` block starts and stops the
    engine. Subclasses give `kind`, `url`, `start`, `stop` and `capabilities`."""

    kind: str

    @property
    def endpoint(self) -> str:
        return self.url  # type: ignore[attr-defined]

    def health(self) -> bool:
        return http_health(self.endpoint)

    def __enter__(self):
        return self.start()  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        self.stop()  # type: ignore[attr-defined]


def http_health(endpoint: str, timeout_s: float = HEALTH_TIMEOUT_S) -> bool:
    """True when GET {endpoint}/health answers 200 within the timeout."""
    import httpx

    try:
        return httpx.get(f"{endpoint}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False
