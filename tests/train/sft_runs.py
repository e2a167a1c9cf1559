"""Eval runs to learn from, made the way users make them: `apexrl eval run` of a scripted
teacher (tests/scripted_engine.py behind the engine contract, real tokenizer) on the letters
task set, trials in the local sandbox, graded by apexrl's grader. The teacher answers each
task with the word given for its letter (a wrong word fails the task)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from apexrl.cli.app import app
from tests.scripted_engine import ScriptedEngine

LETTER = re.compile(r"contains the letter (\w)\.")


def teacher(tokenizer, answers: dict[str, str]):
    """A script step: the answer for the task's letter, read from the token-id prompt."""

    def answer(body: dict) -> str:
        text = tokenizer.decode(body["prompt"])
        found = LETTER.findall(text)
        return answers.get(found[-1], "tree") if found else "tree"

    return answer


def letters_tasks(root: Path) -> tuple[Path, Path]:
    from apexrl.train.jaxrl.letters import write_letters_tasks

    if (root / "letters-tasks").is_dir():
        return root / "letters-tasks", root / "letters-src" / "world_files_zipped"
    return write_letters_tasks(root)


def eval_run(
    tmp: Path,
    out: Path,
    answers: dict[str, str],
    *,
    attempts: int = 1,
    agent: str = "apexrl",
    limit: int | None = None,
) -> Path:
    """`apexrl eval run` of the teacher into `out` (returns it)."""
    tasks, worlds = letters_tasks(tmp / "letters")
    args = ["eval", "run", "-t", str(tasks), "--worlds", str(worlds), "-o", str(out)]
    args += ["--no-judge", "--max-steps", "2", "-k", str(attempts), "--max-tokens", "16"]
    if limit is not None:
        args += ["--limit", str(limit)]
    if agent == "oracle":
        res = CliRunner().invoke(app, [*args, "--agent", "oracle"])
        assert res.exit_code == 0, res.output
        return out
    from apexrl.tito.tokenizer import load_tokenizer

    tok = load_tokenizer("qwen3")
    steps = [teacher(tok, answers)] * (8 * attempts * 4)
    with ScriptedEngine(steps) as eng:
        engine = ["--endpoint", eng.url, "--tokenizer", "qwen3"]
        res = CliRunner().invoke(app, ["eval", "run", "scripted", *engine, *args[2:]])
    assert res.exit_code == 0, res.output
    return out
