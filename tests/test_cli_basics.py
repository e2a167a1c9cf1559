"""CLI conventions: version, schema, doctor, errors, exit codes, lazy imports."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from apexrl import __version__
from apexrl.cli.app import app


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
    """A command group whose module fails to import is never dropped in silence: it stays
    a command that fails with the reason, and doctor reports it (exit 1)."""
    import typer

    from apexrl.cli import app as root
    from apexrl.cli import groups

    assert groups.BROKEN_GROUPS == {}
    shown = runner.invoke(app, ["--help"]).stdout
    assert all(name in shown for name in groups.COMMAND_GROUPS)
    broken: dict[str, str] = {}
    monkeypatch.setattr(groups, "BROKEN_GROUPS", broken)
    other = typer.Typer()
    other.callback()(lambda: None)
    root.register_group(other, "no_such_group", "app")
    assert "ModuleNotFoundError" in broken["no_such_group"]
    res = runner.invoke(other, ["no_such_group"])
    assert res.exit_code == 1 and "apexrl.cli.no_such_group:app failed to import" in res.stderr
    res = runner.invoke(app, ["doctor", "--json"])
    assert res.exit_code == 1 and "no_such_group" in res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    cmds = next(r for r in rows if r["name"] == "commands")
    assert cmds["ok"] is False and "no_such_group" in cmds["detail"]


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
    for name, cmd in getattr(group, "commands", {}).items():
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
    for path, _cmd in _all_commands(root):
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
