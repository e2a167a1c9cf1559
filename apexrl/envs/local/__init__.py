"""`local`: a Harbor environment with no Docker, bubblewrap over a private copy of the world.

`apexrl.envs.local:LocalEnvironment` is its Harbor import path (apexrl.envs.registry).
Modules:
  environment   LocalEnvironment: the trial folder, the world copy, exec and the gateway
  sandbox       the bubblewrap command line and what it promises
  pool          trial folders and gateways started ahead of their trials (the warm pool)
  warm          the fork server's client; forkserver, the fork server (zygote) itself
  gateway_main  the world's MCP gateway as the sandbox runs it (`python -m`)
  seccomp       the gateway's seccomp filter
  scratch       where trial folders go (RAM or disk)

This file imports nothing: the fork server and the gateway start light (`python -m
apexrl.envs.local.gateway_main` imports this package first).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LocalEnvironment"]


def __getattr__(name: str) -> Any:
    if name == "LocalEnvironment":  # lazy: Harbor is heavy
        from apexrl.envs.local.environment import LocalEnvironment

        return LocalEnvironment
    raise AttributeError(name)
