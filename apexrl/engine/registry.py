"""ENGINES: inference engines apexrl can start, by name (`--engine`, `apexrl engine serve`).

Each entry names the engine's `launch(opts: StartOptions) -> Engine` function (loaded
only when an engine starts) and what it needs, so the CLI choices, engine dispatch
(apexrl.engine.serve.start_engine), run records (eval's engine version), preflight and
`apexrl doctor` all derive from this one table. "auto" is not an engine: it picks the
first engine by `auto_rank` whose `usable` says yes (vllm with GPUs, else local;
apexrl.engine.serve.choose_engine). An engine's own selection rules (`check`, `usable`,
`version`) live in its module, named here.

Adding an engine: a module with a `launch` function returning an object that
implements apexrl.engine.protocol.Engine, and one line below.
"""

from __future__ import annotations

from dataclasses import dataclass

from apexrl.errors import UsageError

AUTO = "auto"


@dataclass(frozen=True)
class EngineEntry:
    name: str
    summary: str
    launch: str  # "module:function" (StartOptions) -> a started Engine
    # offered as --engine NAME (False: only code starts it, e.g. the tests' scripted engine)
    selectable: bool = True
    extra: str | None = None  # the pip extra that installs it (`apexrl doctor`)
    modules: tuple[str, ...] = ()  # what that extra must make importable
    # modules checked before an eval starts it (empty: it may live in another interpreter)
    preflight_modules: tuple[str, ...] = ()
    version_package: str | None = None  # distribution whose version the run records
    # how its server is given a wider context window, for the eval's hint when the
    # window asked for is more than an engine serves ("{n}": the tokens asked for)
    window_hint: str | None = None
    gpu: bool = False  # wants CUDA GPUs (its CPU build is chosen explicitly)
    # "auto" tries engines by rank, lowest first; None: only when named
    auto_rank: int | None = None
    # "module:function" (python) -> bool: may "auto" pick it on this machine (None: yes)
    usable: str | None = None
    # "module:function" (python) -> None: raises UsageError when `--engine NAME` cannot run
    check: str | None = None
    # "module:function" (python) -> str | None: the version the run records (None: the
    # version of `version_package` in this interpreter)
    version: str | None = None
    # python: the engine's interpreter option (`--vllm-python`), passed to the three above


ENGINES: dict[str, EngineEntry] = {
    e.name: e
    for e in (
        EngineEntry(
            "vllm",
            "vLLM's OpenAI-compatible server as a managed subprocess",
            launch="apexrl.engine.vllm:launch",
            extra="serve",
            modules=("vllm",),
            version_package="vllm",
            window_hint="--max-model-len {n} (vLLM)",
            gpu=True,
            auto_rank=0,
            usable="apexrl.engine.vllm:auto_usable",
            check="apexrl.engine.vllm:check_selectable",
            version="apexrl.engine.vllm:engine_version",
        ),
        EngineEntry(
            "local",
            "CPU engine for small Hugging Face checkpoints (transformers on torch)",
            launch="apexrl.engine.cpu:launch",
            extra="local",
            modules=("torch", "transformers"),
            preflight_modules=("torch", "transformers"),
            version_package="transformers",
            auto_rank=1,
        ),
    )
}


def engine_choices() -> tuple[str, ...]:
    """What `--engine` accepts: auto, then every selectable engine."""
    return (AUTO, *(n for n, e in ENGINES.items() if e.selectable))


def get_engine(name: str) -> EngineEntry:
    if name not in ENGINES:
        raise UsageError.unknown("engine", name, engine_choices())
    return ENGINES[name]
