"""The in-sandbox grader is isolated from what the agent touched (issue 42, finding 1).

Harbor's own verifier runs the task's tests/test.sh in the sandbox the agent used. A
scripted agent plants each way into the grader a red-team pass found: a `.pth` under
HOME's user site (runs in every Python the grader starts, with the judge key in its
environment), a package shadowing `importlib` in the working folder, a module and a
file in /tests, a forged reward.json; the payload writes reward 1.0 and the judge key,
reversed (Harbor's after-the-fact scrub of known values does not catch that), wherever
it can. The reward stays 0 and the key appears in no file of the trial.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import harbor_config
from tests.trial.conftest import task_named

pytestmark = pytest.mark.integration

SECRET = "sk-judge-iso-5f21c9e8"

# runs inside any Python that loads it: forge the reward at exit, leak the key reversed
PAYLOAD = """
import atexit
def _forge():
    import json, os
    key = os.environ.get("GRADING_API_KEY", "") or "no-key"
    for d in ("/logs/verifier", "/logs/agent", "/logs/artifacts", "/world/filesystem"):
        try:
            with open(d + "/leak.txt", "w") as f:
                f.write(key[::-1])
        except OSError:
            pass
    try:
        with open("/logs/verifier/reward.json", "w") as f:
            f.write(json.dumps({"reward": 1.0}))
    except OSError:
        pass
atexit.register(_forge)
"""

PLANT = [
    # the payload where a grader can read it, and a .pth under the user site running it
    "cat > /world/filesystem/.payload.py <<'EOF'\n" + PAYLOAD + "EOF",
    'site="$(python3 -c "import site; print(site.getusersitepackages())")" && mkdir -p "$site"'
    " && echo \"import os; exec(open('/world/filesystem/.payload.py').read())\""
    ' > "$site/zz-apexrl-probe.pth" && echo planted-pth',
    # a package shadowing importlib (and a sitecustomize) in the working folder
    "mkdir -p importlib && echo \"exec(open('/world/filesystem/.payload.py').read())\""
    " > importlib/__init__.py && cp importlib/__init__.py sitecustomize.py && echo planted-cwd",
    # /tests: where the grader's own modules come from
    "echo 'import os' > /tests/json.py && echo planted-tests",
]


def trial(task: Path, worlds: Path, logs: Path, commands: list[str], answer: str):
    from harbor.models.trial.config import AgentConfig, VerifierConfig
    from harbor.trial.trial import Trial

    hc = harbor_config(task, TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=logs))
    hc.verifier = VerifierConfig(env={"GRADING_API_KEY": SECRET})  # Harbor's own verifier
    hc.agent = AgentConfig(
        import_path="tests.trial.agents:ScriptAgent",
        kwargs={"answer": answer, "commands": commands, "forge": True},
    )

    async def go():
        return await (await Trial.create(hc)).run()

    return asyncio.run(go())


def leaked(folder: Path) -> list[str]:
    return [
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and (SECRET.encode() in p.read_bytes() or SECRET[::-1].encode() in p.read_bytes())
    ]


def test_planted_code_never_runs_in_the_default_tasks_grader(tmp_path, worlds, task_dirs):
    task = task_named(task_dirs, "steerco-40fc")
    logs = tmp_path / "trial"
    hr = trial(task, worlds, logs, PLANT, answer="I do not know.")
    assert hr.exception_info is None, hr.exception_info
    ran = json.loads((logs / "agent" / "exec.json").read_text())
    assert "planted-pth" in ran[1]["out"] and "planted-cwd" in ran[2]["out"], ran
    # /tests is filled from the host: an agent's exec cannot write there
    assert ran[3]["rc"] != 0 and "planted-tests" not in ran[3]["out"], ran
    assert hr.verifier_result.rewards["reward"] == 0.0
    reward = json.loads((logs / "verifier" / "reward.json").read_text())
    assert reward["reward"] == 0.0 and reward.get("criteria_met") == 0, reward
    assert not (logs / "verifier" / "leak.txt").exists()
    assert leaked(logs) == []


# a grader that reports what it sees (any task's tests/test.sh, not only apexrl's)
PROBE_TEST_SH = r"""#!/usr/bin/env bash
out=/logs/verifier/seen.json
w() { if ( echo x > "$1" ) 2>/dev/null; then echo yes; else echo no; fi; }
cat > "$out" <<EOF
{"cwd": "$(pwd)", "home": "$HOME", "tmpdir": "${TMPDIR:-}",
 "home_files": "$(ls -A "$HOME" | tr '\n' ' ')", "tmp_files": "$(ls -A /tmp | tr '\n' ' ')",
 "world_writable": "$(w /world/filesystem/grader-was-here)",
 "agent_logs_writable": "$(w /logs/agent/grader-was-here)",
 "tests_writable": "$(w /tests/grader-was-here)",
 "planted_stdout": "$(ls /logs/verifier | tr '\n' ' ')"}
EOF
echo '{"reward": 0.0}' > /logs/verifier/reward.json
"""


def mount_points(top: str) -> set[str]:
    from apexrl.envs.local.sandbox import python_paths

    return {Path(p).relative_to(top).parts[0] for p in python_paths() if p.startswith(top + "/")}


def test_the_local_environment_isolates_any_in_sandbox_grader(
    tmp_path, worlds, task_dirs, task_copy
):
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    (task / "tests" / "test.sh").write_text(PROBE_TEST_SH)
    logs = tmp_path / "trial"
    commands = [
        "echo from-agent > /root/agent-home-file && echo from-agent > /tmp/agent-tmp-file",
        "echo planted > /logs/verifier/planted.txt",
    ]
    hr = trial(task, worlds, logs, commands, answer="anything")
    assert hr.exception_info is None, hr.exception_info
    seen = json.loads((logs / "verifier" / "seen.json").read_text())
    assert seen["cwd"] == "/tests", seen
    assert (seen["home"], seen["tmpdir"]) == ("/root", "/tmp"), seen
    # empty but for the mount points of the Python the sandbox binds (when under /root)
    assert set(seen["home_files"].split()) <= mount_points("/root"), seen
    assert set(seen["tmp_files"].split()) <= mount_points("/tmp"), seen
    assert seen["world_writable"] == "no" and seen["agent_logs_writable"] == "no", seen
    assert seen["tests_writable"] == "no", seen  # Harbor fills it from the host
    # only what the grader itself is writing (its stdout log); nothing the agent left
    assert "planted.txt" not in seen["planted_stdout"], seen
    assert not (logs / "verifier" / "planted.txt").exists()
