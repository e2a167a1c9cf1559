"""The command groups `apexrl` registers (apexrl.cli.app), and those that failed to import
(read by `apexrl doctor`)."""

from __future__ import annotations

# The command groups in their own modules: name -> what apexrl.cli.<name> holds ("app": a
# group of commands, "command": one command).
COMMAND_GROUPS = {
    "world": "app",
    "image": "app",
    "tito": "app",
    "engine": "app",
    "eval": "app",
    "train": "command",
    "plan": "app",
    "publish": "app",
}
# groups whose module failed to import: name -> why. Never dropped in silence: the group
# stays a command that fails with the reason (exit 1), `apexrl doctor` reports it, and
# tests/test_cli_basics.py requires this to be empty.
BROKEN_GROUPS: dict[str, str] = {}
