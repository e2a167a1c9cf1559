"""The apexrl agent: a Harbor BaseAgent that works a world's MCP tools over TITO.

`apexrl.agent:ApexAgent` is its Harbor import path. The loop (`apexrl.agent.loop`)
and the MCP client (`apexrl.agent.mcp_tools`) import without Harbor.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ApexAgent"]


def __getattr__(name: str) -> Any:
    if name == "ApexAgent":  # lazy: Harbor is heavy
        from apexrl.agent.harbor_agent import ApexAgent

        return ApexAgent
    raise AttributeError(name)
