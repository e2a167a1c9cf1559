"""The Modal environment's mapping from task + config to Modal calls.

Modal cannot be reached from here and is not installed: a recording fake of the
`modal` module is injected, so this is a unit test of the mapping (which image
call, which secret, which sandbox arguments, the declared port and the tunnel,
exec and file transfer calls), not of Modal itself. The gateway health wait is
real HTTP (the fake tunnel points at a local server with /health).
"""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

import pytest
from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

from apexrl.envs.modal import ENTRYPOINT, ModalEnvironment
from apexrl.errors import UsageError
from tests.scripted_engine import ScriptedEngine

ECR_REF = "123456789012.dkr.ecr.us-east-1.amazonaws.com/apexrl/world-w1:v1"
DIGEST = "sha256:" + "ab" * 32


class _Method:
    """A fake Modal method: callable, with the `.aio` async twin Modal objects have."""

    def __init__(self, calls: list, name: str, fn):
        self.calls, self.name, self.fn = calls, name, fn

    def __call__(self, *a, **kw):
        self.calls.append((self.name, a, kw))
        return self.fn(*a, **kw)

    async def _aio(self, *a, **kw):
        return self(*a, **kw)

    @property
    def aio(self):
        return self._aio


def fake_modal(calls: list, tunnel_url: str, files: dict, port: int = 8080):
    mod = types.ModuleType("modal")

    class Secret:
        def __init__(self, kind, value):
            self.kind, self.value = kind, value

        def __eq__(self, other):
            return (self.kind, self.value) == (other.kind, other.value)

        def __repr__(self):
            return f"Secret({self.kind}, {self.value!r})"

    class Stream:
        def __init__(self, data):
            self.read = _Method(calls, "stream.read", lambda: data)

    class Proc:
        def __init__(self):
            self.stdout, self.stderr = Stream(b"out"), Stream(b"")
            self.wait = _Method(calls, "proc.wait", lambda: 0)

    class File:
        def __init__(self, path, mode):
            self.path, self.mode = path, mode
            self.write = _Method(calls, "file.write", self._write)
            self.read = _Method(calls, "file.read", lambda: files[self.path])
            self.close = _Method(calls, "file.close", lambda: None)

        def _write(self, data):
            files[self.path] = files.get(self.path, b"") + data

    class Tunnel:
        url = tunnel_url

    class Sandbox:
        def __init__(self):
            self.exec = _Method(calls, "sandbox.exec", lambda *a, **kw: Proc())
            self.tunnels = _Method(calls, "sandbox.tunnels", lambda: {port: Tunnel()})
            self.open = _Method(calls, "sandbox.open", File)
            self.terminate = _Method(calls, "sandbox.terminate", lambda: None)

    mod.Secret = types.SimpleNamespace(
        from_name=_Method(calls, "Secret.from_name", lambda n: Secret("name", n)),
        from_dict=_Method(calls, "Secret.from_dict", lambda d: Secret("dict", dict(d))),
    )
    mod.Image = types.SimpleNamespace(
        from_aws_ecr=_Method(calls, "Image.from_aws_ecr", lambda ref, secret: ("ecr", ref)),
        from_registry=_Method(calls, "Image.from_registry", lambda ref, **kw: ("reg", ref)),
    )
    mod.App = types.SimpleNamespace(
        lookup=_Method(calls, "App.lookup", lambda name, **kw: ("app", name))
    )
    mod.Sandbox = types.SimpleNamespace(
        create=_Method(calls, "Sandbox.create", lambda *a, **kw: Sandbox())
    )
    mod.Secret_cls = Secret
    return mod


def make_task(root: Path, *, image: str | None = ECR_REF) -> Path:
    task = root / "task"
    (task / "environment" / "task_files" / "filesystem").mkdir(parents=True)
    (task / "environment" / "task_files" / "filesystem" / "brief.txt").write_text("brief\n")
    (task / "environment" / "Dockerfile").write_text("FROM example.org/worlds/w1:latest\n")
    meta = ['world_id = "w1"', 'required_env_keys = ["FMP_API_KEY", "HOME"]']
    if image:
        meta += [f'image = "{image}"', f'image_digest = "{DIGEST}"']
    (task / "task.toml").write_text("[metadata]\n" + "\n".join(meta) + "\n")
    return task


def make_env(tmp_path: Path, task: Path, **kw) -> ModalEnvironment:
    cfg = kw.pop("task_env_config", EnvironmentConfig())
    return ModalEnvironment(
        environment_dir=task / "environment",
        environment_name="t",
        session_id="t__env",
        trial_paths=TrialPaths(tmp_path / "trial"),
        task_env_config=cfg,
        **kw,
    )


def _calls(calls, name):
    return [c for c in calls if c[0] == name]


def test_start_maps_the_task_to_modal_calls(tmp_path, monkeypatch):
    calls: list = []
    files: dict = {}
    monkeypatch.setenv("FMP_API_KEY", "fmp-key-1234567")
    monkeypatch.setenv("HOME", "/root")  # not an apexrl secret: never forwarded
    with ScriptedEngine([]) as gateway:  # stands in for the tunnel's far end (/health)
        monkeypatch.setitem(sys.modules, "modal", fake_modal(calls, gateway.url + "/", files))
        env = make_env(tmp_path, make_task(tmp_path), registry_secret="my-ecr", cpus=2)
        asyncio.run(env.start(force_build=False))
        assert env.gateway_url == gateway.url + "/mcp/"
        res = asyncio.run(env.exec("echo hi", cwd="/world", env={"A": "1"}, timeout_sec=5))
        asyncio.run(env.stop(delete=True))
    assert res.stdout == "out" and res.return_code == 0

    pinned = ECR_REF.rsplit(":", 1)[0] + "@" + DIGEST
    assert _calls(calls, "App.lookup") == [("App.lookup", ("apexrl",), {"create_if_missing": True})]
    (_, (ref,), kw) = _calls(calls, "Image.from_aws_ecr")[0]
    assert ref == pinned and kw["secret"].value == "my-ecr"
    (_, args, kw) = _calls(calls, "Sandbox.create")[0]
    assert args == (ENTRYPOINT,)
    assert kw["encrypted_ports"] == [8080]  # declared at creation (public API)
    assert kw["image"] == ("ecr", pinned) and kw["app"] == ("app", "apexrl")
    assert kw["timeout"] >= 3600 and kw["cpu"] == 2
    assert kw["env"]["APEXRL_PORT"] == "8080" and kw["env"]["APEXRL_WORLD_ID"] == "w1"
    assert [s.value for s in kw["secrets"]] == [{"FMP_API_KEY": "fmp-key-1234567"}]
    assert "block_network" not in kw
    # no secret value on any command line
    execs = _calls(calls, "sandbox.exec")
    assert all("fmp-key-1234567" not in " ".join(map(str, a)) for _, a, _ in execs)
    # log dirs made, task files overlaid on /world through a tarball, exec mapped to argv
    assert any(a[:2] == ("mkdir", "-p") and "/logs/agent" in a for _, a, _ in execs)
    assert any("tar -xzf" in " ".join(a) and "/world/filesystem" in a for _, a, _ in execs)
    assert (
        "sandbox.exec",
        ("env", "A=1", "bash", "-c", "echo hi"),
        {"workdir": "/world", "timeout": 5},
    ) in execs
    assert any(p.startswith("/tmp/apexrl-upload-") for p in files)
    assert len(_calls(calls, "sandbox.terminate")) == 1


def test_file_transfer_and_registry_choice(tmp_path, monkeypatch):
    calls: list = []
    files: dict = {}
    with ScriptedEngine([]) as gateway:
        monkeypatch.setitem(sys.modules, "modal", fake_modal(calls, gateway.url, files))
        task = make_task(tmp_path, image=None)  # falls back to the Dockerfile's FROM
        env = make_env(tmp_path, task, private_registry_secret="regcreds")
        asyncio.run(env.start(force_build=False))
        src = tmp_path / "answer.txt"
        src.write_text("42")
        asyncio.run(env.upload_file(src, "/logs/agent/answer.txt"))
        asyncio.run(env.download_file("/logs/agent/answer.txt", tmp_path / "back.txt"))
        asyncio.run(env.stop(delete=True))
    assert files["/logs/agent/answer.txt"] == b"42"
    assert (tmp_path / "back.txt").read_text() == "42"
    (_, (ref,), kw) = _calls(calls, "Image.from_registry")[0]
    assert ref == "example.org/worlds/w1:latest" and kw["secret"].value == "regcreds"
    assert not _calls(calls, "Image.from_aws_ecr")


def test_no_network_policy_blocks_outbound(tmp_path, monkeypatch):
    calls: list = []
    with ScriptedEngine([]) as gateway:
        monkeypatch.setitem(sys.modules, "modal", fake_modal(calls, gateway.url, {}))
        env = make_env(
            tmp_path,
            make_task(tmp_path),
            network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK),
        )
        asyncio.run(env.start(force_build=False))
        asyncio.run(env.stop(delete=True))
    (_, _, kw) = _calls(calls, "Sandbox.create")[0]
    assert kw["block_network"] is True and kw["encrypted_ports"] == [8080]


def test_unhealthy_gateway_fails_start_and_terminates(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setitem(sys.modules, "modal", fake_modal(calls, "http://127.0.0.1:9", {}))
    env = make_env(tmp_path, make_task(tmp_path), gateway_ready_timeout_s=1)
    with pytest.raises(RuntimeError, match="not healthy"):
        asyncio.run(env.start(force_build=False))
    assert len(_calls(calls, "sandbox.terminate")) == 1


def test_missing_modal_client_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "modal", None)  # import modal -> ImportError
    env = make_env(tmp_path, make_task(tmp_path))
    with pytest.raises(UsageError, match="pip install modal"):
        asyncio.run(env.start(force_build=False))


def test_task_without_image_is_refused(tmp_path):
    task = make_task(tmp_path, image=None)
    (task / "environment" / "Dockerfile").write_text("# nothing\n")
    with pytest.raises(UsageError, match="no world image"):
        make_env(tmp_path, task)
