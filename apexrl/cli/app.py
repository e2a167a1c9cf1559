"""Root of the `apexrl` command: global options, error handling, command groups."""

from __future__ import annotations

import os
import sys

import typer
from typer.core import TyperGroup
from typer.exceptions import TyperException

from apexrl import __version__
from apexrl.cli import help_style, output
from apexrl.cli.groups import COMMAND_GROUPS

help_style.install()

_state = {"debug": bool(os.environ.get("APEXRL_DEBUG"))}


class ApexGroup(TyperGroup):
    """Turns ApexError into a message + exit code (traceback only with --debug)."""

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


def _register() -> None:
    # Each group module is light: heavy libraries load inside the commands.
    from apexrl.cli import doctor, schema, tasks

    app.add_typer(tasks.app, name="tasks")
    app.command("schema")(schema.schema)
    app.command("doctor")(doctor.doctor)
    for name, attr in COMMAND_GROUPS.items():
        register_group(app, name, attr)  # a failure is kept in BROKEN_GROUPS (cli/groups.py)


def register_group(root: typer.Typer, name: str, attr: str) -> None:
    from apexrl.cli.groups import BROKEN_GROUPS
    from apexrl.importpath import load

    try:
        obj = load(f"apexrl.cli.{name}:{attr}")
    except Exception as e:  # any failure: kept, reported, never dropped
        why = f"apexrl.cli.{name}:{attr} failed to import: {type(e).__name__}: {e}"
        BROKEN_GROUPS[name] = why

        def broken() -> None:
            output.error(why)
            raise typer.Exit(1)

        root.command(name, help=f"(unavailable: {why})")(broken)
        return
    if attr == "app":
        root.add_typer(obj, name=name)
    else:
        root.command(name)(obj)


_register()


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
