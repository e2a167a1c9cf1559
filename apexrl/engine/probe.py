"""Asking a running engine what it serves: GET /v1/models, bounded and classified.

Its own module so that the engines (vllm waits on it) and the chooser (serve) both
use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from apexrl.errors import AuthError, RemoteError, UsageError


@dataclass
class EndpointInfo:
    url: str
    model: str
    max_model_len: int | None = None
    models: list[str] = field(default_factory=list)


def check_url(url: str) -> None:
    """An engine address is http(s)://host[:port][/v1]: anything else is a usage error
    (exit 2), not an unreachable engine (exit 4)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise UsageError(f"--endpoint {url!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--endpoint {url!r} is not an http(s) URL",
            hint="e.g. --endpoint http://127.0.0.1:8000 (the engine's base URL)",
        )


def probe_endpoint(
    url: str, *, model: str | None = None, timeout_s: float = 10.0, api_key: str | None = None
) -> EndpointInfo:
    """Ask a running engine which models it serves (and their context windows)."""
    import os

    import httpx

    base = url.rstrip("/")
    base = base[:-3] if base.endswith("/v1") else base
    check_url(url)
    key = api_key if api_key is not None else os.environ.get("APEXRL_ENGINE_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = httpx.get(base + "/v1/models", timeout=timeout_s, headers=headers)
    except httpx.TimeoutException as e:
        raise RemoteError(
            f"engine at {base} did not answer in {timeout_s:g}s", retryable=True
        ) from e
    except httpx.HTTPError as e:
        raise RemoteError(
            f"engine at {base} is unreachable: {type(e).__name__}",
            retryable=True,
            hint="is the engine running? start one with `apexrl engine serve MODEL`",
        ) from e
    if r.status_code in (401, 403):
        raise AuthError(
            f"engine at {base} refused the credentials ({r.status_code})",
            hint="set APEXRL_ENGINE_API_KEY",
        )
    if r.status_code != 200:
        raise RemoteError(
            f"engine at {base} answered /v1/models with HTTP {r.status_code}",
            retryable=r.status_code >= 500 or r.status_code == 429,
        )
    try:
        data = r.json().get("data") or []
    except ValueError as e:
        raise RemoteError(f"engine at {base} sent invalid JSON", retryable=True) from e
    names = [m.get("id") for m in data if m.get("id")]
    if not names:
        raise RemoteError(f"engine at {base} serves no model", retryable=False)
    if model is not None and model not in names:
        raise UsageError(
            f"engine at {base} does not serve {model!r}", hint=f"it serves: {', '.join(names)}"
        )
    chosen = model or names[0]
    entry = next(m for m in data if m.get("id") == chosen)
    mml = entry.get("max_model_len")
    return EndpointInfo(
        url=base, model=chosen, max_model_len=mml if isinstance(mml, int) else None, models=names
    )
