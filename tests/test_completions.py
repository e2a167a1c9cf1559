"""The shipped completion scripts match the CLI (run `make completions` to refresh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from apexrl.completions import FILENAMES, SHELLS, render

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_script_is_current(shell):
    shipped = (ROOT / "completions" / FILENAMES[shell]).read_text(encoding="utf-8")
    assert shipped == render(shell), (
        f"completions/{FILENAMES[shell]} is stale: run `make completions`"
    )


def test_bash_script_completes_subcommands(tmp_path):
    script = ROOT / "completions" / FILENAMES["bash"]
    probe = (
        f"source {script}\n"
        'COMP_WORDS=(apexrl tasks un); COMP_CWORD=2; _apexrl; echo "${COMPREPLY[@]}"\n'
        'COMP_WORDS=(apexrl tasks pack --sh); COMP_CWORD=3; _apexrl; echo "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.splitlines() == ["unpack", "--shard-size"]
