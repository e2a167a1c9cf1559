"""A minimal Harbor environment double for agent tests: the host stands in for the sandbox.

It serves a real world gateway (apexrl.worlds.gateway) over a private copy of a
world, exposes it as `gateway_url` (the attribute apexrl environments expose), and
implements exec/upload/download on the host with the sandbox's absolute paths
mapped under a root folder (`/logs/agent/answer.txt` -> `<root>/logs/agent/answer.txt`).
Only what the agent needs; the `local` bubblewrap environment is the real thing.

gateway="thread": serve_in_thread (fast); gateway="process": `apexrl world serve`
as a subprocess, so a test can kill it mid-trial (`kill_gateway`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.models.task.config import EnvironmentConfig
from harbor.models.trial.paths import TrialPaths

_ABS = re.compile(r"(?<![\w./])/(logs|tests|solution|world)(?=/|\b)")


class HostEnv(BaseEnvironment):
    def __init__(self, trial_dir: Path, world_src: Path, *, gateway: str = "thread") -> None:
        self.root = Path(trial_dir) / "sandbox"
        self.root.mkdir(parents=True, exist_ok=True)
        env_dir = Path(trial_dir) / "environment"
        env_dir.mkdir(parents=True, exist_ok=True)
        paths = TrialPaths(Path(trial_dir))
        paths.mkdir()
        self.world_src = Path(world_src)
        self.gateway_mode = gateway
        self.gateway_url: str | None = None
        self._cm = None
        self._proc: subprocess.Popen | None = None
        self.world = None
        super().__init__(
            environment_dir=env_dir,
            environment_name="apexrl-test",
            session_id="apexrl-test__env",
            trial_paths=paths,
            task_env_config=EnvironmentConfig(),
        )

    @staticmethod
    def type() -> str:
        return "apexrl-test-host"

    def _validate_definition(self) -> None:
        return None

    def map(self, path: str) -> Path:
        return self.root / str(path).lstrip("/")

    def _rewrite(self, command: str) -> str:
        return _ABS.sub(lambda m: f"{self.root}/{m.group(1)}", command)

    async def start(self, force_build: bool = False) -> None:
        from apexrl.worlds.world import open_world

        wdir = self.root / "world"
        self.world = open_world(self.world_src, workdir=wdir)
        if self.gateway_mode == "process":
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "apexrl", "world", "serve", str(self.world.root)]
                + ["--port", "0", "--world-id", self.world.world_id],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env={**os.environ, "NO_COLOR": "1"},
                start_new_session=True,
            )
            line = await asyncio.wait_for(asyncio.to_thread(self._proc.stdout.readline), 60)
            self.gateway_url = json.loads(line)["url"]
            return
        from apexrl.worlds.gateway import build_gateway, serve_in_thread

        self._cm = serve_in_thread(build_gateway(self.world))
        running = await asyncio.to_thread(self._cm.__enter__)
        self.gateway_url = running.url

    def kill_gateway(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

    async def stop(self, delete: bool = True) -> None:
        self.kill_gateway()
        if self._cm is not None:
            cm, self._cm = self._cm, None
            await asyncio.to_thread(cm.__exit__, None, None, None)

    async def upload_file(self, source_path, target_path: str) -> None:
        dst = self.map(target_path)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, dst)

    async def upload_dir(self, source_dir, target_dir: str) -> None:
        shutil.copytree(source_dir, self.map(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.map(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir) -> None:
        shutil.copytree(self.map(source_dir), target_dir, dirs_exist_ok=True)

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None) -> ExecResult:
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            self._rewrite(command),
            cwd=str(self.map(cwd)) if cwd else str(self.root),
            env={**os.environ, **(env or {})},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return ExecResult(stdout="", stderr="timed out", return_code=124)
        return ExecResult(stdout=out.decode(), stderr=err.decode(), return_code=proc.returncode)
