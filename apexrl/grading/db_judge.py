"""A `.db` criterion ("Database Files (.db)"), judged as archipelago judges it: the judge
reads a summary of the row diff of the trial's app databases (.apps_data/**.db) and
explores it through tools (apexrl.grading.db_diff.TOOLS) until it calls
`submit_verdict`, at most MAX_CALLS judge calls. No verdict by then: not met (the
peer's rule). archipelago also offers its judge a Python tool over the diff; apexrl
does not run code a judge writes over sandbox data (docs/parity.md).

Every request stays within the judge's budget: when the conversation grows past it, the
oldest tool results are replaced by a note (apexrl.grading.budget).
"""

from __future__ import annotations

import json
from pathlib import Path

from apexrl.grading import budget
from apexrl.grading.db_diff import TOOLS, diff_databases, private_dir, run_tool, summary
from apexrl.grading.judge import Judge, JudgeVerdict, prompt_hash

MAX_CALLS = 250  # judge calls for one criterion (archipelago's bound)
DB_LABEL = "Database Files (.db)"

SYSTEM = """You are an expert grader checking an AI agent's changes to application databases
against ONE criterion. You are given a summary of the rows the agent added, deleted and
modified, table by table. Use the tools to look at the rows that matter for the
criterion (inspect_table, get_rows, search_rows), then call submit_verdict with
result 1 (met) or 0 (not met) and a short reason.

- Judge exactly what the criterion asks, from the rows you saw.
- get_rows sees the first 100 changed rows of each kind; to decide that a value is
  absent from a table with more, use search_rows.
- When the table the criterion needs shows no change of the needed kind, or a search
  finds nothing, the criterion is not met: submit 0 without further searching."""

NUDGE = "Call submit_verdict with result 1 or 0 and your reason."
ELIDED = "(an earlier tool result, left out to keep within the judge's context budget)"


def app_databases(files) -> list[tuple[str, Path | None, Path | None]]:
    """(shown path, before, after) of each changed app database among the items."""
    return [
        (f.path, f.before_path, f.after_path)
        for f in files or []
        if f.path.startswith(".apps_data/") and f.path.endswith(".db")
    ]


async def judge_databases(judge: Judge, criterion: str, files) -> JudgeVerdict:
    pairs = app_databases(files)
    if not pairs:
        return JudgeVerdict(
            met=False,
            rationale="no application database (.apps_data/**.db) changed: nothing to grade",
            attempts=0,
        )
    with private_dir() as tmp:
        try:
            diff = diff_databases(pairs, Path(tmp))
        except (OSError, ValueError) as e:  # a refused link, an oversized or unreadable file
            return JudgeVerdict(
                met=False, rationale=f"the databases could not be read: {e}", attempts=0
            )
        except Exception as e:  # sqlite3.Error: not a database, or a malformed one
            return JudgeVerdict(
                met=False, rationale=f"the databases could not be diffed: {e}", attempts=0
            )
        return await _loop(judge, criterion, diff)


async def _loop(judge: Judge, criterion: str, diff) -> JudgeVerdict:
    s = judge.settings
    limit = budget.prompt_limit(budget.context_tokens(s.model, s.context_tokens))
    first = (
        f"CRITERION\n{criterion.strip()}\n\nDATABASE CHANGES\n{summary(diff)}\n\n"
        "Explore the changes with the tools, then call submit_verdict."
    )
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": first},
    ]
    digest = prompt_hash(SYSTEM, first)
    for call in range(1, MAX_CALLS + 1):
        _fit(messages, limit, s.model)
        if s.cache is not None:
            s.cache.count_call()
        msg = await judge.request(messages, tools=TOOLS)
        calls = list(getattr(msg, "tool_calls", None) or [])
        if not calls:
            text = msg.content or ""
            verdict = _text_verdict(text)
            if verdict is not None:
                return JudgeVerdict(verdict[0], verdict[1], call, digest)
            messages += [
                {"role": "assistant", "content": text[:2000]},
                {"role": "user", "content": NUDGE},
            ]
            continue
        messages.append(
            {
                "role": "assistant",
                "content": msg.content or "",
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            try:
                args = json.loads(c.function.arguments or "{}")
            except json.JSONDecodeError:
                args = {}
            args = args if isinstance(args, dict) else {}
            if c.function.name == "submit_verdict":
                met = args.get("result") in (1, "1", True)
                return JudgeVerdict(met, str(args.get("reason") or ""), call, digest)
            reply = run_tool(diff, c.function.name or "", args)
            messages.append({"role": "tool", "tool_call_id": c.id, "content": reply})
    return JudgeVerdict(
        False,
        f"no verdict after {MAX_CALLS} judge calls: the changes the criterion needs were not found",
        MAX_CALLS,
        digest,
    )


def _text_verdict(text: str) -> tuple[bool, str] | None:
    """A verdict written as text: {"result": 0|1, "reason": ...} or the criterion verdict."""
    try:
        obj = json.loads(text.strip())
    except (json.JSONDecodeError, ValueError):
        return None
    if isinstance(obj, dict) and "result" in obj:
        return obj["result"] in (1, "1", True), str(obj.get("reason") or "")
    if isinstance(obj, dict) and isinstance(obj.get("is_criteria_true"), bool):
        return obj["is_criteria_true"], str(obj.get("rationale") or "")
    return None


def _fit(messages: list[dict], limit: int, model: str) -> None:
    """Elide the oldest tool results until the conversation fits `limit` tokens."""
    sizes = [budget.count_tokens(json.dumps(m, default=str), model) for m in messages]
    total = sum(sizes)
    for i, m in enumerate(messages):
        if total <= limit:
            return
        if m["role"] == "tool" and m["content"] != ELIDED:
            m["content"] = ELIDED
            new = budget.count_tokens(json.dumps(m, default=str), model)
            total += new - sizes[i]
