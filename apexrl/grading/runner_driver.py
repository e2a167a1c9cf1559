"""Runs archipelago's grading runner for many trials in one interpreter.

Started by apexrl.grading.archipelago with the runner venv's Python, in the built
runner folder. Importing the runner costs seconds to a minute (LiteLLM and its
dependencies); this driver pays that once. It reads one JSON array of command-line
arguments per line on stdin, runs `runner.main` as `python -m runner.main ARGS`
would (runpy, `__main__`), and answers each line with `DONE_MARK <exit code>` on
stdout. Standalone on purpose: it runs under the runner's interpreter, not apexrl's.
"""

import json
import os
import runpy
import sys
import traceback

DONE_MARK = "@@apexrl-runner-done@@"


def run_one(argv: list) -> int:
    sys.argv = ["runner.main", *argv]
    try:
        runpy.run_module("runner.main", run_name="__main__", alter_sys=False)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # reported on stderr, the worker lives on
        traceback.print_exc()
        return 1
    return 0


def main() -> None:
    sys.path.insert(0, os.getcwd())
    if "--warm" in sys.argv:
        import runner.main  # noqa: F401 - the import is the expensive part

        print(f"{DONE_MARK} 0", flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        rc = run_one(json.loads(line))
        sys.stderr.flush()
        print(f"{DONE_MARK} {rc}", flush=True)


if __name__ == "__main__":
    main()
