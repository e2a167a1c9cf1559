"""The oracle agent (`apexrl.agent.oracle:OracleAgent`): produces each task's golden output.

It does what Harbor's own oracle does: copy the task's solution/ into the sandbox
at /solution and run solution/solve.sh there (which writes the gold answer to
/logs/agent/answer.txt and the gold files into the world). A dataset whose every
task the oracle solves with reward 1 is proven solvable by its own rubric.

kwargs: task_dir (the task folder; Harbor passes it to its built-in oracle only,
so apexrl's trial runner passes it here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

SOLUTION_DIR = "/solution"
LOG_NAME = "oracle.txt"


class OracleError(RuntimeError):
    """The task's solution script failed: the task cannot be proven solvable."""


class OracleAgent(BaseAgent):
    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        *,
        task_dir: str | Path | None = None,
        timeout_s: float | None = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir=logs_dir, model_name=model_name, **kwargs)
        if task_dir is None:
            raise ValueError("the oracle agent needs task_dir (the task folder)")
        self.task_dir = Path(task_dir)
        self.timeout_s = timeout_s

    @staticmethod
    def name() -> str:
        return "apexrl-oracle"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        solution = self.task_dir / "solution"
        solve = solution / "solve.sh"
        if not solve.is_file():
            raise OracleError(f"{solve} does not exist: the task has no oracle solution")
        await environment.upload_dir(solution, SOLUTION_DIR)
        result = await environment.exec(
            f"bash {SOLUTION_DIR}/solve.sh > /logs/agent/{LOG_NAME} 2>&1",
            timeout_sec=int(self.timeout_s) if self.timeout_s else None,
        )
        context.metadata = {**(context.metadata or {}), "oracle_exit_code": result.return_code}
        if result.return_code != 0:
            log = ""
            host = getattr(environment, "host_path", None)
            p = host(f"/logs/agent/{LOG_NAME}") if callable(host) else None
            if p is not None and p.is_file():
                log = p.read_text("utf-8", "replace")[-2000:]
            raise OracleError(
                f"solution/solve.sh exited with {result.return_code}: "
                f"{(log or result.stderr or result.stdout or '').strip()[-2000:]}"
            )
