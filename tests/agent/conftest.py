"""Agent test fixtures: the example data's worlds, a host environment double, a runner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def example_data(tmp_path_factory) -> Path:
    from apexrl.tasks.example import write_example

    out = tmp_path_factory.mktemp("example") / "apex"
    write_example(out)
    return out


@pytest.fixture(scope="session")
def world_zip(example_data) -> Path:
    """The world of the example's first task (a zip in world_files_zipped/)."""
    tasks = json.loads((example_data / "tasks_and_rubrics.json").read_text())
    return example_data / "world_files_zipped" / f"{tasks[0]['world_id']}.zip"


def run_agent(env, logs_dir: Path, instruction: str, **agent_kw):
    """Start `env`, run ApexAgent in it, stop it; returns (agent, context)."""
    from harbor.models.agent.context import AgentContext

    from apexrl.agent import ApexAgent

    agent_kw.setdefault("tokenizer", "qwen3")
    agent_kw.setdefault("retry_base_delay_s", 0.01)
    agent_kw.setdefault("gateway_ready_timeout_s", 30)
    agent = ApexAgent(logs_dir=logs_dir, **agent_kw)
    ctx = AgentContext()

    async def go():
        await env.start(force_build=False)
        try:
            await agent.setup(env)
            await agent.run(instruction, env, ctx)
        finally:
            await env.stop(delete=True)

    asyncio.run(go())
    return agent, ctx
