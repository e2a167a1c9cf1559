"""The engine, environment and agent registries are the one place a name is added: with one
more entry (made before apexrl's other modules load, as a line in the registry file
would), the CLI choices, recipe validation, trial dispatch, preflight and doctor all
know it, and start_engine starts it. Likewise an MCP server's module (its `Server`
declaration) and one more `@SERVER.tool` function reach the gateway, and a metric table
entry reaches summary.json and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from apexrl.engine.registry import ENGINES, engine_choices
from apexrl.engine.serve import start_engine
from apexrl.envs.registry import ENVIRONMENTS
from apexrl.importpath import load

ROOT = str(Path(__file__).resolve().parents[1])  # the scripts import tests.* modules


def run_script(tmp_path: Path, script: str, arg: Path) -> dict:
    """Run `script` in a fresh interpreter (so the entries it adds come before apexrl's
    other modules load), with tmp_path's modules and the repo importable; the JSON of
    its last stdout line."""
    (tmp_path / "script.py").write_text(script)
    p = subprocess.run(
        [sys.executable, str(tmp_path / "script.py"), str(arg)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), ROOT)), "COLUMNS": "200"},
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_every_entry_points_at_real_code():
    import importlib.util

    for e in ENVIRONMENTS.values():
        if e.import_path:
            assert importlib.util.find_spec(e.import_path.split(":")[0]) is not None, e
        if e.preflight:
            assert callable(load(e.preflight)), e
    for e in ENGINES.values():
        assert callable(load(e.launch)), e
    assert engine_choices() == ("auto", "vllm", "local")  # scripted is not a choice


def test_harbor_config_per_environment(tmp_path):
    from apexrl.trial.config import SandboxSettings, TrialConfig
    from apexrl.trial.run import harbor_config

    task = tmp_path / "task"
    task.mkdir()
    seen = {}
    for name in ENVIRONMENTS:
        cfg = TrialConfig(
            environment=name,
            worlds_dir=tmp_path,
            logs_dir=tmp_path / "logs" / name,
            sandbox=SandboxSettings(cpus=2, memory_mb=4096),
            pass_env=["X"],
        )
        env = harbor_config(task, cfg).environment
        seen[name] = (env.import_path, env.type, env.kwargs)
    assert seen["local"][0] == "apexrl.envs.local:LocalEnvironment"
    # apexrl's own runs grade on the host: the agent's network is what the task asks for
    assert seen["local"][2] == {
        "worlds_dir": str(tmp_path.resolve()),
        "pass_env": ["X"],
        "agent_network": "explicit",
    }
    assert seen["modal"][2]["agent_network"] == "explicit"
    assert seen["modal"][0] == "apexrl.envs.modal:ModalEnvironment"
    assert seen["modal"][2]["cpus"] == 2 and seen["modal"][2]["memory_mb"] == 4096
    assert str(seen["podman"][1].value if seen["podman"][1] else "") == "podman"
    assert seen["docker"][0] is None


def test_scripted_engine_starts_through_the_registry():
    running = start_engine("unused", engine="scripted", served_model_name="m9", max_model_len=512)
    try:
        assert (running.kind, running.model, running.max_model_len) == ("scripted", "m9", 512)
        from apexrl.engine.protocol import http_health

        assert http_health(running.url)
    finally:
        running.stop()


ONE_MORE = textwrap.dedent(
    """
    import json, os, sys
    from apexrl.envs import registry as envs
    from apexrl.engine import registry as engines
    from apexrl.agent import registry as agents
    agents.AGENTS["fakeagent"] = agents.AgentEntry("fakeagent", "fake_env_mod:FakeAgent")
    envs.ENVIRONMENTS["fakeenv"] = envs.EnvironmentEntry(
        "fakeenv", "a test environment", import_path="fake_env_mod:FakeEnv",
        preflight="fake_env_mod:check", tools=("fake-tool",), credentials=("FAKE_KEY",),
        extra="fakeextra", modules=("no_such_env_module_xyz",))
    engines.ENGINES["fakeeng"] = engines.EngineEntry(
        "fakeeng", "a test engine", launch="fake_env_mod:launch", extra="fake",
        modules=("json",), preflight_modules=("no_such_module_xyz",))
    out = {}
    from typer.testing import CliRunner
    from apexrl.cli.app import app
    r = CliRunner()
    out["eval_help"] = r.invoke(app, ["eval", "run", "--help"]).output
    out["serve"] = r.invoke(app, ["engine", "serve", "m", "--engine", "nope"]).stderr
    from apexrl.trial.config import TrialConfig
    from apexrl.train.recipe import AgentSection
    from apexrl.trial.run import harbor_config
    cfg = TrialConfig(environment="fakeenv", agent="fakeagent", logs_dir=sys.argv[1] + "/logs")
    AgentSection(environment="fakeenv", agent="fakeagent")
    hc = harbor_config(sys.argv[1], cfg)
    out["import_path"] = hc.environment.import_path
    out["agent_path"] = [hc.agent.import_path, sorted(hc.agent.kwargs)[:3]]
    from apexrl.envs.preflight import check_environment
    from apexrl.eval.preflight import check_engine
    out["preflight"] = [p.what for p in check_environment("fakeenv", {})]
    out["engine_preflight"] = [p.what for p in check_engine("fakeeng")]
    from apexrl import doctor
    out["doctor"] = ["fake-tool" in doctor.TOOLS, doctor.CREDENTIALS.get("fakeenv"),
                     doctor.EXTRAS.get("fake"), doctor.EXTRAS.get("fakeextra")]
    from apexrl.errors import UsageError
    from apexrl.trial.config import TrialSpec
    try:  # the entry does not run archipelago's servers: refused by the spec itself
        TrialSpec(environment="fakeenv", runtime="archipelago")
    except UsageError as e:
        out["runtime"] = [e.message, e.hint]
    TrialSpec(environment="local", runtime="archipelago")
    try:
        AgentSection(environment="fakeenv", runtime="archipelago")
    except ValueError as e:
        out["recipe_runtime"] = "environment = 'fakeenv' cannot" in str(e)
    from apexrl.engine.serve import start_engine
    running = start_engine("x", engine="fakeeng")
    out["engine"] = [running.kind, running.model]
    running.stop()
    print(json.dumps(out))
    """
)

FAKE_MOD = textwrap.dedent(
    """
    from apexrl.envs.preflight import Problem

    class FakeEnv:
        pass

    def check(name, env):
        return [Problem(f"{name} is checked", "nothing to fix")]

    def launch(opts):
        from tests.scripted_engine import ScriptedEngine
        return ScriptedEngine([], model="fake-served").start()
    """
)


def test_one_registry_entry_reaches_every_consumer(tmp_path):
    (tmp_path / "fake_env_mod.py").write_text(FAKE_MOD)
    out = run_script(tmp_path, ONE_MORE, tmp_path)
    assert all(n in out["eval_help"] for n in ("fakeenv", "fakeeng", "fakeagent"))
    assert out["agent_path"] == ["fake_env_mod:FakeAgent", ["budgets", "chat_template", "endpoint"]]
    assert "fakeeng" in out["serve"]  # the usage error lists the registry's choices
    assert out["import_path"] == "fake_env_mod:FakeEnv"
    assert out["preflight"] == [
        "--env fakeenv needs the no_such_env_module_xyz package",  # the entry's extra
        "fakeenv is checked",  # the entry's own check
    ]
    assert out["engine_preflight"] and "no_such_module_xyz" in out["engine_preflight"][0]
    assert out["doctor"] == [True, ["FAKE_KEY"], ["json"], ["no_such_env_module_xyz"]]
    assert out["runtime"] == [
        "--runtime archipelago runs archipelago's servers in the local sandbox, "
        "not in --env fakeenv",
        "use --env local, or --runtime apexrl",
    ]
    assert out["recipe_runtime"] is True
    assert out["engine"] == ["fakeeng", "fake-served"]


ONE_MORE_SERVER = textwrap.dedent(
    """
    import asyncio, dataclasses, json, sys
    from pathlib import Path
    from apexrl.worlds import surface
    surface.SURFACES["archipelago"] = dataclasses.replace(
        surface.ARCHIPELAGO, modules=(*surface.ARCHIPELAGO.modules, "fake_notes_server"))
    from mcp import Client
    from apexrl.errors import UsageError
    from apexrl.worlds.gateway import build_gateway, serve_in_thread
    from apexrl.worlds.world import open_world, resolve_apps

    out = {}
    try:
        resolve_apps(["nope"])
    except UsageError as e:
        out["hint"] = e.hint
    # as an environment's gateway opens a world: its apps from its own world.json
    world = open_world(Path(sys.argv[1]) / "world")
    gw = build_gateway(world, strict=True)
    out["apps"] = world.apps
    out["health"] = gw.health()["servers"]["notes"]

    async def session(url):
        async with Client(url) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            ok = await c.call_tool("notes_read_note", {"name": "q3.txt"})
            bad = await c.call_tool("notes_read_note", {"name": "missing.txt"})
        return {
            "tools": sorted(listed),
            "schema": listed["notes_read_note"].input_schema["properties"],
            "description": listed["notes_list_notes"].description,
            "answer": [ok.is_error, ok.content[0].text],
            "failure": [bad.is_error, bad.content[0].text],
        }

    with serve_in_thread(gw) as running:
        out["n_tools"] = running.n_tools
        out.update(asyncio.run(session(running.url)))
    print(json.dumps(out))
    """
)

FAKE_SERVER = textwrap.dedent(
    '''
    from typing import Annotated

    from pydantic import Field

    from apexrl.worlds.servers import Failed, Server, Style

    SERVER = Server("notes", app="notes", aliases=("notebook",))


    @SERVER.tool
    def list_notes(world) -> str:
        """The notes' file names, one per line."""
        return "\\n".join(sorted(p.name for p in (world.fs_root / "notes").iterdir()))


    @SERVER.tool
    def read_note(world, name: Annotated[str, Field(description="A note's file name.")]) -> str:
        """A note's text."""
        p = world.fs_path(f"notes/{name}")
        if not p.is_file():
            raise Failed(f"No note {name}", Style.INTERNAL_ERROR)
        return p.read_text()


    def probe(world):
        return f"{len(list((world.fs_root / 'notes').glob('*.txt')))} notes"
    '''
)


def test_one_server_module_reaches_the_world_gateway(tmp_path):
    """A server is its module (its `Server` declaration, its app's other names included)
    named in the surface: a world naming the app mounts it, and its tools are listed and
    answer over MCP."""
    notes = tmp_path / "world" / "filesystem" / "notes"
    notes.mkdir(parents=True)
    (notes / "q3.txt").write_text("close the books by Friday")
    (tmp_path / "world" / "world.json").write_text(json.dumps({"apps": ["Notebook", "files"]}))
    (tmp_path / "fake_notes_server.py").write_text(FAKE_SERVER)
    out = run_script(tmp_path, ONE_MORE_SERVER, tmp_path)
    assert out["hint"].endswith(", code, notes")  # the known apps, in mount order
    assert out["apps"] == ["files", "notes"]
    assert out["health"] == {
        "name": "notes",
        "ok": True,
        "detail": "1 notes",
        "tools": ["notes_list_notes", "notes_read_note"],
    }
    assert {"notes_list_notes", "notes_read_note", "filesystem_list_files"} <= set(out["tools"])
    assert out["n_tools"] == len(out["tools"]) == 8  # filesystem's 6 and notes' 2
    assert out["schema"] == {"name": {"type": "string", "description": "A note's file name."}}
    assert out["description"] == "The notes' file names, one per line."
    assert out["answer"] == [False, "close the books by Friday"]
    assert out["failure"] == [
        True,
        "Internal error: Error calling tool 'read_note': No note missing.txt",
    ]


ONE_MORE_TOOL = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from mcp import Client
    from apexrl.worlds.gateway import build_gateway, serve_in_thread
    from apexrl.worlds.servers.archipelago.filesystem import SERVER
    from apexrl.worlds.world import World, open_world


    @SERVER.tool
    def count_files(world: World, suffix: str = "") -> str:
        \"\"\"How many files under the world's files folder end with `suffix`.\"\"\"
        return str(sum(1 for p in world.fs_root.rglob(f"*{suffix}") if p.is_file()))


    world = open_world(Path(sys.argv[1]) / "world")
    gw = build_gateway(world, apps=["files"], strict=True)

    async def session(url):
        async with Client(url) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            all_files = await c.call_tool("filesystem_count_files", {})
            txt = await c.call_tool("filesystem_count_files", {"suffix": ".txt"})
        return {
            "tools": list(listed),
            "schema": listed["filesystem_count_files"].input_schema,
            "description": listed["filesystem_count_files"].description,
            "answers": [all_files.content[0].text, txt.content[0].text],
        }

    with serve_in_thread(gw) as running:
        out = asyncio.run(session(running.url))
    out["health"] = gw.health()["servers"]["filesystem"]["tools"]
    print(json.dumps(out))
    """
)


def test_one_decorated_function_adds_a_tool(tmp_path):
    """Adding a tool to a server is one `@SERVER.tool` function: the gateway lists it after
    the server's own tools (its world parameter not in the schema) and answers a call."""
    files = tmp_path / "world" / "filesystem"
    (files / "sub").mkdir(parents=True)
    (files / "a.txt").write_text("a")
    (files / "sub" / "b.txt").write_text("b")
    (files / "c.md").write_text("c")
    (tmp_path / "world" / "world.json").write_text(json.dumps({"apps": ["files"]}))
    out = run_script(tmp_path, ONE_MORE_TOOL, tmp_path)
    assert out["tools"][-1] == "filesystem_count_files"
    assert out["health"][-1] == "filesystem_count_files" and len(out["health"]) == 7
    assert out["schema"] == {
        "type": "object",
        "properties": {"suffix": {"default": "", "type": "string"}},
    }
    assert out["description"].startswith("How many files under the world's files folder")
    assert out["answers"] == ["3", "2"]


ONE_METRIC = textwrap.dedent(
    """
    import json, sys
    from apexrl.eval import metric_table as table
    table.METRICS["never_passed"] = table.MetricKind(
        "never_passed", "never passed", lambda t, k: (t.c == 0).astype(float))
    from typer.testing import CliRunner
    from apexrl.cli.app import app
    from apexrl.eval import report
    from apexrl.schemas import all_schemas
    from tests.eval.synthetic_run import write_run
    run = sys.argv[1]
    write_run(run, n_tasks=12, attempts=2)  # summary.json as the runner writes it
    s = report.load_run(run).summary
    def rep(*args):
        return CliRunner().invoke(app, ["eval", "report", *args, "-o", "-"]).stdout

    out = {
        "summary_rows": report.summary_rows(s),
        "domain_head": report.domain_rows(s)[0],
        "json": json.loads(rep(run, "-f", "json")),
        "compare_json": json.loads(rep(run, run, "-f", "json")),
        "compare_md": [x for x in rep(run, run, "-f", "md").splitlines() if "never passed" in x],
        "schema": sorted(all_schemas()["eval-summary"].model_json_schema()["properties"]),
    }
    print(json.dumps(out))
    """
)


def test_one_metric_entry_reaches_summary_report_and_json(tmp_path):
    """One more MetricKind in the table (before apexrl's other modules load) is a field of
    summary.json and of each domain's figures, a row of the report and of a comparison,
    and a key of the report's JSON; its figure is the mean of its per-task values."""
    from apexrl.eval import resume
    from apexrl.eval.metrics import Columns, TaskTable

    run = tmp_path / "run"
    out = run_script(tmp_path, ONE_METRIC, run)
    # the expected figure, from the run's rows without the new metric
    tasks = TaskTable.from_columns(Columns.from_table(resume.read_results_table(run)))
    expected = float((tasks.c == 0).mean())
    assert 0 < expected < 1  # the figure tells tasks apart

    summary = json.loads((run / "summary.json").read_text())
    keys = list(summary)
    assert keys[keys.index("mean_score") + 1] == "never_passed"  # in the table's order
    m = summary["never_passed"]
    assert abs(m["value"] - expected) < 1e-12 and m["ci_low"] <= m["value"] <= m["ci_high"]
    assert all("never_passed" in g for g in summary["per_domain"].values())
    assert out["json"]["summary"]["never_passed"] == m
    assert "never_passed" in out["schema"]

    label = "never passed"
    pct = [f"{100 * m[f]:.1f}" for f in ("value", "ci_low", "ci_high")]
    assert [label, f"{pct[0]}% [{pct[1]}, {pct[2]}]"] in out["summary_rows"]
    head = ["domain", "tasks", "Pass@1", "mean score", label, "Pass@2", "Pass^2"]
    assert out["domain_head"] == head  # the k columns last, as before
    delta = out["compare_json"]["comparison"]["overall"]["metrics"]["never_passed"]
    assert abs(delta["a"] - m["value"]) < 1e-12 and delta["a"] == delta["b"]
    assert delta["delta"] == 0.0
    assert len(out["compare_md"]) == 1 + len(summary["per_domain"])  # all, then each domain
