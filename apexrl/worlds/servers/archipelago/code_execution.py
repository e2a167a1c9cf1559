"""archipelago `code_execution` server: one tool, `code_exec(code)`, a shell command run
in the world's files folder with a time limit (not a sandbox by itself: isolation comes
from the environment the gateway runs in)."""

from __future__ import annotations

import json
import os
import re
from typing import Annotated, Any

from pydantic import Field

from apexrl.worlds.apps import code as _code
from apexrl.worlds.servers import Server
from apexrl.worlds.world import World

SERVER = Server("code_execution", app="code", aliases=("terminal", "shell"), peer_folder="code")

TIMEOUT_S = float(os.environ.get("CODE_EXEC_COMMAND_TIMEOUT", "300"))
OUTPUT_CAP = 100_000
# Raw Python passed where a shell command is expected (archipelago refuses it too).
_PY_START = re.compile(
    r"^(from\s+\S+\s+import\s|import\s+[A-Za-z_][\w.]*(\s+as\s+\w+)?\s*(;|$)"
    r"|def\s|class\s|async\s+def\s|@)"
)
_RAW_PYTHON = (
    "Error: this looks like raw Python code. code_exec runs shell commands, not Python. "
    "To run Python: python -c 'your_code', or write a script first: "
    "cat > script.py << 'EOF'\\n...\\nEOF && python script.py"
)


@SERVER.tool
async def code_exec(
    world: World,
    code: Annotated[
        str | None,
        Field(
            description="Shell command to run with bash in the world's files folder "
            "(e.g. `ls -la`, `python -c 'print(1+1)'`, or a heredoc script then "
            "`python script.py`). Required."
        ),
    ] = None,
) -> str:
    """Run a shell command (bash) in the world's files folder and return
    {success, output}: success is true when it exits 0 within the time limit; output
    holds stdout, then stderr under 'Stderr output:'. To run Python use `python -c` or a
    script file; raw Python code is refused."""
    if code is None:
        return _reply(False, "Error: Required parameter 'code' (command to execute)")
    if _PY_START.match(code.strip()):
        return _reply(False, _RAW_PYTHON)
    r = await _code.run_command(world, code, TIMEOUT_S, OUTPUT_CAP)
    return _reply(*_layout(r))


def _layout(r: dict[str, Any]) -> tuple[bool, str]:
    """(success, output) in archipelago's layout: on success stdout, then a blank line and
    'Stderr output:' with the stripped stderr (stderr alone when stdout is blank); on a
    non-zero exit stdout, 'Error output:' with stderr, then 'Command failed with exit
    code N' after a blank line."""
    out, err = r["stdout"], r["stderr"]
    if r["timed_out"]:
        text = f"Command execution timed out after {TIMEOUT_S:g} seconds"
        if out or err:
            text += "\n\nPartial output before timeout:"
            text += f"\nStdout:\n{out}" if out else ""
            text += f"\nStderr:\n{err}" if err else ""
        return False, text
    if r["exit_code"] != 0:
        text = out + (f"\nError output:\n{err}" if err else "")
        return False, f"{text}\n\nCommand failed with exit code {r['exit_code']}"
    if err.strip():
        out = f"{out.rstrip()}\n\nStderr output:\n{err.strip()}" if out.strip() else err.strip()
    return True, out


def _reply(success: bool, output: str) -> str:
    """{success, output} as compact JSON (archipelago's serialisation of the result)."""
    reply = {"success": success, "output": output}
    return json.dumps(reply, ensure_ascii=False, separators=(",", ":"))


def probe(world: World) -> str:
    return _code.probe(world)
