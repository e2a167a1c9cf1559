"""The network of a trial's agent in apexrl's own runs (issue 42, finding 2).

apexrl grades on the host, so a task's `[environment] network_mode = "public"` (there for
an in-sandbox grader: `--grader-from ... --grader-network public`, the recipe's tasks)
does not put the agent's code online in `trial run` / `eval run`: only the task's own
`[agent]` table does. A real bubblewrap trial with a scripted agent whose command lists
its network interfaces and connects to a listener on the host's loopback.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path

import pytest

from apexrl.trial.config import TrialConfig
from apexrl.trial.run import arun_trial
from tests.trial.conftest import task_named

pytestmark = pytest.mark.integration


class Listener:
    """A TCP listener on the host's 127.0.0.1 that counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            c.close()

    def close(self) -> None:
        self.stop = True
        self.t.join(timeout=2)
        self.sock.close()


def set_network(task: Path, table: str) -> None:
    """`network_mode = "public"` in the task's [environment] or [agent] table."""
    from harbor.models.task.config import NetworkMode, TaskConfig

    cfg = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    getattr(cfg, table).network_mode = NetworkMode.PUBLIC
    (task / "task.toml").write_text(cfg.model_dump_toml())


def probe(task: Path, worlds: Path, logs: Path, port: int) -> dict:
    from harbor.models.trial.config import AgentConfig

    commands = [
        "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '",
        f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo refused",
    ]
    agent = AgentConfig(
        import_path="tests.trial.agents:ScriptAgent",
        kwargs={"answer": "no idea", "commands": commands},
    )
    cfg = TrialConfig(agent="oracle", worlds_dir=worlds, logs_dir=logs)
    out = asyncio.run(arun_trial(task, cfg, agent_config=agent))
    assert out.result.status == "complete", out.error_message
    ran = json.loads((logs / "agent" / "exec.json").read_text())
    return {"interfaces": ran[0]["out"].split(), "loopback": ran[1]["out"].strip()}


def test_a_public_environment_does_not_put_the_agent_online_in_apexrl_runs(
    tmp_path, worlds, task_dirs, task_copy
):
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    set_network(task, "environment")
    listener = Listener()
    try:
        seen = probe(task, worlds, tmp_path / "env-public", listener.port)
    finally:
        listener.close()
    assert seen == {"interfaces": ["lo"], "loopback": "refused"}, seen
    assert listener.hits == 0


def test_the_tasks_own_agent_table_puts_the_agent_online(tmp_path, worlds, task_dirs, task_copy):
    task = task_copy(task_named(task_dirs, "steerco-40fc"))
    set_network(task, "agent")
    listener = Listener()
    try:
        seen = probe(task, worlds, tmp_path / "agent-public", listener.port)
    finally:
        listener.close()
    assert seen["interfaces"] != ["lo"], seen  # the agent asked: it has a network
