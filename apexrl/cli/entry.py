"""The `apexrl` program's entry point (pyproject's `[project.scripts]`): the Typer app.

Every command line, `image push` included, goes through the one grammar of the Typer app.
The app imports only the command a line chooses (the command table in cli/app.py), and an
unchanged re-push answers from one light HEAD per image without loading httpx
(images/push.py).
"""

from __future__ import annotations


def main() -> None:
    from apexrl.cli.app import main as app_main

    app_main()
