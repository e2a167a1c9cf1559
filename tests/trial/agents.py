"""Scripted Harbor agents for trial tests (import path tests.trial.agents:ScriptAgent)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext


class ScriptAgent(BaseAgent):
    """Does what its kwargs say, in order: kill the gateway, run commands, sleep, forge
    reward files, write the final answer."""

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        *,
        answer: str | None = None,
        commands: list[str] | None = None,
        command_timeout_s: int | None = None,
        sleep_s: float = 0.0,
        forge: bool = False,
        kill_gateway: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir=logs_dir, model_name=model_name, **kwargs)
        self.answer = answer
        self.commands = commands or []
        self.command_timeout_s = command_timeout_s
        self.sleep_s = sleep_s
        self.forge = forge
        self.kill_gateway = kill_gateway

    @staticmethod
    def name() -> str:
        return "apexrl-test-script"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        if self.kill_gateway:
            os.kill(environment.gateway_pid, signal.SIGKILL)
            await asyncio.sleep(0.3)
        outputs = []
        for cmd in self.commands:
            r = await environment.exec(cmd, timeout_sec=self.command_timeout_s)
            outputs.append({"cmd": cmd, "rc": r.return_code, "out": r.stdout, "err": r.stderr})
        if outputs:
            await self._put(environment, "/logs/agent/exec.json", json.dumps(outputs))
        if self.sleep_s:
            await asyncio.sleep(self.sleep_s)
        if self.forge:  # from inside the sandbox, as a model's shell command would
            full = '{"reward": 1.0, "score": 1.0, "criteria_met": 9, "criteria_total": 9}'
            await environment.exec(
                "mkdir -p /logs/verifier && cd /logs/verifier && "
                f"echo '{full}' > reward.json && echo 1 > reward.txt && "
                f"echo '{full}' > grading.json && echo '[]' > verdicts.json && "
                """echo '{"v1": true}' > judge_verdicts.json"""
            )
        if self.answer is not None:
            await self._put(environment, "/logs/agent/answer.txt", self.answer)
        context.metadata = {"script": True}

    async def _put(self, environment: BaseEnvironment, target: str, text: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "f"
            p.write_text(text)
            await environment.upload_file(p, target)
