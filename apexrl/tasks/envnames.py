"""Which environment variable names a task may set.

A task's `[environment.env]`, `[verifier.env]`, `[solution.env]` and `[agent.env]` values
go to the commands it runs, inside the sandbox only (`apexrl.envs.local.sandbox`). Names that
change how a program is loaded or started are refused anyway, at convert, validate and
trial time: a value that one day reached a host process (or a helper the sandbox runs
before the task's command) would run the dataset's code there. The list:

- the dynamic loader and glibc: `LD_*` (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...),
  `GLIBC_TUNABLES`, `MALLOC_*`, and the names glibc itself drops for setuid programs
  (GCONV_PATH, GETCONF_DIR, HOSTALIASES, LOCALDOMAIN, LOCPATH, NIS_PATH, NLSPATH,
  RESOLV_HOST_CONF, RES_OPTIONS, TZDIR): each loads a file or a module it names;
- `PATH`: which program a bare name runs;
- interpreters' start-up hooks: `PYTHON*`, `PERL5LIB`/`PERL5OPT`/`PERLLIB`,
  `RUBYLIB`/`RUBYOPT`, `NODE_OPTIONS`/`NODE_PATH`, `JAVA_TOOL_OPTIONS`/`_JAVA_OPTIONS`/
  `JDK_JAVA_OPTIONS`, `OPENSSL_CONF`/`OPENSSL_ENGINES`/`OPENSSL_MODULES`;
- shells' start-up hooks: `BASH_ENV`, `ENV`, `SHELLOPTS`, `BASHOPTS`, `PS4` (run under
  xtrace), `PROMPT_COMMAND`, `BASH_FUNC_*` (exported functions, also not a plain name);
- anything that is not a plain name (`[A-Za-z_][A-Za-z0-9_]*`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PREFIXES = ("LD_", "MALLOC_", "PYTHON", "BASH_FUNC_")
NAMES = frozenset(
    {
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "GETCONF_DIR",
        "HOSTALIASES",
        "LOCALDOMAIN",
        "LOCPATH",
        "NIS_PATH",
        "NLSPATH",
        "RESOLV_HOST_CONF",
        "RES_OPTIONS",
        "TZDIR",
        "PATH",
        "PERL5LIB",
        "PERL5OPT",
        "PERLLIB",
        "RUBYLIB",
        "RUBYOPT",
        "NODE_OPTIONS",
        "NODE_PATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "OPENSSL_CONF",
        "OPENSSL_ENGINES",
        "OPENSSL_MODULES",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
    }
)
# the task.toml tables whose keys become environment variables
ENV_TABLES = ("environment", "verifier", "solution", "agent")


def why_refused(name: str) -> str | None:
    """Why a task may not set `name`, or None when it may."""
    if not PLAIN.match(name):
        return "not a plain variable name"
    upper = name.upper()
    if upper in NAMES or upper.startswith(PREFIXES):
        return "it changes how programs load or start"
    return None


def refused_names(names: Iterable[str]) -> list[tuple[str, str]]:
    """(name, why) for each name a task may not set."""
    out = []
    for name in names:
        why = why_refused(str(name))
        if why is not None:
            out.append((str(name), why))
    return out


def env_tables(raw: dict) -> Iterator[tuple[str, dict]]:
    """(`[section.env]`, its table) for every env table of a parsed task.toml, the
    verifier's own environment and steps included."""
    for section in ENV_TABLES:
        table = raw.get(section)
        if isinstance(table, dict):
            if isinstance(table.get("env"), dict):
                yield f"[{section}.env]", table["env"]
            inner = table.get("environment")
            if isinstance(inner, dict) and isinstance(inner.get("env"), dict):
                yield f"[{section}.environment.env]", inner["env"]
    for i, step in enumerate(raw.get("steps") or []):
        if isinstance(step, dict):
            for key, sub in step.items():
                if key == "env" and isinstance(sub, dict):
                    yield f"[[steps]] #{i + 1} env", sub
                elif isinstance(sub, dict) and isinstance(sub.get("env"), dict):
                    yield f"[[steps]] #{i + 1} {key}.env", sub["env"]


def task_env_problems(raw: dict) -> list[str]:
    """One message per refused name in a parsed task.toml's env tables."""
    return [
        f"{where} sets {name}: {why}; remove it from task.toml"
        for where, table in env_tables(raw)
        for name, why in refused_names(table)
    ]


class RefusedEnvError(ValueError):
    """A task or an exec asks to set an environment variable no task may set."""


def check_env(env: dict[str, str] | None, where: str) -> None:
    """Raise RefusedEnvError naming `where` and each refused name in `env`."""
    bad = refused_names(env or {})
    if bad:
        names = ", ".join(f"{n} ({why})" for n, why in bad)
        raise RefusedEnvError(f"{where}: refused environment variable(s) {names}")
