"""CLI conventions: version, schema, doctor, errors, exit codes, lazy imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from apexrl import __version__
from apexrl.cli.app import COMMANDS, app


def test_version(runner):
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"apexrl {__version__}"


def test_schema_lists_and_prints(runner):
    listing = runner.invoke(app, ["schema"])
    assert listing.exit_code == 0
    assert "task-metadata" in listing.stdout
    result = runner.invoke(app, ["schema", "trial-result"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert "reward" in schema["properties"]
    assert "schema_version" in schema["properties"]


def test_schema_unknown_name_is_usage_error_with_suggestion(runner):
    result = runner.invoke(app, ["schema", "trial-reslt"])
    assert result.exit_code == 2
    assert "trial-result" in result.stderr
    assert "Traceback" not in result.stderr


def test_doctor_reports_presence_never_values(runner, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_SECRETVALUE123456")
    result = runner.invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["section"] for r in rows} >= {
        "python",
        "native",
        "local",
        "extra",
        "gpu",
        "credentials",
        "tool",
    }
    native = next(r for r in rows if r["section"] == "native")
    assert native["ok"] is True and native["detail"].startswith("built"), native
    scratch = next(r for r in rows if r["section"] == "local" and r["name"] == "scratch")
    assert scratch["ok"] is True and scratch["detail"].split(":")[0] in ("ram", "disk", "set")
    hf = next(r for r in rows if r["section"] == "credentials" and r["name"] == "hf")
    assert hf["ok"] is True
    assert "hf_SECRETVALUE123456" not in result.stdout + result.stderr
    cmds = next(r for r in rows if r["section"] == "apexrl" and r["name"] == "commands")
    assert cmds["ok"] is True and "command groups imported" in cmds["detail"]


def test_every_command_group_imports_and_a_broken_one_is_loud(runner, monkeypatch):
    """A command whose module fails to import is never dropped in silence: it stays a
    command that fails with the reason, and doctor reports it (exit 1)."""
    from apexrl.cli import app as root

    shown = runner.invoke(app, ["--help"]).stdout
    assert all(name in shown for name in root.COMMANDS)
    res = runner.invoke(app, ["doctor", "--json"])
    assert root.BROKEN_COMMANDS == {}, root.BROKEN_COMMANDS
    broken_entry = root.CommandEntry("apexrl.cli.no_such_group:app", "Nothing.")
    monkeypatch.setitem(root.COMMANDS, "no_such_group", broken_entry)
    monkeypatch.setattr(root, "BROKEN_COMMANDS", {})
    res = runner.invoke(app, ["no_such_group"])
    assert res.exit_code == 1 and "apexrl.cli.no_such_group:app failed to import" in res.stderr
    assert "ModuleNotFoundError" in root.BROKEN_COMMANDS["no_such_group"]
    res = runner.invoke(app, ["doctor", "--json"])
    assert res.exit_code == 1 and "no_such_group" in res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    cmds = next(r for r in rows if r["name"] == "commands")
    assert cmds["ok"] is False and "no_such_group" in cmds["detail"]


def test_the_table_summary_is_each_commands_own_help(capsys, monkeypatch):
    """`apexrl --help` lists the table's summaries without importing a command; with every
    command imported, the listing is the same bytes (a summary cannot drift from the help
    of its command)."""
    import typer.main
    from typer import _click

    monkeypatch.setenv("COLUMNS", "100")

    def root_help(root) -> str:
        root.get_help(_click.Context(root, info_name="apexrl"))
        return capsys.readouterr().out

    lazy = typer.main.get_command(app)
    listed = root_help(lazy)
    assert lazy.commands == {} and "Serve a world's MCP tool servers" in listed
    built = typer.main.get_command(app)
    for name in built.list_commands(None):
        assert built.get_command(None, name) is not None
    assert set(built.commands) == set(built.list_commands(None))
    assert root_help(built) == listed


START_UP = """
import json, sys
from typer.testing import CliRunner
from apexrl.cli.app import COMMANDS, app
args = sys.argv[1:]
r = CliRunner().invoke(app, args)
assert r.exit_code == 0, r.output
modules = {e.target.split(":")[0] for e in COMMANDS.values()}
print(json.dumps(sorted(m for m in modules if m in sys.modules)))
"""


@pytest.mark.parametrize(
    ("args", "loaded"),
    [
        (["--help"], []),
        (["--version"], []),
        (["image", "push", "--help"], ["apexrl.cli.image"]),
        (["tasks", "ls", "--help"], ["apexrl.cli.tasks"]),
        # every command of the table: its own module and no other command's
        *(([name, "--help"], [entry.target.split(":")[0]]) for name, entry in COMMANDS.items()),
    ],
)
def test_start_up_imports_only_the_chosen_command(args, loaded):
    """No command module imports another command group: the CLI imports the one a
    command line chooses (none for the root's help), whatever that module imports."""
    p = subprocess.run(
        [sys.executable, "-c", START_UP, *args], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == loaded


def test_help_does_not_import_heavy_libraries():
    code = (
        "import sys\n"
        "from apexrl.cli.app import app\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "heavy = {'torch', 'vllm', 'skyrl', 'ray', 'modal', 'transformers',\n"
        "         'pyarrow', 'harbor', 'mcp', 'boto3'}\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_missing_input_is_usage_error(runner, tmp_path):
    result = runner.invoke(
        app, ["tasks", "convert", str(tmp_path / "nope"), "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    assert "not a directory" in result.stderr


def test_unwritable_output_is_a_clear_error(runner, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = runner.invoke(app, ["tasks", "example", "-o", str(blocker / "sub")])
    assert result.exit_code == 1
    assert str(blocker) in result.stderr and "internal error" not in result.stderr


def test_every_record_has_a_schema(runner):
    from apexrl.schemas import all_schemas

    names = list(all_schemas())
    expected = {"trial-result", "eval-summary", "tito-trajectory", "world-diff", "publish-file"}
    assert expected <= set(names)
    for name in names:
        result = runner.invoke(app, ["schema", name])
        assert result.exit_code == 0, name
        assert json.loads(result.stdout)["type"] == "object"


def _all_commands(group, path=()):
    for name in group.list_commands(None) if hasattr(group, "list_commands") else []:
        cmd = group.get_command(None, name)
        yield (*path, name), cmd
        yield from _all_commands(cmd, (*path, name))


def test_help_looks_like_a_conventional_cli(runner):
    """Flags carry no type, value options show TYPE in caps, arguments are NAME in usage."""
    for args in (["--help"], ["tasks", "convert", "--help"], ["eval", "run", "--help"]):
        r = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert r.exit_code == 0, r.output
        assert "<bool>" not in r.output and "<path>" not in r.output and "<int>" not in r.output
    r = runner.invoke(app, ["tasks", "convert", "--help"], env={"COLUMNS": "200"})
    assert "Usage: apexrl tasks convert [OPTIONS] SRC" in r.output
    assert re.search(r"--out\s+-o\s+PATH", r.output)
    assert re.search(r"--strict\s+Stop at the first bad record", r.output)
    r = runner.invoke(app, ["tasks", "pack", "--help"], env={"COLUMNS": "200"})
    assert re.search(r"--shard-size\s+.*(INTEGER|FLOAT)", r.output)


def test_no_command_help_shows_typer_style_metavars(runner):
    """Every command's help renders without a `<type>` or `{arg}` placeholder."""
    from typer.main import get_command

    root = get_command(app)
    paths = [path for path, _cmd in _all_commands(root)]
    assert ("eval", "run") in paths and ("image", "push") in paths and len(paths) > 30
    for path in paths:
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0, (path, r.output)
        assert not re.search(r"<(bool|path|int|float|str|text)>", r.output), (path, r.output)
        assert not re.search(r"Usage: .*\{[a-z_]+\}", r.output), (path, r.output)


def test_litellm_is_offline_and_quiet_under_apexrl():
    """LiteLLM (the judge; Harbor imports it too) must not try the network for its price
    map nor print warnings into apexrl's stderr (it retried ~8 s offline)."""
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("LITELLM")}
    code = "import apexrl, litellm, os; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])"
    p = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True"
    assert "cost map" not in p.stderr and "LiteLLM" not in p.stderr, p.stderr
