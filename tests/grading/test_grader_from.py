"""`apexrl tasks convert --grader-from PATH`: tasks whose own tests/ run archipelago's
grading runner, the way the recipe's tasks do.

The peer test is the whole path with real components: APEX-layout data -> convert
--grader-from (the checkout's grading/ vendored into each task) -> pack (the recipe's
Parquet format) -> unpack -> a Harbor trial through apexrl's local sandbox with
Harbor's own verifier, which runs tests/test.sh inside the sandbox: the runner's
Python 3.13 venv bound read-only (grading_runtime), the judge (apexrl's scripted
engine, a marker judge) reached over the verifier phase's network. The oracle scores
1.0; an empty answer scores 0. The rest checks the layout and the refusals with a
stand-in checkout laid out as archipelago's (our own text).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from apexrl.cli.app import app
from tests.conftest import make_task, write_apex

SECRET = "sk-gf-secret-7c41d9"  # the judge key: must never land in the dataset or logs
MARKERS = {"GF-TAG-ANS": "MK-GF-ANS-41", "GF-TAG-NEW": "MK-GF-NEW-77", "GF-TAG-MOD": "MK-GF-MOD-55"}


def expert_data(root: Path) -> Path:
    """Two tasks: an answer-only one (no snapshot) and a file one that creates a docx
    and edits a world file (the initial snapshot tells created from modified)."""
    from tests.grading.parity_matrix import docx_plain

    answer = make_task(
        1,
        "world_a",
        "law",
        rubric=[{"verifier_id": "gf-ans", "criteria": "GF-TAG-ANS: the answer names the cap"}],
        gold_response="The cap is MK-GF-ANS-41.",
    )
    files = make_task(
        2,
        "world_a",
        "law",
        task_name="Memo and readme",
        rubric=[
            {"verifier_id": "gf-new", "criteria": "GF-TAG-NEW: a memo states the cap"},
            {"verifier_id": "gf-mod", "criteria": "GF-TAG-MOD: the readme is updated"},
        ],
        gold_response="Done: see the memo.",
        gold_response_type="file",
        expected_output="make_new_doc",
    )
    src = write_apex(root, [answer, files])
    gold = src / "gold_files" / files["task_id"]
    (gold / "outputs").mkdir(parents=True)
    (gold / "outputs" / "memo.docx").write_bytes(docx_plain("The cap is MK-GF-NEW-77."))
    (gold / "readme.txt").write_text("world law-alpha-llp\nupdated: MK-GF-MOD-55\n")
    return src


def convert(runner, src: Path, out: Path, checkout, *more: str) -> list[dict]:
    res = runner.invoke(
        app, ["tasks", "convert", str(src), "-o", str(out), "--grader-from", str(checkout), *more]
    )
    assert res.exit_code == 0, res.output
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def stand_in_checkout(root: Path) -> Path:
    """A folder laid out as an archipelago checkout (grading/ with runner/, pyproject,
    uv.lock), with our own placeholder text, and a .env holding a secret."""
    g = root / "grading"
    (g / "runner" / "helpers").mkdir(parents=True)
    (g / "runner" / "main.py").write_text("# stand-in runner entry point\n")
    (g / "runner" / "helpers" / "x.py").write_text("VALUE = 1\n")
    (g / "runner" / "__pycache__").mkdir()
    (g / "runner" / "__pycache__" / "main.cpython-313.pyc").write_bytes(b"\0")
    (g / "pyproject.toml").write_text('[project]\nname = "stand-in"\n')
    (g / "uv.lock").write_text("version = 1\n")
    (g / ".env").write_text(f"GOOGLE_API_KEY={SECRET}\n")
    return root


def all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_grader_from_layout(runner, tmp_path):
    import tomllib

    src = expert_data(tmp_path / "apex")
    checkout = stand_in_checkout(tmp_path / "checkout")
    recs = convert(runner, src, tmp_path / "tasks", checkout)
    assert len(recs) == 2
    by_name = {r["task_name"]: tmp_path / "tasks" / r["path"] for r in recs}
    answer, files = by_name["Task number 1"], by_name["Memo and readme"]
    for task in (answer, files):
        tests = task / "tests"
        assert (tests / "runner" / "runner" / "main.py").is_file()
        assert (tests / "runner" / "uv.lock").is_file()
        assert not (tests / "runner" / ".env").exists()  # the user's secrets stay home
        assert not list((tests / "runner").rglob("__pycache__"))
        assert "archipelago's grading runner" in (tests / "test.sh").read_text()
        assert (tests / "test.sh").stat().st_mode & 0o111
        ver = json.loads((tests / "archipelago" / "verifiers.json").read_text())
        assert all(v["eval_config_id"] == "ec_output_llm" for v in ver)
        assert ver[0]["verifier_values"]["is_primary_objective"] is True
        cfg = tomllib.loads((task / "task.toml").read_text())
        # by default only the grading gets network; the agent's code stays offline
        assert cfg["environment"]["network_mode"] == "no-network"
        assert cfg["verifier"]["network_mode"] == "public"
        assert cfg["verifier"]["env"]["GRADING_API_KEY"] == "${GRADING_API_KEY:-}"
        assert SECRET.encode() not in all_bytes(task)
    # the initial snapshot only where a criterion reads files: the world and task files
    assert not (answer / "tests" / "archipelago" / "initial_snapshot.zip").exists()
    import zipfile

    with zipfile.ZipFile(files / "tests" / "archipelago" / "initial_snapshot.zip") as z:
        names = sorted(z.namelist())
        assert names == [".apps_data/mail/inbox.mbox", "filesystem/readme.txt"]
        assert z.read("filesystem/readme.txt") == b"world law-alpha-llp\n"
    src_json = json.loads((files / "tests" / "archipelago" / "source.json").read_text())
    assert src_json["initial_snapshot"] is True and len(src_json["content_key"]) == 64
    # the recipe's way, asked for: one policy for the trial (Modal, docker keep one)
    recs = convert(runner, src, tmp_path / "whole", checkout, "--grader-network", "public")
    cfg = tomllib.loads((tmp_path / "whole" / recs[0]["path"] / "task.toml").read_text())
    assert cfg["environment"]["network_mode"] == "public"
    assert "network_mode" not in cfg["verifier"]


@pytest.mark.parametrize("kind", ["missing", "file", "no_grading", "parent", "network"])
def test_bad_grader_from_path_exits_2_naming_the_fix(runner, tmp_path, kind):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "law")])
    path = tmp_path / "where"
    more = []
    if kind == "network":
        stand_in_checkout(path)
        more = ["--grader-network", "sometimes"]
    elif kind == "file":
        path.write_text("x")
    elif kind == "no_grading":
        path.mkdir()
    elif kind == "parent":
        stand_in_checkout(path / "archipelago")
    out = tmp_path / "tasks"
    res = runner.invoke(
        app, ["tasks", "convert", str(src), "-o", str(out), "--grader-from", str(path), *more]
    )
    assert res.exit_code == 2, res.output
    assert ("--grader-network" if kind == "network" else "--grader-from") in res.output
    assert "hint:" in res.output
    if kind == "parent":
        assert f"did you mean {path / 'archipelago'}" in res.output
    assert not out.exists()  # nothing written


def test_grader_network_needs_grader_from(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "law")])
    args = ["tasks", "convert", str(src), "-o", str(tmp_path / "t"), "--grader-network", "verifier"]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--grader-from" in res.output


# --- the peer: archipelago's runner inside apexrl's local sandbox -------------------------


def harbor_trial(
    task: Path, worlds: Path, logs: Path, checkout: str, answer: str | None, commands=()
):
    """A Harbor trial through apexrl's local environment with Harbor's own verifier
    (tests/test.sh in the sandbox); the oracle, or a scripted agent's answer."""
    from harbor.models.trial.config import AgentConfig, VerifierConfig
    from harbor.trial.trial import Trial

    from apexrl.trial.config import TrialConfig
    from apexrl.trial.run import harbor_config

    hc = harbor_config(task, TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=logs))
    hc.verifier = VerifierConfig()
    hc.environment.kwargs["grading_runtime"] = checkout
    if answer is not None:
        hc.agent = AgentConfig(
            import_path="tests.trial.agents:ScriptAgent",
            kwargs={"answer": answer, "commands": list(commands)},
        )

    async def go():
        return await (await Trial.create(hc)).run()

    return asyncio.run(go())


@pytest.mark.peer  # archipelago's grading runner (make peer-grader)
@pytest.mark.timeout(1200)
def test_recipe_dataset_grades_with_the_peer_runner_in_the_local_sandbox(
    runner, tmp_path, archipelago_checkout, monkeypatch
):
    import os

    from tests.scripted_engine import ScriptedEngine, marker_judge

    os.environ["HARBOR_TELEMETRY"] = "0"
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(tmp_path / "cache"))
    src = expert_data(tmp_path / "apex")
    convert(runner, src, tmp_path / "converted", archipelago_checkout)
    ds, tasks_dir = tmp_path / "ds", tmp_path / "tasks"
    res = runner.invoke(app, ["tasks", "pack", str(tmp_path / "converted"), "-o", str(ds)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["tasks", "unpack", str(ds), "-o", str(tasks_dir)])
    assert res.exit_code == 0, res.output
    tasks = sorted(p for p in (tmp_path / "tasks").iterdir() if (p / "task.toml").is_file())
    assert len(tasks) == 2
    for t in tasks:
        assert SECRET.encode() not in all_bytes(t)

    judge = ScriptedEngine([], chat=marker_judge(MARKERS)).start()
    try:
        monkeypatch.setenv("GRADING_MODEL", "openai/scripted")
        monkeypatch.setenv("GRADING_API_BASE", judge.url + "/v1")
        monkeypatch.setenv("GRADING_API_KEY", SECRET)
        results = {}
        for t in tasks:
            for who, answer in (("oracle", None), ("empty", "")):
                logs = tmp_path / "trials" / f"{t.name}-{who}"
                hr = harbor_trial(t, src / "world_files_zipped", logs, archipelago_checkout, answer)
                assert hr.exception_info is None, hr.exception_info
                vdir = logs / "verifier"
                reward = json.loads((vdir / "reward.json").read_text())
                assert hr.verifier_result.rewards["reward"] == reward["reward"]
                results[(t.name, who)] = reward
                # the runtime the environment bound, locked from the vendored uv.lock
                rt = json.loads((vdir / "grading_runtime.json").read_text())
                assert rt["version"].startswith("3.13") and rt["same_lock"] is True, rt
                assert SECRET.encode() not in all_bytes(logs)
        asked = list(judge.chat_requests)
        # --grader-network verifier: the agent's code cannot reach the judge, the grading can
        split = tmp_path / "split"
        recs = convert(runner, src, split, archipelago_checkout, "--grader-network", "verifier")
        one = split / next(r["path"] for r in recs if r["task_name"] == "Task number 1")
        port = judge.url.rsplit(":", 1)[1].split("/")[0]
        probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo reached"
        logs = tmp_path / "trials" / "split"
        hr = harbor_trial(
            one,
            src / "world_files_zipped",
            logs,
            archipelago_checkout,
            "The cap is MK-GF-ANS-41.",
            commands=[probe],
        )
        assert hr.exception_info is None, hr.exception_info
        ran = json.loads((logs / "agent" / "exec.json").read_text())
        assert ran[0]["rc"] != 0 and "reached" not in ran[0]["out"], ran
        assert hr.verifier_result.rewards["reward"] == 1.0
        assert len(judge.chat_requests) == len(asked) + 1
    finally:
        judge.stop()

    table = json.dumps({f"{k[0]}/{k[1]}": v for k, v in results.items()}, indent=1)
    files_task = next(t.name for t in tasks if "memo" in t.name)
    answer_task = next(t.name for t in tasks if t.name != files_task)
    assert results[(answer_task, "oracle")]["reward"] == 1.0, table
    assert results[(files_task, "oracle")]["reward"] == 1.0, table
    assert results[(files_task, "oracle")]["criteria_met"] == 2, table
    # the carried initial snapshot tells the new memo from the edited readme
    oracle_files = results[(files_task, "oracle")]
    assert (oracle_files["files_created"], oracle_files["files_modified"]) == (1, 1), table
    for t in (answer_task, files_task):
        assert results[(t, "empty")]["reward"] == 0.0, table
        assert results[(t, "empty")]["passed"] == 0.0
    # one judge call per criterion per trial, every one from inside the sandbox
    assert len(asked) == 2 * (1 + 2)
    assert all(r.get("response_format") for r in asked)


def run_grade_py(task: Path, tmp: Path, python: str, judge_url: str, agent: dict[str, str]):
    """tests/grade.py run directly (no sandbox) with the built runner's Python."""
    import subprocess

    agent_dir, out, world = tmp / "agent", tmp / "verifier", tmp / "world"
    agent_dir.mkdir(parents=True)
    (world / "filesystem").mkdir(parents=True)
    for name, text in agent.items():
        (agent_dir / name).write_text(text)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "APEXRL_TESTS_DIR": str(task / "tests"),
        "APEXRL_VERIFIER_DIR": str(out),
        "APEXRL_AGENT_DIR": str(agent_dir),
        "APEXRL_WORLD_ROOT": str(world),
        "GRADING_MODEL": "openai/scripted",
        "GRADING_API_BASE": judge_url,
        "GRADING_API_KEY": SECRET,
    }
    r = subprocess.run(
        [python, str(task / "tests" / "grade.py")], env=env, capture_output=True, text=True
    )
    return r, out


@pytest.mark.peer
@pytest.mark.timeout(900)
def test_grade_py_takes_the_recipe_trajectory_and_a_failed_grading_is_no_reward(
    runner, tmp_path, archipelago_checkout
):
    from apexrl.artifacts.archipelago_runner import grading_runtime
    from tests.scripted_engine import ScriptedEngine, marker_judge

    src = expert_data(tmp_path / "apex")
    recs = convert(runner, src, tmp_path / "tasks", archipelago_checkout)
    task = tmp_path / "tasks" / next(r["path"] for r in recs if r["task_name"] == "Task number 1")
    python = grading_runtime(archipelago_checkout).python
    # the recipe agent's trajectory wins over answer.txt: messages[-1] is the answer
    traj = {
        "messages": [
            {"role": "user", "content": "What is the cap?"},
            {"role": "assistant", "content": "The cap is MK-GF-ANS-41."},
        ],
        "status": "completed",
        "time_elapsed": 3.0,
        "finalized": True,
    }
    agent = {"trajectory.json": json.dumps(traj), "answer.txt": "I do not know."}
    judge = ScriptedEngine([], chat=marker_judge(MARKERS)).start()
    try:
        r, out = run_grade_py(task, tmp_path / "a", python, judge.url + "/v1", agent)
    finally:
        judge.stop()
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "reward.json").read_text())["reward"] == 1.0
    # a judge that never answers in JSON: the runner ends in error; no reward, not a 0
    bad = ScriptedEngine([], chat=lambda body: "no verdict here").start()
    try:
        r, out = run_grade_py(task, tmp_path / "b", python, bad.url + "/v1", agent)
        asked = len(bad.chat_requests)
    finally:
        bad.stop()
    assert r.returncode == 1 and asked >= 2, (r.returncode, asked, r.stderr[-2000:])
    assert not (out / "reward.json").exists()
    assert "grading runner" in (out / "grading_error.txt").read_text()
    for d in (tmp_path / "a", tmp_path / "b"):
        assert SECRET.encode() not in all_bytes(d)


@pytest.mark.peer
@pytest.mark.timeout(900)
def test_test_sh_without_a_runtime_syncs_the_vendored_lock_with_uv(
    runner, tmp_path, archipelago_checkout
):
    """The recipe's path: no ARCHIPELAGO_GRADING_PYTHON, so test.sh runs `uv sync
    --frozen` of the vendored runner/uv.lock. The package index is stood in for by uv's
    cache, offline (`make peer-grader` filled it from the same lock)."""
    import subprocess

    from apexrl.artifacts.archipelago_runner import python313, uv_binary
    from tests.scripted_engine import ScriptedEngine, marker_judge

    src = expert_data(tmp_path / "apex")
    recs = convert(runner, src, tmp_path / "tasks", archipelago_checkout)
    task = tmp_path / "tasks" / next(r["path"] for r in recs if r["task_name"] == "Task number 1")
    uv = uv_binary()
    cache = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True).stdout.strip()
    agent, world, out = tmp_path / "agent", tmp_path / "world", tmp_path / "verifier"
    (world / "filesystem").mkdir(parents=True)
    agent.mkdir()
    (agent / "answer.txt").write_text("The cap is MK-GF-ANS-41.\n")
    (tmp_path / "tmp").mkdir()
    judge = ScriptedEngine([], chat=marker_judge(MARKERS)).start()
    try:
        env = {
            "PATH": f"{Path(uv).parent}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "TMPDIR": str(tmp_path / "tmp"),
            "UV_CACHE_DIR": cache,
            "UV_OFFLINE": "1",
            "UV_PYTHON": python313(),
            "APEXRL_VERIFIER_DIR": str(out),
            "APEXRL_AGENT_DIR": str(agent),
            "APEXRL_WORLD_ROOT": str(world),
            "GRADING_MODEL": "openai/scripted",
            "GRADING_API_BASE": judge.url + "/v1",
        }
        r = subprocess.run(
            ["bash", str(task / "tests" / "test.sh")], env=env, capture_output=True, text=True
        )
    finally:
        judge.stop()
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads((out / "reward.json").read_text())["reward"] == 1.0
    rt = json.loads((out / "grading_runtime.json").read_text())
    assert rt["python"].startswith(str(tmp_path / "tmp")) and rt["version"].startswith("3.13")
    # and with neither a runtime nor uv: no reward, the fix named, exit 4
    import shutil

    bare = tmp_path / "bin"  # the tools test.sh uses, and no uv
    bare.mkdir()
    for tool in ("mkdir", "find", "dirname", "tee", "rm", "mktemp"):
        (bare / tool).symlink_to(shutil.which(tool))
    env["PATH"] = str(bare)
    r = subprocess.run(
        [shutil.which("bash"), str(task / "tests" / "test.sh")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 4 and "ARCHIPELAGO_GRADING_PYTHON" in r.stderr
    assert not (out / "reward.json").exists() and (out / "grading_unavailable.txt").is_file()


# runs in any Python that imports it: forge the reward at exit, leak the judge key reversed
PLANTED = """
import atexit
def _forge():
    import os
    key = os.environ.get("GRADING_API_KEY", "") or "no-key"
    for d in ("/logs/verifier", "/logs/agent", "/world/filesystem"):
        try:
            with open(d + "/leak.txt", "w") as f:
                f.write(key[::-1])
        except OSError:
            pass
    try:
        with open("/logs/verifier/reward.json", "w") as f:
            f.write('{"reward": 1.0, "passed": 1.0}')
    except OSError:
        pass
atexit.register(_forge)
"""


@pytest.mark.peer
@pytest.mark.timeout(900)
def test_grader_from_grading_ignores_what_the_agent_planted(
    runner, tmp_path, archipelago_checkout, monkeypatch
):
    """Issue 42, finding 1: a package shadowing importlib in the working folder, a .pth
    under the user site of the runner's Python, a venv where uv would sync one, and a
    forged reward: none runs in (or counts for) the grading; a wrong answer scores 0 and
    the judge key, even reversed, lands in no file of the trial."""
    import os

    from tests.scripted_engine import ScriptedEngine, marker_judge

    os.environ["HARBOR_TELEMETRY"] = "0"
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(tmp_path / "cache"))
    src = expert_data(tmp_path / "apex")
    recs = convert(runner, src, tmp_path / "tasks", archipelago_checkout)
    task = tmp_path / "tasks" / next(r["path"] for r in recs if r["task_name"] == "Task number 1")
    payload = "exec(open('/world/filesystem/.payload.py').read())"
    plant = [
        f"cat > /world/filesystem/.payload.py <<'EOF'\n{PLANTED}EOF",
        f'mkdir -p importlib && echo "{payload}" > importlib/__init__.py && echo planted',
        # the user site of the runner's Python 3.13 (and of any python3)
        "for v in 3.11 3.12 3.13; do d=$HOME/.local/lib/python$v/site-packages; "
        f'mkdir -p $d && echo "import os; {payload}" > $d/zz-probe.pth; done && echo planted',
        "mkdir -p /tmp/archipelago-grading-venv/bin && "
        "ln -s /usr/bin/python3 /tmp/archipelago-grading-venv/bin/python && echo planted",
    ]
    judge = ScriptedEngine([], chat=marker_judge(MARKERS)).start()
    try:
        monkeypatch.setenv("GRADING_MODEL", "openai/scripted")
        monkeypatch.setenv("GRADING_API_BASE", judge.url + "/v1")
        monkeypatch.setenv("GRADING_API_KEY", SECRET)
        logs = tmp_path / "trial"
        hr = harbor_trial(
            task, src / "world_files_zipped", logs, archipelago_checkout, "I do not know.", plant
        )
    finally:
        judge.stop()
    ran = json.loads((logs / "agent" / "exec.json").read_text())
    assert all("planted" in r["out"] for r in ran[1:]), ran
    assert hr.exception_info is None, hr.exception_info
    assert hr.verifier_result.rewards["reward"] == 0.0
    reward = json.loads((logs / "verifier" / "reward.json").read_text())
    assert reward["reward"] == 0.0 and reward["criteria_total"] == 1, reward
    assert len(judge.chat_requests) == 1  # the runner ran and asked the judge once
    for p in logs.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            assert SECRET.encode() not in data and SECRET[::-1].encode() not in data, p
