"""Root of the `apexrl` command: global options, error handling, and the command table.

The command table names each command by `"module:attr"` with the one line `apexrl --help`
shows for it. Only the command a command line chooses is imported (`apexrl image push`
loads `apexrl.cli.image` and nothing of `eval`, `train` or `world`); `apexrl --help` lists
the table without importing any command module. `tests/test_cli_basics.py` checks that
each summary is what the command's own help says and that start-up imports no command.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import typer
from typer import _click
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from apexrl import __version__
from apexrl.cli import help_style, output

help_style.install()

_state = {"debug": bool(os.environ.get("APEXRL_DEBUG"))}


@dataclass(frozen=True)
class CommandEntry:
    """One top-level command: where it lives (a Typer app is a group of commands, a
    function is one command) and its line in `apexrl --help`."""

    target: str
    summary: str


# In the order `apexrl --help` lists them.
COMMANDS: dict[str, CommandEntry] = {
    "schema": CommandEntry(
        "apexrl.cli.schema:schema",
        "Print the JSON Schema of an artifact record (omit NAME to list names).",
    ),
    "doctor": CommandEntry(
        "apexrl.cli.doctor:doctor",
        "Report Python, optional extras, GPUs, tools and which credentials are set.",
    ),
    "train": CommandEntry(
        "apexrl.cli.train:app",
        "Train: RL from a recipe (`apexrl train RECIPE`), the supervised warm start (`train "
        "sft`), a merged checkpoint from a LoRA run (`train export`).",
    ),
    "tasks": CommandEntry(
        "apexrl.cli.tasks:app", "Convert, pack, unpack, validate and split task datasets."
    ),
    "world": CommandEntry(
        "apexrl.cli.world:app",
        "Serve a world's MCP tool servers, snapshot and diff world state, pack world images.",
    ),
    "image": CommandEntry("apexrl.cli.image:app", "Push world images to ECR or any OCI registry."),
    "tito": CommandEntry(
        "apexrl.cli.tito:app",
        "Token-in/token-out (TITO): check that tokenizer, chat template and engine agree.",
    ),
    "engine": CommandEntry(
        "apexrl.cli.engine:app",
        "Inference engines: vLLM (GPU, or its CPU build from `make vllm`), a local CPU engine "
        "for small checkpoints (same /v1/completions contract).",
    ),
    "eval": CommandEntry(
        "apexrl.cli.eval:app",
        "Evaluate a model on a task dataset (Pass@1, Pass@k, Pass^k) and report runs.",
    ),
    "peer": CommandEntry(
        "apexrl.cli.peer:app",
        "Mercor's archipelago, the peer apexrl is measured against: fetch it at a pinned commit.",
    ),
    "plan": CommandEntry("apexrl.cli.plan:app", "Capacity planning: KV-cache rollout concurrency."),
    "config": CommandEntry(
        "apexrl.cli.config:config",
        "List every setting and environment variable with its value and source.",
    ),
    "publish": CommandEntry(
        "apexrl.cli.publish:app",
        "Publish checkpoints, eval traces and task datasets to the Hugging Face Hub (redacted, "
        "resumable, verified).",
    ),
}
# commands whose module failed to import: name -> why. Never dropped in silence: the
# command stays and fails with the reason (exit 1), and `apexrl doctor` reports it.
BROKEN_COMMANDS: dict[str, str] = {}


def _noop() -> None:
    pass


def build_command(name: str, entry: CommandEntry) -> _click.Command:
    """The click command for one table entry, built as `add_typer`/`command` on the root
    would build it; a module that fails to import gives a command that says why."""
    from apexrl.importpath import load

    holder = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    holder.callback()(_noop)
    try:
        obj = load(entry.target)
    except Exception as e:  # any failure: kept, reported, never dropped
        why = f"{entry.target} failed to import: {type(e).__name__}: {e}"
        BROKEN_COMMANDS[name] = why

        def broken() -> None:
            output.error(why)
            raise typer.Exit(1)

        holder.command(name, help=f"(unavailable: {why})")(broken)
    else:
        if isinstance(obj, typer.Typer):
            holder.add_typer(obj, name=name)
        else:
            holder.command(name)(obj)
    return typer.main.get_command(holder).commands[name]


class ApexGroup(TyperGroup):
    """The root group: commands from the table, imported when chosen; ApexError turned
    into a message + exit code (traceback only with --debug)."""

    _listing = False  # while the help lists commands: their summaries, nothing imported

    def list_commands(self, ctx) -> list[str]:
        return [*COMMANDS, *(n for n in self.commands if n not in COMMANDS)]

    def get_command(self, ctx, cmd_name: str):
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        entry = COMMANDS[cmd_name]
        if self._listing:
            return TyperCommand(cmd_name, help=entry.summary)
        self.commands[cmd_name] = build_command(cmd_name, entry)
        return self.commands[cmd_name]

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except _click.exceptions.UsageError as e:  # Typer suggests from the commands built
            if args and "Did you mean" not in e.message:  # so far: from the table instead
                from difflib import get_close_matches

                if matches := get_close_matches(args[0], self.list_commands(ctx)):
                    suggestions = ", ".join(f"{m!r}" for m in matches)
                    e.message = f"{e.message.rstrip('.')}. Did you mean {suggestions}?"
            raise

    def format_help(self, ctx, formatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def load_all(self) -> dict[str, str]:
        """Import every command (`apexrl doctor`): the ones that failed, name -> why."""
        for name in COMMANDS:
            self.get_command(None, name)
        return {n: why for n, why in BROKEN_COMMANDS.items() if n in COMMANDS}

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except BaseException as e:
            code = output.report_failure(e, debug=_state["debug"])
            if code is None:
                raise
            raise typer.Exit(code) from None


app = typer.Typer(
    cls=ApexGroup,
    name="apexrl",
    help="Post-train knowledge-work agents with RL: tasks, worlds, images, TITO, train, eval.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,  # static scripts ship in completions/ (make completions)
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"apexrl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_version, is_eager=True, help="Print the version."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    if debug:
        _state["debug"] = True
        os.environ["APEXRL_DEBUG"] = "1"
        os.environ["LITELLM_LOG"] = "DEBUG"  # third-party logs only with --debug
    from apexrl import config

    # .env and the project's apexrl.toml fill the environment before the command's own
    # options read it (their envvar defaults): one configuration layer (apexrl.config)
    config.apply()


def quiet_third_party_bars() -> None:
    """Off a terminal, libraries' own progress bars (tqdm in transformers and
    huggingface_hub, also in engines this process starts) are noise in a log: off."""
    if output.stderr_is_plain():
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main() -> None:
    output.set_argv(sys.argv[1:])
    quiet_third_party_bars()
    try:
        app(prog_name="apexrl")
    finally:  # output still buffered when its reader left (`| head`): not an error
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            output.quiet_broken_pipe()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
