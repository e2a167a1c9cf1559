"""Rendering conventions shared by every command.

stdout carries data: NDJSON when piped or with --json, a Rich table on a
terminal. stderr carries people-facing output: progress, warnings, errors.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console


@cache
def err_console() -> Console:
    from rich.console import Console

    return Console(
        stderr=True, no_color=bool(os.environ.get("NO_COLOR")), highlight=False, soft_wrap=True
    )


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def _as_dict(record: BaseModel | dict) -> dict[str, Any]:
    if isinstance(record, dict):
        return record
    return record.model_dump(mode="json")


def emit_records(
    records: Iterable[BaseModel | dict],
    *,
    json_out: bool = False,
    columns: Sequence[str] | None = None,
    title: str | None = None,
) -> int:
    """Write records to stdout; returns how many. NDJSON streams as records come."""
    count = 0
    if json_out or not stdout_is_terminal():
        out = sys.stdout
        for r in records:
            out.write(orjson.dumps(_as_dict(r)).decode() + "\n")
            count += 1
        out.flush()
        return count
    from rich.console import Console
    from rich.table import Table

    rows = [_as_dict(r) for r in records]
    cols = list(columns or (rows[0].keys() if rows else []))
    table = Table(title=title, show_lines=False)
    for c in cols:
        table.add_column(c, overflow="fold")  # wrap long values; never cut them off
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in cols))
    Console(no_color=bool(os.environ.get("NO_COLOR"))).print(table)
    return len(rows)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | dict):
        return orjson.dumps(value).decode()
    return str(value)


def emit_json(obj: BaseModel | dict) -> None:
    """One JSON document: indented for a person on a terminal, one NDJSON line when piped."""
    option = orjson.OPT_INDENT_2 if stdout_is_terminal() else 0
    sys.stdout.write(orjson.dumps(_as_dict(obj), option=option).decode() + "\n")
    sys.stdout.flush()


def emit_path(path, *, json_out: bool = False, **fields: Any) -> None:
    """A command's output path: the bare path on a terminal, a `{"path": ...}` record
    (absolute, with `fields`) when piped or with --json."""
    from pathlib import Path

    if json_out or not stdout_is_terminal():
        emit_records([{"path": str(Path(path).absolute()), **fields}], json_out=True)
    else:
        sys.stdout.write(f"{path}\n")
        sys.stdout.flush()


def refuse_dash(path, option: str, what: str) -> None:
    """A folder output cannot be stdout: `-o -` there is a usage error, not a folder named -."""
    if str(path) == "-":
        from apexrl.errors import UsageError

        raise UsageError(
            f"{option} - : this command writes {what}, which cannot go to stdout",
            hint=f"pass a folder path to {option}",
        )


_ARGV: list[str] | None = None  # the command line, when run as the `apexrl` program


def set_argv(argv: list[str]) -> None:
    global _ARGV
    _ARGV = list(argv)


def command_line() -> str | None:
    """The command line as a user reruns it (from the folder it ran in), or None when
    the app was not started from a command line (tests calling it in-process)."""
    if _ARGV is None:
        return None
    import shlex

    return f"cd {shlex.quote(os.getcwd())} && " + shlex.join(["apexrl", *_ARGV])


def stdout_reader_gone() -> bool:
    """stdout is a pipe (or socket) whose reading end is closed: a BrokenPipeError came
    from it, not from a connection to a server."""
    import select
    import stat

    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def quiet_broken_pipe() -> int:
    """The reader of stdout went away (`| head`): nothing more to say, exit 0. Later
    writes and the interpreter's final flush go to /dev/null instead of raising."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (captured in tests): nothing to redirect
        pass
    return 0


def stderr_is_plain() -> bool:
    """stderr is plainly not a terminal, as Rich decides it (no TTY and none of the
    variables that make Rich treat a pipe as one): Rich would write no styles there."""
    if os.environ.get("TTY_COMPATIBLE") is not None or os.environ.get("FORCE_COLOR") is not None:
        return False
    try:
        return not sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _is_literal(message: str) -> bool:
    """True when Rich would print `message` unchanged (no markup, no :emoji: code)."""
    if "[" in message or not message.isprintable():
        return False
    if ":" not in message:
        return True
    try:
        from rich._emoji_replace import _emoji_replace
    except ImportError:  # pragma: no cover - a Rich without it: let Rich print
        return False
    return _emoji_replace(message) == message


def info(message: str) -> None:
    # Rich's Console (and its import) only where it would change something: a terminal,
    # markup or emoji codes. Piped plain text is written as Rich writes it.
    if stderr_is_plain() and _is_literal(message):
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
        return
    err_console().print(message)


def warn(message: str) -> None:
    from rich.text import Text

    err_console().print(Text.assemble(("warning: ", "yellow"), message))


def error(message: str) -> None:
    from rich.text import Text

    err_console().print(Text.assemble(("error: ", "bold red"), message))


def progress_every_s() -> float:
    """Seconds between progress lines on a non-terminal stderr (APEXRL_PROGRESS_EVERY)."""
    try:
        return max(float(os.environ.get("APEXRL_PROGRESS_EVERY", "30")), 0.0)
    except ValueError:
        return 30.0


class ProgressLine:
    """Progress for a log file or pipe: one plain line every `every` seconds (and one at
    the end when any was printed), instead of a bar nobody sees."""

    def __init__(self, label: str, total: int | None, every: float | None = None) -> None:
        import time

        self.label, self.total, self.done = label, total, 0
        self.every = progress_every_s() if every is None else every
        self.t0 = self.last = time.monotonic()
        self.printed = False

    def advance(self, n: int = 1, detail: str = "") -> None:
        import time

        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.say(detail)

    def say(self, detail: str = "") -> None:
        import time

        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        extra = f"  {detail}" if detail else ""
        elapsed = time.monotonic() - self.t0
        info(f"{self.label}: {self.done}{of}{pct} in {elapsed:.0f}s{extra}")
        self.printed = True


def progress_bar():
    """The Rich progress bar of every command, on stderr (drawn only when it is a
    terminal): description, bar, done/total, time elapsed and remaining."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = err_console()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )


@contextmanager
def progress(label: str, total: int | None):
    """Progress on stderr; yields an `advance(n=1)` callable. A Rich bar on a terminal,
    a line every APEXRL_PROGRESS_EVERY seconds otherwise. Never past its total."""
    state = {"done": 0}

    def clamp(n: int) -> int:
        if total is not None:
            n = max(min(n, total - state["done"]), 0)
        state["done"] += n
        return n

    if stderr_is_plain():  # Rich would draw nothing there: a periodic line instead
        line = ProgressLine(label, total)

        def tick(n: int = 1) -> None:
            line.advance(clamp(n))

        yield tick
        if line.printed:
            line.say()
        return
    prog = progress_bar()
    with prog:
        task = prog.add_task(label, total=total)

        def advance(n: int = 1) -> None:
            prog.advance(task, clamp(n))

        yield advance
        if total is not None:  # an estimate that ran short still ends full
            prog.update(task, completed=total)


def report_failure(e: BaseException, *, debug: bool = False) -> int | None:
    """Print what a command that raised `e` tells the user; its exit code. None for
    what is not a failure to report (SystemExit and the like: re-raise it).
    ApexError: its message and code. OSError (unreadable input, unwritable output, disk
    full): not a bug, exit 1. KeyboardInterrupt: 130. Anything else is a bug: said so,
    briefly (the traceback only with --debug)."""
    import traceback

    from apexrl.errors import ApexError, ExitCode

    if isinstance(e, ApexError):
        if debug:
            traceback.print_exception(e)
        error(str(e))
        return int(e.code)
    if isinstance(e, BrokenPipeError) and stdout_reader_gone():
        return quiet_broken_pipe()
    if isinstance(e, OSError):
        if debug:
            traceback.print_exception(e)
        where = f" ({e.filename})" if e.filename else ""
        error(f"{e.strerror or e}{where}")
        return int(ExitCode.CHECK_FAILED)
    if isinstance(e, KeyboardInterrupt):
        error("interrupted")
        return 130
    if isinstance(e, Exception):
        if debug:
            traceback.print_exception(e)
        error(f"internal error: {type(e).__name__}: {e} (rerun with --debug)")
        return int(ExitCode.CHECK_FAILED)
    return None
