"""The shipped completion scripts match the CLI and complete in each shell (issue 32.6):
subcommands, option names, option values (choices), and paths, driven in bash (the
completion function over COMP_WORDS, `complete -p`), zsh (a -c harness around the
completion function, with compadd and _files recording what they are given) and fish
(`complete -C`). `make completions` refreshes them; zsh and fish come from `make sysdeps`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from apexrl.completions import FILENAMES, SHELLS, render

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {s: ROOT / "completions" / FILENAMES[s] for s in SHELLS}

# (words typed, the last one being completed) -> what must be offered (and what must not)
CASES = [
    (["apexrl", ""], {"eval", "tasks", "world"}, set()),
    (["apexrl", "tasks", "un"], {"unpack"}, {"ls"}),
    (["apexrl", "tasks", "pack", "--sh"], {"--shard-size"}, set()),
    (["apexrl", "eval", "run", "--env", ""], {"local", "modal"}, {"--env", "eval"}),
    (["apexrl", "eval", "report", "r", "--format", ""], {"html", "md"}, {"--format"}),
    (["apexrl", "eval", "run", "--tasks", "da"], {"data.parquet"}, set()),
    (["apexrl", "tasks", "ls", ""], {"data.parquet", "dsdir"}, {"ls", "eval"}),
    # an option's value that happens to name a command is not a command
    (["apexrl", "eval", "run", "-t", "eval", "--ag"], {"--agent"}, set()),
]


def _offered(shell: str, words: list[str], cwd: Path) -> set[str]:
    script = SCRIPTS[shell]
    if shell == "bash":
        arr = " ".join(f"'{w}'" for w in words)
        probe = (
            f"source {script}\ncomplete -p apexrl\n"
            f"COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; _apexrl\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        )
        out = _run(["bash", "--norc", "-c", probe], cwd).splitlines()
        assert out[0] == "complete -F _apexrl apexrl"  # registered for the command
        return {w.rstrip("/") for w in out[1:]}
    if shell == "zsh":
        arr = " ".join(f"'{w}'" for w in words)
        probe = (
            'compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@" }\n'
            "_files() { print -rl -- *(N) }\n"
            f"source {script} >/dev/null\n"
            f"words=({arr}); CURRENT={len(words)}; PREFIX=${{words[CURRENT]}}\n"
            "_apexrl\n"
        )
        return {w for w in _run(["zsh", "-f", "-c", probe], cwd).splitlines()}
    line = " ".join(words)
    out = _run(["fish", "--no-config", "-c", f"source {script}; complete -C'{line}'"], cwd)
    return {w.split("\t")[0].rstrip("/") for w in out.splitlines()}


def _run(argv: list[str], cwd: Path) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, cwd=cwd).stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_script_is_current(shell):
    assert SCRIPTS[shell].read_text(encoding="utf-8") == render(shell), (
        f"completions/{FILENAMES[shell]} is stale: run `make completions`"
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_completes_in_the_shell(shell, tmp_path):
    (tmp_path / "data.parquet").write_bytes(b"")
    (tmp_path / "dsdir").mkdir()
    for words, want, refuse in CASES:
        got = _offered(shell, words, tmp_path)
        prefix = words[-1]
        if shell == "zsh":  # zsh's compadd filters by the prefix itself; the harness does not
            got = {g for g in got if g.startswith(prefix)}
        assert want <= got, (shell, words, got)
        assert not (refuse & got), (shell, words, got)


def test_bash_completion_autoloads_the_installed_file(tmp_path):
    """bash-completion loads `completions/<command>` from XDG_DATA_DIRS on first <TAB>: the file
    ships under the name it looks for (any bash-completion 2.x; `apexrl.bash` needs 2.9+)."""
    share = tmp_path / "share" / "bash-completion" / "completions"
    share.mkdir(parents=True)
    (share / "apexrl").write_bytes(SCRIPTS["bash"].read_bytes())
    probe = (
        "source /usr/share/bash-completion/bash_completion\n"
        "__load_completion apexrl || echo not-loaded\n"
        "complete -p apexrl\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_DIRS": str(tmp_path / "share")}
    out = subprocess.run(
        ["bash", "--norc", "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert out.stdout.strip().splitlines()[-1] == "complete -F _apexrl apexrl", out
