"""AGENTS: who acts in a trial, by name (`--agent`, recipe `agent.agent`).

model   apexrl's agent (`apexrl.agent:ApexAgent`): the model behind an engine, with
        the trial's prompts, budgets and sampling
oracle  replays the task's gold output (`apexrl.agent.oracle:OracleAgent`): no engine,
        no judge needed; checks that tasks, worlds and grading agree
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentEntry:
    name: str
    import_path: str  # "module:Class" of a Harbor BaseAgent
    uses_model: bool = True  # talks to an engine (gets endpoint, prompts, budgets, sampling)


AGENTS: dict[str, AgentEntry] = {
    a.name: a
    for a in (
        AgentEntry("apexrl", "apexrl.agent:ApexAgent"),
        AgentEntry("oracle", "apexrl.agent.oracle:OracleAgent", uses_model=False),
    )
}


def agent_names() -> tuple[str, ...]:
    return tuple(AGENTS)
