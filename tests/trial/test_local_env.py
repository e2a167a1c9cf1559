"""The local (bubblewrap) environment on its own: isolation, mapping, cleanup."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from apexrl.envs.local.environment import LocalEnvironment, SandboxError, sweep_stale
from apexrl.worlds.store import WorldStore, task_world
from tests.trial.conftest import RUNTIMES, alive, peer_processes, task_named

pytestmark = pytest.mark.integration


def make_env(task_dir: Path, trial_dir: Path, worlds: Path, **kw) -> LocalEnvironment:
    from harbor.models.task.task import Task
    from harbor.models.trial.paths import TrialPaths

    task = Task(task_dir)
    paths = TrialPaths(trial_dir)
    paths.mkdir()
    return LocalEnvironment(
        environment_dir=task.paths.environment_dir,
        environment_name=task.name,
        session_id="t__env",
        trial_paths=paths,
        task_env_config=task.config.environment,
        worlds_dir=worlds,
        **kw,
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_sandbox_isolation_and_paths(tmp_path, trial_data, worlds, task_dirs, runtime):
    task = task_named(task_dirs, "update-fy2025e-revenue")  # has a task input file
    env = make_env(task, tmp_path / "trial", worlds, runtime=runtime)
    peer = runtime == "archipelago"  # archipelago's servers see the world at /filesystem

    async def go():
        await env.start(force_build=False)
        try:
            r = {}
            for name, cmd in {
                "whoami": "pwd; ls /world/filesystem/inputs",
                "project": f"ls {Path.cwd()}/README.md",
                "usr": "touch /usr/apexrl-x",
                "shadow": "cat /etc/shadow",
                "home": "ls -A /root; echo HOME=$HOME",
                "write": "echo hi > /world/filesystem/new.txt && echo ok",
                "bg": "sleep 987 & echo started",
                "peer_view": "ls /filesystem/new.txt /.apps_data",
            }.items():
                r[name] = await env.exec(cmd, timeout_sec=20)
            async with httpx.AsyncClient() as c:
                health = (await c.get(env.gateway_health_url)).json()
            if peer:  # the servers run while the trial does, and see its world
                r["servers"] = peer_processes(env.gateway_pid)
                r["listed"] = await _call(env, "filesystem_list_files", {"path": "/"})
            return r, health
        finally:
            await env.stop(delete=True)

    assert env.gateway_url is None
    r, health = asyncio.run(go())
    assert r["whoami"].stdout.splitlines()[0] == ("/filesystem" if peer else "/world/filesystem")
    assert "management_case_v2.csv" in r["whoami"].stdout  # the task's input file overlay
    assert r["project"].return_code != 0  # the project folder is not visible
    assert r["usr"].return_code != 0  # the system is read-only
    assert r["shadow"].return_code != 0
    # a private, empty home (plus the mount point of a Python installed under /root)
    assert set(r["home"].stdout.split()) <= {"HOME=/root", ".pyenv"}
    assert r["write"].stdout.strip() == "ok"
    assert r["bg"].stdout.strip() == "started"
    assert health["status"] == "ok" and health["n_tools"] > 10
    if peer:
        assert r["peer_view"].return_code == 0, r["peer_view"]
        assert health["runtime"] == "archipelago" and health["n_tools"] == 73, health
        assert len(r["servers"]) >= 9, r["servers"]
        assert "'new.txt' (text/plain file) 3 bytes" in r["listed"], r["listed"]
        assert alive(r["servers"]) == []  # gone with the trial
    else:  # apexrl's own runtime adds no mount
        assert r["peer_view"].return_code != 0
    # a background process dies with its exec (own PID namespace)
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmd(p) == "sleep 987"]
    assert left == []
    # the store's pristine world was not written
    pristine = WorldStore(worlds).pristine(task_world(task).world_id)
    assert not (pristine / "filesystem" / "new.txt").exists()
    assert env.root is not None and not env.root.exists()
    assert not pid_alive(env.gateway_pid)


async def _call(env: LocalEnvironment, name: str, args: dict) -> str:
    from apexrl.agent.mcp_tools import ToolBox

    box = ToolBox(env.gateway_url)
    await box.connect()
    try:
        return (await box.call(name, args, timeout_s=60)).text
    finally:
        await box.close()


def _cmd(p: Path) -> str:
    try:
        return (p / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_upload_download_and_host_paths(tmp_path, worlds, task_dirs):
    task = task_named(task_dirs, "steerco-40fc")
    env = make_env(task, tmp_path / "trial", worlds, gateway=False)
    src = tmp_path / "f.txt"
    src.write_text("payload")

    async def go():
        await env.start(force_build=False)
        try:
            await env.upload_file(src, "/world/filesystem/up/f.txt")
            r = await env.exec("cat /world/filesystem/up/f.txt")
            await env.download_file("/world/filesystem/up/f.txt", tmp_path / "back.txt")
            await env.download_dir("/world/filesystem/up", tmp_path / "backdir")
            with pytest.raises(PermissionError):
                await env.upload_file(src, "/usr/bin/evil")
            with pytest.raises(FileNotFoundError):
                await env.download_file("/etc/hostname", tmp_path / "h")
            assert env.is_path_mounted("/logs/agent", env.trial_paths.agent_dir)
            assert env.host_path("/logs/verifier/reward.json") == (
                env.trial_paths.verifier_dir / "reward.json"
            )
            assert env.host_path("/etc/passwd") is None
            return r
        finally:
            await env.stop(delete=True)

    r = asyncio.run(go())
    assert r.stdout == "payload", r.stderr
    assert (tmp_path / "back.txt").read_text() == "payload"
    assert (tmp_path / "backdir" / "f.txt").read_text() == "payload"


def test_no_world_store_is_a_start_error(tmp_path, task_dirs):
    task = task_dirs[0]
    env = make_env(task, tmp_path / "trial", None)  # type: ignore[arg-type]
    with pytest.raises(SandboxError, match="world store"):
        asyncio.run(env.start(force_build=False))


CRASH_SCRIPT = """
import asyncio, json, os, sys
sys.path.insert(0, {root!r})
from tests.trial.test_local_env import make_env
from pathlib import Path
env = make_env(Path({task!r}), Path({trial!r}), Path({worlds!r}))
async def go():
    await env.start(force_build=False)
    print(json.dumps({{"root": str(env.root), "pid": env.gateway_pid}}), flush=True)
    await asyncio.sleep(600)
asyncio.run(go())
"""


def test_crash_leaves_nothing_running_and_the_next_start_sweeps(
    tmp_path, trial_data, worlds, task_dirs
):
    task = task_named(task_dirs, "steerco-40fc")
    script = CRASH_SCRIPT.format(
        root=str(Path(__file__).resolve().parents[2]),
        task=str(task),
        trial=str(tmp_path / "crashed"),
        worlds=str(worlds),
    )
    env = {**os.environ, "APEXRL_LOCAL_WORKDIR": str(tmp_path / "work")}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        line = proc.stdout.readline()
        info = json.loads(line)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    root, gw = Path(info["root"]), int(info["pid"])
    deadline = time.monotonic() + 10
    while pid_alive(gw) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(gw), "the gateway outlived its crashed owner"
    assert root.exists()  # SIGKILL: nothing could clean up yet
    assert sweep_stale(tmp_path / "work") >= 1  # the trial's folder and any warm ones
    assert not root.exists()
    assert list((tmp_path / "work").iterdir()) == []


def test_links_planted_by_the_agent_never_reach_host_files(tmp_path, worlds, task_dirs):
    """A link in a writable folder is not followed by uploads, downloads or the verifier."""
    from apexrl.grading.verifier import read_no_follow

    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-ONLY-CONTENT")
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    task = task_named(task_dirs, "steerco-40fc")
    env = make_env(task, tmp_path / "trial", worlds, gateway=False)
    payload = tmp_path / "payload.txt"
    payload.write_text("overwritten")

    async def go():
        await env.start(force_build=False)
        try:
            agent = env.trial_paths.agent_dir
            (agent / "answer.txt").symlink_to(secret)
            (agent / "out.txt").symlink_to(victim)
            (agent / "dir").symlink_to(tmp_path)
            assert read_no_follow(agent / "answer.txt") == ""
            await env.upload_file(payload, "/logs/agent/out.txt")
            with pytest.raises(PermissionError):
                await env.upload_file(payload, "/logs/agent/dir/victim.txt")
            with pytest.raises(PermissionError):
                await env.download_dir("/logs/agent/dir", tmp_path / "stolen")
            with pytest.raises(PermissionError):
                await env.download_file("/logs/agent/answer.txt", tmp_path / "copied")
            assert env.host_path("/logs/agent/../../etc/passwd") is None
        finally:
            await env.stop(delete=True)

    asyncio.run(go())
    assert victim.read_text() == "untouched"
    assert not (tmp_path / "copied").exists() and not (tmp_path / "stolen").exists()


@pytest.mark.parametrize("native", ["1", "0"])
def test_world_copy_in_c_or_python_gives_the_sandbox_the_same_world(
    tmp_path, monkeypatch, worlds, task_dirs, native
):
    """The world copy (C `copy_tree`, or shutil.copytree with APEXRL_NATIVE_TAR=0): the
    task's files over the world, every entry the trial's own (root in its namespace)."""
    monkeypatch.setenv("APEXRL_NATIVE_TAR", native)
    task = task_named(task_dirs, "update-fy2025e-revenue")  # has a task input file
    env = make_env(task, tmp_path / "trial", worlds)
    listing = "cd /world && find . -mindepth 1 -printf '%P %U %m %s\\n' | sort"
    edit = "echo more >> /world/filesystem/inputs/management_case_v2.csv && echo ok"

    async def go():
        await env.start(force_build=False)
        try:
            return [(await env.exec(c, timeout_sec=20)).stdout for c in (listing, edit)]
        finally:
            await env.stop(delete=True)

    seen, edited = asyncio.run(go())
    rows = [line.split() for line in seen.splitlines()]
    assert {r[1] for r in rows} == {"0"}, seen  # not one left to host root (65534 here)
    names = {r[0] for r in rows}
    assert "filesystem/inputs/management_case_v2.csv" in names
    assert edited.strip() == "ok"
    EXPECTED.setdefault("listing", seen)
    assert seen == EXPECTED["listing"]  # the same world either way


EXPECTED: dict[str, str] = {}


def test_world_copy_of_a_published_shape_task(tmp_path):
    """A task converted from data in the published APEX-Agents shape (its input files a
    snapshot folder laid out like a world): the sandbox's /world holds the world and the
    task's files, the trial's own. A link added to the task's files is copied as a link,
    never read through on the host."""
    import shutil

    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from tests.published_shape import build

    build(tmp_path / "apex", bad=False)
    outcomes = list(
        convert_all(load_source(tmp_path / "apex"), tmp_path / "tasks", {}, strict=True)
    )
    snap = next(o.record for o in outcomes if o.record and o.record.task_name.endswith("LAW_02"))
    task = tmp_path / "copy" / Path(snap.path).name
    shutil.copytree(tmp_path / "tasks" / snap.path, task)
    secret = tmp_path / "host-secret.txt"
    secret.write_text("HOST-ONLY\n")
    os.symlink(secret, task / "environment" / "task_files" / "filesystem" / "Inputs" / "x.txt")
    env = make_env(task, tmp_path / "trial", tmp_path / "apex" / "world_files_zipped")
    script = (
        "cd /world && find . -mindepth 1 ! -type l -printf '%P %U\\n' | sort; "
        "echo LINK $(readlink filesystem/Inputs/x.txt); cat filesystem/Inputs/x.txt"
    )

    async def go():
        await env.start(force_build=False)
        try:
            return (await env.exec(script, timeout_sec=20)).stdout
        finally:
            await env.stop(delete=True)

    out = asyncio.run(go())
    rows = dict(line.split() for line in out.splitlines() if not line.startswith("LINK"))
    for rel in (
        "filesystem/Inputs/engagement.txt",
        ".apps_data/chat/Groups/space_deal/messages.json",
        "filesystem/Documents/figures.csv",
        ".apps_data/mail/inbox.mbox",
    ):
        assert rows.get(rel) == "0", (rel, out)
    assert set(rows.values()) == {"0"}, out
    assert f"LINK {secret}" in out and "HOST-ONLY" not in out


def test_image_profile_mercor_shows_the_world_where_mercor_images_keep_it(
    tmp_path, worlds, task_dirs
):
    """image_profile="mercor" (eval run --image-profile mercor): the same private world copy
    is also at /filesystem and /.apps_data, execs start in /filesystem, uploads and
    downloads take those paths; apexrl's /world stays (the verifier, the oracle)."""
    task = task_named(task_dirs, "steerco-40fc")
    env = make_env(task, tmp_path / "trial", worlds, gateway=False, image_profile="mercor")
    src = tmp_path / "f.txt"
    src.write_text("payload")

    async def go():
        await env.start(force_build=False)
        try:
            await env.upload_file(src, "/filesystem/up/f.txt")
            r = await env.exec(
                "pwd; cat /world/filesystem/up/f.txt; echo; echo made > /filesystem/made.txt; "
                "ls -A /.apps_data | head -3"
            )
            await env.download_file("/world/filesystem/made.txt", tmp_path / "made.txt")
            apps = sorted(os.listdir(env.world_dir / ".apps_data"))[:3]
            return r, apps
        finally:
            await env.stop(delete=True)

    r, apps = asyncio.run(go())
    lines = r.stdout.splitlines()
    assert lines[:2] == ["/filesystem", "payload"], r.stderr
    assert sorted(lines[2:]) == apps
    assert (tmp_path / "made.txt").read_text() == "made\n"
    assert env.profile is not None and env.profile.name == "mercor"
    with pytest.raises(Exception, match="unknown image profile"):
        make_env(task, tmp_path / "trial2", worlds, image_profile="nonsense")


@pytest.mark.peer
def test_two_trials_of_one_world_on_archipelagos_servers_stay_apart(tmp_path, worlds, task_dirs):
    """Two trials of one world at once, each served by archipelago's own servers: what one
    writes through its tools the other never sees, and one's token opens nothing of the
    other's gateway."""
    task = task_named(task_dirs, "update-fy2025e-revenue")
    a = make_env(task, tmp_path / "a", worlds, runtime="archipelago")
    b = make_env(task, tmp_path / "b", worlds, runtime="archipelago")
    write = "echo only-in-a > /filesystem/a_only.txt && ls /filesystem"

    async def go():
        await asyncio.gather(a.start(force_build=False), b.start(force_build=False))
        try:
            r = {"wrote": await _call(a, "code_execution_code_exec", {"code": write})}
            r["a"] = await _call(a, "filesystem_list_files", {"path": "/"})
            r["b"] = await _call(b, "filesystem_list_files", {"path": "/"})
            r["b_exec"] = (await b.exec("ls /filesystem /world/filesystem")).stdout
            token_a = a.gateway_url.split("/")[3]
            base_b = "/".join(b.gateway_url.split("/")[:3])
            async with httpx.AsyncClient() as c:
                r["cross"] = (await c.get(f"{base_b}/{token_a}/health")).status_code
            return r
        finally:
            await asyncio.gather(a.stop(delete=True), b.stop(delete=True))

    r = asyncio.run(go())
    assert "a_only.txt" in r["wrote"] and "'a_only.txt' (text/plain file)" in r["a"], r
    assert "a_only.txt" not in r["b"] and "a_only.txt" not in r["b_exec"], r
    assert "'README.md'" in r["b"]  # b's own world is there
    assert r["cross"] == 404
    assert a.gateway_url != b.gateway_url
