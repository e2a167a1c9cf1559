"""One configuration layer: every environment variable apexrl reads, where its value came
from, and the project defaults.

Precedence, highest first: a command-line flag; the process environment; a `.env` file
(python-dotenv; the first found from the working folder up); the project's `apexrl.toml`
(the first found from the working folder up); the built-in default. `apply()` runs once
at start-up (apexrl.cli.app.main): `.env` and `apexrl.toml` only fill variables the
environment does not set, and each variable's source is kept for `apexrl config`.

apexrl.toml:

    [defaults]                 # the defaults of `eval run`'s flags
    judge = "gemini/gemini-2.5-flash"
    judge_api_base = "http://127.0.0.1:8001/v1"
    worlds = "data/world_files_zipped"
    endpoint = "http://127.0.0.1:8000/v1"
    output_root = "runs"       # a relative `eval run -o` / `eval regrade -o` goes under it

    [env]                      # any setting below, by name (never a secret: use .env)
    APEXRL_LOCAL_SCRATCH = "disk"

Secrets (apexrl.secrets.SECRET_ENV_KEYS and the settings marked secret) are shown
masked and refused in apexrl.toml (a file that gets committed).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from apexrl.errors import BadRecordError

PROJECT_FILE = "apexrl.toml"
ENV_FILE = ".env"

INTRO = """Precedence, highest first: a command-line flag; the process environment; a `.env`
file (the first found from the working folder up, read with python-dotenv); the project's
`apexrl.toml` (the first found from the working folder up); the built-in default. `.env`
and `apexrl.toml` only fill variables the environment does not set.

```toml
# apexrl.toml
[defaults]                 # the defaults of `eval run`'s flags
judge = "gemini/gemini-2.5-flash"
judge_api_base = "http://127.0.0.1:8001/v1"
worlds = "data/world_files_zipped"
endpoint = "http://127.0.0.1:8000/v1"
output_root = "runs"       # a relative `eval run -o RUN_DIR` (or regrade's) goes under it

[env]                      # any setting below, by name
APEXRL_LOCAL_SCRATCH = "disk"
```

An unknown table or key in `apexrl.toml` is an error naming the nearest known one.
Secrets (API keys, tokens, passwords) are refused there: a project file gets committed;
put them in `.env` (keep it out of version control) or the environment. `apexrl config`
shows a secret only as set or not, never its characters."""


@dataclass(frozen=True)
class Setting:
    """One environment variable apexrl reads. `key`: its name under apexrl.toml's
    [defaults]; `scope`: "user" (set it to change apexrl), "sandbox" (apexrl sets it
    for the processes it starts in a sandbox or image: listed, not for users), or
    "credential" (a secret apexrl reads or forwards)."""

    name: str
    help: str
    default: str = ""
    secret: bool = False
    key: str | None = None
    scope: str = "user"


def _s(name: str, help: str, default: str = "", **kw) -> Setting:
    return Setting(name, help, default, **kw)


SETTINGS: tuple[Setting, ...] = (
    # project defaults (also apexrl.toml [defaults])
    _s("APEXRL_JUDGE", "default --judge of `eval run` (a LiteLLM model)", key="judge"),
    _s(
        "APEXRL_JUDGE_API_BASE",
        "default --judge-api-base of `eval run` (an OpenAI-compatible judge URL)",
        key="judge_api_base",
    ),
    _s("APEXRL_WORLDS", "default --worlds of `eval run` (the world store)", key="worlds"),
    _s(
        "APEXRL_JUDGE_CONTEXT_TOKENS",
        "the judge's context window in tokens (default: LiteLLM's for the model, else 128000)",
    ),
    _s(
        "APEXRL_ENDPOINT",
        "default --endpoint of `eval run`; the engine URL the apexrl agent uses when given none",
        key="endpoint",
    ),
    _s(
        "APEXRL_OUTPUT_ROOT",
        "folder a relative `eval run`/`eval regrade` -o RUN_DIR is placed under; a relative "
        "RUN_DIR that eval report/view/regrade or publish read is looked for there when it "
        "is not found here",
        key="output_root",
    ),
    # the command line
    _s("APEXRL_DEBUG", "show tracebacks and third-party logs (as --debug)"),
    _s("APEXRL_PROGRESS_EVERY", "seconds between progress lines off a terminal", "30"),
    _s("APEXRL_PASS_ENV", "host variables a task's ${NAME} may read (A,B; as --pass-env)"),
    # engines
    _s("APEXRL_VLLM_PYTHON", "interpreter with vLLM for --engine vllm (as --vllm-python)"),
    _s("APEXRL_ENGINE_API_KEY", "API key vLLM is started with and sent", secret=True),
    _s(
        "APEXRL_ENGINE_SEED_MAX_PROMPT",
        "longest prompt (tokens) a seeded request may send to an engine started elsewhere",
    ),
    # archipelago, the peer
    _s("APEXRL_ARCHIPELAGO", "archipelago checkout for --grader/--runtime archipelago"),
    _s(
        "APEXRL_ARCHIPELAGO_CACHE",
        "where archipelago's grading runner is built",
        "$XDG_CACHE_HOME/apexrl/archipelago",
    ),
    _s("APEXRL_PEER_DIR", "where archipelago's server runtimes are built", "~/.cache/apexrl/peer"),
    _s("APEXRL_PEER_PYTHON", "Python 3.13 interpreter for archipelago's servers"),
    _s("APEXRL_PYTHON313", "Python 3.13 interpreter for archipelago's grading runner"),
    _s(
        "APEXRL_GRADING_RUNTIME",
        "archipelago checkout or built runtime the local sandbox's grader runs",
    ),
    # local sandbox
    _s("APEXRL_LOCAL_SCRATCH", "where local trial folders go: auto, ram or disk", "auto"),
    _s("APEXRL_LOCAL_WORKDIR", "folder for local trial folders (overrides APEXRL_LOCAL_SCRATCH)"),
    _s(
        "APEXRL_LOCAL_RAM_MIN_FREE",
        "bytes /dev/shm must have free for scratch in RAM",
        "4294967296",
    ),
    _s("APEXRL_LOCAL_FORKSERVER", "0: a fresh sandboxed Python per trial, no fork server", "1"),
    _s("APEXRL_LOCAL_PREWARM", "sandboxes kept ready per work folder", "2"),
    _s("APEXRL_SANDBOX_CPU_SECONDS", "CPU seconds per sandbox process (RLIMIT_CPU)"),
    _s("APEXRL_SANDBOX_FILE_BYTES", "largest file a sandbox writes (RLIMIT_FSIZE)"),
    _s("APEXRL_SANDBOX_MEMORY_BYTES", "address space per sandbox process (RLIMIT_AS)"),
    _s("APEXRL_SANDBOX_NOFILE", "open files per sandbox process (RLIMIT_NOFILE)"),
    _s("APEXRL_SANDBOX_NPROC", "processes per sandbox (RLIMIT_NPROC)"),
    _s("APEXRL_SANDBOX_SCRATCH_BYTES", "bytes a trial may write to its scratch"),
    _s("APEXRL_SANDBOX_SHM_BYTES", "size of a sandbox's /dev/shm"),
    _s("APEXRL_SANDBOX_TRIAL_MEMORY_BYTES", "memory of a whole trial (its cgroup)"),
    _s("APEXRL_TASK_MEMO", "0: Harbor loads and hashes a task in every trial", "1"),
    _s("APEXRL_NATIVE_TAR", "0: no C fast path for tar reading and world copies", "1"),
    _s("APEXRL_RAY_SCRATCH", "a Ray node's cache of tasks, worlds and trial folders"),
    _s("APEXRL_WORLD_CACHE", "unpacked world cache", "$XDG_CACHE_HOME/apexrl/worlds"),
    _s("APEXRL_MODAL_ECR_SECRET", "Modal secret holding ECR credentials", "aws-ecr"),
    # archive limits
    _s("APEXRL_ARCHIVE_MAX_MEMBERS", "most members an archive apexrl extracts may hold"),
    _s("APEXRL_ARCHIVE_MAX_MEMBER_BYTES", "largest member of an archive apexrl extracts"),
    _s("APEXRL_ARCHIVE_MAX_TOTAL_BYTES", "most bytes an archive apexrl extracts may hold"),
    _s("APEXRL_ARCHIVE_MAX_RATIO", "highest compression ratio of an archive apexrl extracts"),
    # registries
    _s("APEXRL_REGISTRY_ENDPOINT", "base URL the registry API calls go to (a mirror, a proxy)"),
    _s("APEXRL_REGISTRY_USERNAME", "user for `image push` to a non-ECR registry"),
    _s("APEXRL_REGISTRY_PASSWORD", "password for `image push` to a non-ECR registry", secret=True),
    _s("APEXRL_REGISTRY_PLAIN_HTTP", "1: plain HTTP for every registry host"),
    _s("APEXRL_REGISTRY_RETRIES", "retries of a registry call"),
    _s("APEXRL_CACHE_DIR", "apexrl's cache folder (registry blobs)", "$XDG_CACHE_HOME/apexrl"),
    # rollouts
    _s("APEXRL_ROLLOUT_GC", "garbage collector tuning of agent loops: tuned or off", "tuned"),
    _s("APEXRL_ROLLOUT_TOKENIZE_THREADS", "tokenizer threads of rollouts (0: auto)", "0"),
    _s("APEXRL_ROLLOUT_TOKENIZE_NICE", "niceness of tokenizer threads", "10"),
    # world tool servers
    _s("APEXRL_TOOL_REPLY_MAX_CHARS", "characters of text in one tool reply", "1000000"),
    _s("APEXRL_TOOL_IMAGE_MAX_BYTES", "bytes of one image in a tool reply", "10485760"),
    _s("APEXRL_CHAT_POST_AS_OWNER", "1: chat posts and reacts as the world's owner"),
    _s("APEXRL_EXCEL_COMPUTE_FORMULAS", "1: spreadsheet reads compute formulas"),
    _s("APEXRL_MAIL_ALL_MBOXES", "1: read every mbox under mail/, not only the first"),
    _s("APEXRL_MAIL_DATES_AS_UTC", "1: search dates without an offset are UTC"),
    _s("APEXRL_MAIL_CREATE_FOLDER", "1: sending mail creates .apps_data/mail/ when missing"),
    _s("APEXRL_OFFICE_REFUSE_OVERWRITE", "1: document tools refuse to overwrite a file"),
    # set by apexrl inside sandboxes and world images
    *(
        _s(name, text, scope="sandbox")
        for name, text in (
            ("APEXRL_CODE_SANDBOX", "the gateway's code tool runs each command in a sandbox"),
            ("APEXRL_CODE_NO_NETWORK", "the gateway's code tool runs without network"),
            ("APEXRL_CODE_EGRESS", "the socket of an online code command's egress proxy"),
            ("APEXRL_CODE_EGRESS_PROXY", "the proxy URL an online code command is given"),
            ("APEXRL_WORLD", "world folder a world image serves"),
            ("APEXRL_WORLD_ID", "world id a world image serves"),
            ("APEXRL_APPS", "apps a world image serves"),
            ("APEXRL_HOST", "address a world image listens on"),
            ("APEXRL_PORT", "port a world image listens on"),
            ("APEXRL_PYTHON", "Python a world image runs"),
            ("APEXRL_TESTS_DIR", "the in-sandbox grader's tests folder"),
            ("APEXRL_WORLD_FS", "the in-sandbox grader's world filesystem"),
            ("APEXRL_WORLD_ROOT", "the in-sandbox grader's world root"),
            ("APEXRL_ANSWER_FILE", "the in-sandbox grader's answer file"),
            ("APEXRL_AGENT_DIR", "the in-sandbox grader's agent logs"),
            ("APEXRL_VERIFIER_DIR", "the in-sandbox grader's output folder"),
        )
    ),
)


def _credentials() -> tuple[Setting, ...]:
    """The secrets apexrl reads or forwards (apexrl.secrets), as settings."""
    from apexrl.secrets import SECRET_ENV_KEYS

    known = {s.name for s in SETTINGS}
    return tuple(
        Setting(
            k,
            "credential (read from the environment, never written)",
            secret=True,
            scope="credential",
        )
        for k in SECRET_ENV_KEYS
        if k not in known
    )


def all_settings() -> tuple[Setting, ...]:
    return SETTINGS + _credentials()


BY_NAME = {s.name: s for s in SETTINGS}
BY_KEY = {s.key: s for s in SETTINGS if s.key}

# name -> where its value came from ("environment", ".env (PATH)", "apexrl.toml (PATH)")
_SOURCES: dict[str, str] = {}


def find_up(name: str, start: Path | None = None) -> Path | None:
    """The first `name` in `start` (the working folder) or a folder above it."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / name).is_file():
            return d / name
    return None


def read_project(path: Path) -> dict[str, str]:
    """apexrl.toml's variables by name; BadRecordError naming the key for an unknown
    key (with the nearest known one), a secret, or a value that is not a scalar."""
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadRecordError(str(path), f"not a readable TOML file: {e}") from None
    out: dict[str, str] = {}
    secrets = {s.name for s in all_settings() if s.secret}
    for table, value in data.items():
        if table not in ("defaults", "env") or not isinstance(value, dict):
            near = difflib.get_close_matches(table, ["defaults", "env"], n=1)
            raise BadRecordError(
                f"{path}: [{table}]",
                "unknown table" + (f"; did you mean [{near[0]}]?" if near else ""),
                hint="apexrl.toml has [defaults] and [env] tables (see `apexrl config`)",
            )
        known = list(BY_KEY) if table == "defaults" else list(BY_NAME)
        for k, v in value.items():
            where = f"{path}: {table}.{k}"
            if k not in known:
                near = difflib.get_close_matches(k, known, n=1)
                raise BadRecordError(
                    where,
                    "unknown key" + (f"; did you mean `{near[0]}`?" if near else ""),
                    hint=f"known keys: {', '.join(known[:8])}{' ...' if len(known) > 8 else ''}",
                )
            name = BY_KEY[k].name if table == "defaults" else k
            if name in secrets:
                raise BadRecordError(
                    where, "a secret does not belong in apexrl.toml", hint="put it in .env"
                )
            if not isinstance(v, str | int | float | bool):
                raise BadRecordError(where, "expected a string or a number")
            out[name] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def apply(start: Path | None = None, environ=None) -> dict[str, str]:
    """Fill the environment from `.env` and `apexrl.toml` (never over a variable the
    environment sets) and record each setting's source. Returns the sources."""
    env = os.environ if environ is None else environ
    _SOURCES.clear()
    for s in all_settings():
        if env.get(s.name):
            _SOURCES[s.name] = "environment"
    dot = find_up(ENV_FILE, start)
    if dot is not None:
        from dotenv import dotenv_values

        for k, v in dotenv_values(dot).items():
            if v is not None and not env.get(k):
                env[k] = v
                _SOURCES[k] = f".env ({dot})"
    project = find_up(PROJECT_FILE, start)
    if project is not None:
        for k, v in read_project(project).items():
            if not env.get(k):
                env[k] = v
                _SOURCES[k] = f"{PROJECT_FILE} ({project})"
    return dict(_SOURCES)


def source_of(name: str, environ=None) -> str:
    env = os.environ if environ is None else environ
    if name in _SOURCES and env.get(name):
        return _SOURCES[name]
    return "environment" if env.get(name) else "default"


def mask(value: str) -> str:
    """A secret as `apexrl config` shows it: set or not, never its characters."""
    return f"set ({len(value)} characters, hidden)" if value else ""


def listing(environ=None) -> list[dict]:
    """Every setting with its value (secrets masked), source, default and meaning."""
    env = os.environ if environ is None else environ
    rows = []
    for s in all_settings():
        value = env.get(s.name, "")
        rows.append(
            {
                "name": s.name,
                "value": mask(value) if s.secret else value,
                "source": source_of(s.name, env),
                "default": s.default,
                "scope": s.scope,
                "toml_key": f"defaults.{s.key}" if s.key else None,
                "help": s.help,
            }
        )
    return rows


def output_path(path: Path, environ=None) -> Path:
    """A relative output folder under APEXRL_OUTPUT_ROOT when that is set."""
    env = os.environ if environ is None else environ
    root = env.get("APEXRL_OUTPUT_ROOT")
    if root and not Path(path).is_absolute() and str(path) != "-":
        return Path(root).expanduser() / path
    return Path(path)


def run_path(path: Path, environ=None) -> Path:
    """A RUN_DIR to read: as given when it exists here, else a relative one under
    APEXRL_OUTPUT_ROOT when that holds it (where `eval run -o` put it); else as given,
    for the command's own "not found" error."""
    path = Path(path)
    if path.exists() or path.is_absolute() or str(path) == "-":
        return path
    under = output_path(path, environ)
    return under if under.exists() else path


def render_markdown() -> str:
    """docs/configuration.md, generated from the registry (tests/test_config.py keeps it
    current: `make config-docs` rewrites it)."""
    lines = [
        "# Configuration",
        "",
        "<!-- generated by `make config-docs` from apexrl/config.py; do not edit -->",
        "",
        "`apexrl config` lists every setting below with its value and where it came from "
        "(secrets masked).",
        "",
        INTRO,
        "",
    ]
    for scope, title in (
        ("user", "Settings"),
        ("credential", "Credentials"),
        ("sandbox", "Set by apexrl inside sandboxes and world images"),
    ):
        lines += [
            f"## {title}",
            "",
            "| variable | apexrl.toml | default | meaning |",
            "|---|---|---|---|",
        ]
        for s in all_settings():
            if s.scope != scope:
                continue
            key = f"`defaults.{s.key}`" if s.key else ("" if s.secret else "`env`")
            default = f"`{s.default}`" if s.default else ""
            lines.append(f"| `{s.name}` | {key} | {default} | {s.help} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # `make config-docs`
    import sys

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/configuration.md")
    target.write_text(render_markdown(), encoding="utf-8")
