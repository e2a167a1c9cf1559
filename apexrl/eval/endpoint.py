"""The endpoint an eval talks to: which engine serves MODEL, and starting/stopping it
(the engines themselves are `apexrl.engine`).

- `--endpoint URL`: a running OpenAI-compatible engine; nothing is started.
- MODEL a local checkpoint directory or a Hub id (`org/name[@revision]`): vLLM when a
  GPU and vLLM are present, else the local CPU engine (apexrl.engine.cpu), on
  127.0.0.1, stopped when the eval ends. `--engine vllm` also runs vLLM's CPU build
  from another interpreter (`vllm_python`, APEXRL_VLLM_PYTHON).
- the oracle agent needs no engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from apexrl.errors import RemoteError, UsageError
from apexrl.eval.models import EngineInfo, ModelInfo

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?$")
PROBE_TIMEOUT_S = 10.0


@dataclass
class ResolvedModel:
    model: ModelInfo = field(default_factory=ModelInfo)
    engine: EngineInfo = field(default_factory=EngineInfo)
    tokenizer: str | None = None
    chat_template: str | None = None
    chat_template_hash: str | None = None
    vllm_python: str | None = None  # the interpreter that runs vLLM (None: the default)


def resolve_model(
    model: str | None,
    *,
    agent: str,
    endpoint: str | None = None,
    tokenizer: str | None = None,
    chat_template: str | None = None,
    engine: str = "auto",
    vllm_python: str | None = None,
) -> ResolvedModel:
    """Resolve MODEL to a checkpoint and an engine kind without starting anything
    (an --endpoint is probed: it must answer now)."""
    from apexrl.engine.probe import probe_endpoint
    from apexrl.engine.serve import choose_engine

    res = ResolvedModel(tokenizer=tokenizer, chat_template=chat_template, vllm_python=vllm_python)
    if agent == "oracle" and not model and not endpoint:
        res.model = ModelInfo(name="oracle")
        return res
    if endpoint:
        local = Path(model).expanduser() if model else None
        is_dir = local is not None and local.is_dir()
        info = probe_endpoint(endpoint, model=None if is_dir else model)
        res.engine = EngineInfo(
            kind="endpoint", version=_endpoint_version(info.url), endpoint=info.url
        )
        res.model = ModelInfo(name=model or info.model, served_name=info.model)
        if is_dir:
            res.model.path = str(local.resolve())
    elif not model:
        raise UsageError("MODEL is required", hint="pass a checkpoint, a Hub id, or --endpoint URL")
    else:
        path = Path(model).expanduser()
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise UsageError(
                    f"model {model}: not a checkpoint directory (no config.json)",
                    hint="pass a Hugging Face checkpoint folder or a Hub id",
                )
            res.model = ModelInfo(name=model, path=str(path.resolve()), served_name=path.name)
        elif path.exists() or not HUB_ID.match(model) or model.startswith((".", "/", "~")):
            raise UsageError(
                f"model {model}: no such checkpoint directory",
                hint="pass an existing checkpoint folder, a Hub id (org/name), or --endpoint URL",
            )
        else:
            repo, _, rev = model.partition("@")
            local_dir, commit = _download(repo, rev or None, as_path=path)
            res.model = ModelInfo(
                name=repo, path=str(local_dir), revision=commit, served_name=repo.split("/")[-1]
            )
        kind = choose_engine(engine, vllm_python=vllm_python)  # type: ignore[arg-type]
        res.engine = EngineInfo(kind=kind, version=_engine_version(kind, vllm_python))
    if res.tokenizer is None and res.model.path:
        res.tokenizer = res.model.path
    res.chat_template_hash = template_hash(chat_template, res.model.path)
    return res


def template_hash(chat_template: str | None, model_path: str | None) -> str | None:
    text = None
    if chat_template:
        p = Path(chat_template)
        text = p.read_text(encoding="utf-8") if p.is_file() else f"builtin:{chat_template}"
    elif model_path:
        d = Path(model_path)
        if (d / "chat_template.jinja").is_file():
            text = (d / "chat_template.jinja").read_text(encoding="utf-8")
        elif (d / "tokenizer_config.json").is_file():
            cfg = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
            tpl = cfg.get("chat_template")
            text = tpl if isinstance(tpl, str) else json.dumps(tpl, sort_keys=True) if tpl else None
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest() if text else None


def _download(
    repo: str, revision: str | None, *, as_path: Path | None = None
) -> tuple[Path, str | None]:
    """The Hub snapshot of `repo`. MODEL is read as a Hub id only because no folder of
    that name exists (`as_path`): when the Hub cannot be reached or has no such model,
    the usage error names both readings (a mistyped checkpoint path is the likely one)."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    folder = f"no folder {as_path.absolute()}" if as_path is not None else None
    try:
        info = HfApi().model_info(repo, revision=revision, timeout=PROBE_TIMEOUT_S)
    except RepositoryNotFoundError as e:
        raise UsageError(
            f"model {repo}: {folder + ', and ' if folder else ''}no such model on the Hub",
            hint="check the checkpoint path or the Hub id (HF_TOKEN for a private repo)",
        ) from e
    except HfHubHTTPError as e:
        raise _hub_http_error(repo, e) from e
    except Exception as e:  # DNS, refused connection, timeout, offline mode
        if folder is None:
            raise RemoteError(f"could not reach the Hub for {repo}: {e}", retryable=True) from e
        raise UsageError(
            f"model {repo}: {folder}, and the Hub cannot be reached to look it up as a Hub id "
            f"({type(e).__name__}: {str(e)[:200]})",
            hint="pass an existing checkpoint folder, or a Hub id with the Hub reachable "
            "(or --endpoint URL)",
        ) from None
    try:
        path = snapshot_download(repo, revision=info.sha, etag_timeout=30)
    except RepositoryNotFoundError as e:
        raise UsageError(
            f"model {repo} not found on the Hub",
            hint="check the id, or HF_TOKEN for a private repo",
        ) from e
    except HfHubHTTPError as e:
        raise _hub_http_error(repo, e) from e
    except Exception as e:  # the connection lost mid-download
        raise RemoteError(f"could not reach the Hub for {repo}: {e}", retryable=True) from e
    return Path(path), info.sha


def _hub_http_error(repo: str, e) -> RemoteError:
    status = e.response.status_code if e.response is not None else None
    return RemoteError(
        f"Hub download of {repo} failed: {e}",
        retryable=status is None or status == 429 or status >= 500,
    )


def _engine_version(kind: str, vllm_python: str | None = None) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    from apexrl.engine.registry import ENGINES
    from apexrl.importpath import load

    entry = ENGINES.get(kind)
    if entry is not None and entry.version:  # e.g. vLLM in another interpreter: ask it
        return load(entry.version)(vllm_python)
    pkg = entry.version_package if entry else None
    try:
        return f"{pkg} {version(pkg)}" if pkg else None
    except PackageNotFoundError:
        return None


def _endpoint_version(base: str) -> str | None:
    """vLLM answers GET /version; other engines may not (best effort, bounded)."""
    import httpx

    try:
        r = httpx.get(f"{base}/version", timeout=PROBE_TIMEOUT_S)
        return str(r.json().get("version")) if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


@contextlib.contextmanager
def running_engine(res: ResolvedModel, *, log_path: Path | None = None) -> Iterator[str | None]:
    """Yield the engine's base URL for the whole eval (None for the oracle); an
    engine started here is stopped when the eval ends."""
    kind = res.engine.kind
    if kind in ("none", "endpoint"):
        yield res.engine.endpoint
        return
    from apexrl.engine.serve import open_engine

    with open_engine(
        model=res.model.path,
        engine=kind,
        served_model_name=res.model.served_name,
        log_path=log_path,
        vllm_python=res.vllm_python,
    ) as running:
        res.engine.endpoint = running.url
        res.model.served_name = running.model
        yield running.url
