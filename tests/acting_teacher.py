"""The teacher of the acting miniature: a scripted policy for the tool-use family
(apexrl.tasks.tooluse) behind the TITO `/v1/completions` contract.

It reads each request's token-id prompt (decoded with the real tokenizer), finds the
task's instruction and the tool results that came after it, and writes the next
assistant turn as a model would: a Hermes JSON tool call, or the final answer.

- read: `filesystem_read_text_file(file_path=<the path in the prompt>)`, then the code.
- find: `filesystem_search_files(pattern="*.csv", path="/data")`, then a read of the
  path the search returned, then the code.

The code is the line of the file after the one naming the key (a note: "The code is",
a CSV: its header "code"). Each reply goes through the real agent loop: the trial's
sandbox runs the tools, apexrl's grader grades the answer. It never sees the answer
any other way. Registered as the engine "acting-teacher" from tests/conftest.py, the
way an outside package adds one; bench-acting starts it on 127.0.0.1 for the warm-start
eval run only (never during RL or held-out evals).
"""

from __future__ import annotations

import re

from apexrl.engine.registry import EngineEntry
from tests.scripted_engine import ScriptedEngine, launcher, tool_call_text

READ = re.compile(r"Read (/\S+?\.txt) and reply with the (\w+) in it\.")
FIND = re.compile(r"Find the CSV file in (/\S+) and reply with the (\w+) in it\.")
RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.S)
LAST_USER = "<|im_start|>user\n"


def next_turn(prompt: str) -> str:
    """The teacher's next assistant turn for a decoded prompt."""
    user = prompt.rfind(LAST_USER)
    # the instruction is the last user turn that is not a wrapper of tool results
    while user > 0 and prompt.startswith("<tool_response>", user + len(LAST_USER)):
        user = prompt.rfind(LAST_USER, 0, user)
    if user < 0:
        return "I cannot tell what the task is."
    turn = prompt[user + len(LAST_USER) :]
    results = RESPONSE.findall(turn)
    if m := READ.search(turn):
        path, key = m.group(1), m.group(2)
        if not results:
            return tool_call_text("filesystem_read_text_file", {"file_path": path})
        return code_in(results[-1], key)
    if m := FIND.search(turn):
        folder, key = m.group(1), m.group(2)
        if not results:
            return tool_call_text("filesystem_search_files", {"pattern": "*.csv", "path": folder})
        if len(results) == 1:
            paths = [ln for ln in results[0].splitlines() if ln.startswith(folder + "/")]
            if not paths:
                return "No CSV file found."
            return tool_call_text("filesystem_read_text_file", {"file_path": paths[0]})
        return code_in(results[-1], key)
    return "I cannot tell what the task is."


def code_in(text: str, key: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines[:-1]):
        if ln.lower() in (key, f"the {key} is"):
            return lines[i + 1]
    return "No code found."


class TeacherEngine(ScriptedEngine):
    """A ScriptedEngine whose every step is the teacher's next turn."""

    thread_name = "apexrl-acting-teacher"

    def _next(self):
        return lambda body: next_turn(self.tok.decode(body["prompt"]))


launch = launcher(TeacherEngine, "teacher")


ENGINE = EngineEntry(
    "acting-teacher",
    "the acting miniature's scripted teacher for the tool-use tasks (tests, bench)",
    launch="tests.acting_teacher:launch",
    selectable=False,
)
