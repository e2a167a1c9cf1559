"""A real eval run of apexrl's agent with a scripted model: `apexrl eval run` against the
scripted engine (tests.scripted_engine) in the local sandbox, with real tool calls,
real tool results and apexrl's grading. The model's replies depend on the task it sees
in the prompt and on how many turns it has taken: list the world's files, run a shell
command, then answer (the gold answer for the tasks in `right`, a wrong one otherwise).

Used by the viewer's browser test and to make demo runs:
    python -m tests.eval.scripted_agent TASKS WORLDS RUN_DIR [--right N] [--limit N] [-k K]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from apexrl.cli.app import app
from tests.scripted_engine import ScriptedEngine, tool_call_text


def _instructions(tasks: Path) -> dict[str, tuple[str, str]]:
    """task folder name -> (a line of its instruction to recognise it by, gold answer)."""
    out = {}
    for t in sorted(p for p in tasks.iterdir() if (p / "instruction.md").is_file()):
        first = (t / "instruction.md").read_text().strip().splitlines()[0][:80]
        gold = json.loads((t / "tests" / "golden_responses.json").read_text())["gold_response"]
        out[t.name] = (first, gold)
    return out


def responder(tasks: Path, right: set[str]):
    known = _instructions(tasks)

    def reply(body: dict, tok) -> str:
        prompt = tok.decode(body["prompt"])
        turn = prompt.count("<|im_start|>assistant") - 1
        name = next((n for n, (line, _) in known.items() if line in prompt), None)
        if turn == 0:
            return tool_call_text(
                "filesystem_list_files", {"path": "/"}, think="First, see what files exist."
            )
        if turn == 1:
            return tool_call_text(
                "code_execution_code_exec",
                {"code": "find . -type f | sort | head -40 && wc -c $(find . -type f | head -5)"},
                think="List every file with its size.",
            )
        if name is not None and name in right:
            return known[name][1]
        return "I could not find the figures the task asks for, so I cannot answer it."

    return reply


def scripted_eval(
    tasks: Path, worlds: Path, run_dir: Path, *, right: set[str], limit: int, attempts: int = 1
):
    """`apexrl eval run scripted --endpoint ...` over the first `limit` tasks; the result."""
    with ScriptedEngine([]) as eng:
        reply = responder(tasks, right)
        eng.push(*[lambda body, e=eng: reply(body, e.tok) for _ in range(5 * limit * attempts)])
        args = ["eval", "run", "scripted", "--endpoint", eng.url, "--tokenizer", "qwen3"]
        args += ["--tasks", str(tasks), "--worlds", str(worlds), "-o", str(run_dir)]
        args += ["--limit", str(limit), "-k", str(attempts), "--no-judge", "--max-steps", "5"]
        args += ["-n", str(min(limit * attempts, 4))]
        return CliRunner().invoke(app, args)


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("tasks", type=Path)
    ap.add_argument("worlds", type=Path)
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--right", type=int, default=1, help="the first N tasks get the gold answer")
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("-k", type=int, default=1)
    a = ap.parse_args(argv)
    names = sorted(_instructions(a.tasks))
    res = scripted_eval(
        a.tasks, a.worlds, a.run_dir, right=set(names[: a.right]), limit=a.limit, attempts=a.k
    )
    sys.stdout.write(res.stdout)
    sys.stderr.write(res.stderr)
    return res.exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
