"""The network apexrl's own runs give a trial's agent (issue 42, finding 2).

apexrl grades on the host (apexrl.grading.verifier), so its own runs (`trial run`,
`eval run`, training through them) need no network in the sandbox for grading. A task
may still say `[environment] network_mode = "public"` for its in-sandbox grader (a
`--grader-from ... --grader-network public` dataset, the recipe's tasks): that is no
reason to put the agent's code online. apexrl's environments therefore take
`agent_network`:

  task      Harbor's policy as the task states it (a plain `harbor run`)
  explicit  the agent's code (execs, the code tool) is online only when the task's own
            `[agent]` table asks for it (`network_mode` public or allowlist); apexrl's
            runs pass this. An in-sandbox grader keeps the verifier phase's policy.
"""

from __future__ import annotations

from pathlib import Path

AGENT_NETWORK = ("task", "explicit")


def agent_phase_asks_network(task_dir: Path) -> bool:
    """Whether the task's own `[agent]` table asks for network (public or an allowlist)."""
    from harbor.models.task.config import NetworkMode, TaskConfig

    try:
        cfg = TaskConfig.model_validate_toml((Path(task_dir) / "task.toml").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    policy = cfg.agent.explicit_phase_policy()
    return policy is not None and policy.network_mode != NetworkMode.NO_NETWORK


def check_agent_network(value: str) -> str:
    if value not in AGENT_NETWORK:
        raise ValueError(f"agent_network {value!r}: one of {', '.join(AGENT_NETWORK)}")
    return value
