"""One trial of a run folder as a compact transcript for `apexrl eval view`.

Reads what the runner and the trial left: `trajectories/<trial>/trajectory.json` (Harbor
ATIF, as apexrl's agent writes it, or a plain `{"messages": [...]}` file), `verdicts.json`,
and from `logs/<trial>/` the final answer, the verifier's file changes and the failure.
Token ids and logprobs are dropped (they are most of an ATIF file's bytes and no reader
wants them on a page). Text longer than `cap` characters keeps its head and tail with a
marker saying how much was left out and where the whole text is.

Folders under logs/ can hold files a sandbox wrote: they are read without following links,
up to a size bound, and shown as text only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from apexrl.eval.models import LOGS_DIR, TRAJECTORIES_DIR

DEFAULT_CAP = 8000  # characters of one message, tool argument or result kept on the page
MAX_FILE_BYTES = 256 << 20  # a trajectory larger than this is not read
MAX_SMALL_BYTES = 4 << 20  # answer, grading, exception files


def _read(path: Path, max_bytes: int) -> bytes | None:
    from apexrl.artifacts.nofollow import RefusedPath, read_regular

    try:
        return read_regular(path, max_bytes=max_bytes)
    except (FileNotFoundError, NotADirectoryError, RefusedPath, PermissionError):
        return None


def _json(path: Path, max_bytes: int = MAX_SMALL_BYTES) -> Any:
    data = _read(path, max_bytes)
    if data is None:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def fold(text: str | None, cap: int, where: str) -> str | None:
    """`text` whole, or its first two thirds and last third of `cap` with a marker."""
    if text is None or len(text) <= cap:
        return text
    head, tail = cap * 2 // 3, cap // 3
    left = len(text) - head - tail
    return (
        f"{text[:head]}\n[... {left:,} characters not in this page; the whole text is in "
        f"{where} ...]\n{text[len(text) - tail :]}"
    )


def as_text(content: Any) -> str | None:
    """ATIF/OpenAI content (a string, or parts with text and images) as text."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    out.append(part["text"])
                else:
                    out.append(f"[{part.get('type') or 'part'}]")
        return "\n".join(out)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return orjson.dumps(content).decode()


def args_text(args: Any) -> str:
    """Tool-call arguments, pretty-printed JSON when they are JSON."""
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return args
    return orjson.dumps(args, option=orjson.OPT_INDENT_2).decode()


# --- steps ------------------------------------------------------------------------------


def _step(who: Any, content: Any, reasoning: Any, cap: int, where: str) -> dict[str, Any]:
    """A step's kind (system, user, else agent), text and reasoning, folded."""
    step: dict[str, Any] = {"k": who if who in ("system", "user") else "agent"}
    text = fold(as_text(content), cap, where)
    if text:
        step["text"] = text
    if reasoning:
        step["reasoning"] = fold(as_text(reasoning), cap, where)
    return step


def steps_from_atif(data: dict, cap: int, where: str) -> list[dict]:
    """ATIF steps as {k: system|user|agent, text, reasoning, calls, finish, tok}."""
    out = []
    for s in data.get("steps") or []:
        if not isinstance(s, dict):
            continue
        step = _step(s.get("source"), s.get("message"), s.get("reasoning_content"), cap, where)
        extra = s.get("extra") if isinstance(s.get("extra"), dict) else {}
        ours = extra.get("apexrl") if isinstance(extra.get("apexrl"), dict) else {}
        records = {c.get("call_id"): c for c in ours.get("tool_calls") or [] if isinstance(c, dict)}
        results: dict[Any, list[str]] = {}
        obs = s.get("observation") if isinstance(s.get("observation"), dict) else {}
        for r in obs.get("results") or []:
            if isinstance(r, dict):
                results.setdefault(r.get("source_call_id"), []).append(
                    fold(as_text(r.get("content")), cap, where) or ""
                )
        calls = []
        for c in s.get("tool_calls") or []:
            if not isinstance(c, dict):
                continue
            cid = c.get("tool_call_id")
            call = {
                "name": str(c.get("function_name") or "?"),
                "args": fold(args_text(c.get("arguments")), cap, where),
                "result": "\n".join(results.pop(cid, [])) if cid in results else None,
            }
            rec = records.get(cid)
            if rec:
                call["status"] = rec.get("status")
                call["dur"] = rec.get("duration_s")
                if rec.get("error"):
                    call["error"] = str(rec["error"])
            calls.append(call)
        for texts in results.values():  # results with no matching call (other agents)
            calls.append({"name": "(result)", "args": None, "result": "\n".join(texts)})
        if calls:
            step["calls"] = calls
        finish = ours.get("finish_reason") or extra.get("finish_reason")
        if finish:
            step["finish"] = finish
        metrics = s.get("metrics") if isinstance(s.get("metrics"), dict) else {}
        if metrics.get("prompt_tokens") is not None:
            step["tok"] = [metrics.get("prompt_tokens"), metrics.get("completion_tokens")]
        if ours.get("parse_errors"):
            step["notes"] = [str(e) for e in ours["parse_errors"]]
        out.append(step)
    return out


def steps_from_messages(messages: list, cap: int, where: str) -> list[dict]:
    """OpenAI-style messages (the recipe's trajectory.json) as steps."""
    out: list[dict] = []
    pending: dict[Any, dict] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "tool":
            text = fold(as_text(m.get("content")), cap, where) or ""
            call = pending.pop(m.get("tool_call_id"), None)
            if call is not None:
                call["result"] = text
            else:
                out.append({"k": "agent", "calls": [{"name": "(result)", "result": text}]})
            continue
        step = _step(role, m.get("content"), m.get("reasoning_content"), cap, where)
        calls = []
        for c in m.get("tool_calls") or []:
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict):
                continue
            call = {
                "name": str(fn.get("name") or "?"),
                "args": fold(args_text(fn.get("arguments")), cap, where),
                "result": None,
            }
            pending[c.get("id")] = call
            calls.append(call)
        if calls:
            step["calls"] = calls
        out.append(step)
    return out


# --- a trial ------------------------------------------------------------------------------


def error_message(run_dir: Path, trial_id: str, atif: dict | None) -> str | None:
    """Why a trial failed, in one line: the agent's own message, else the last line of
    the trial's exception.txt (Harbor's traceback) or the runner's error.txt."""
    ours = ((atif or {}).get("extra") or {}).get("apexrl") if isinstance(atif, dict) else None
    if isinstance(ours, dict) and ours.get("error"):
        return str(ours["error"])
    for path in (
        run_dir / TRAJECTORIES_DIR / trial_id / "error.txt",
        run_dir / LOGS_DIR / trial_id / "exception.txt",
    ):
        data = _read(path, MAX_SMALL_BYTES)
        if data:
            lines = [x.strip() for x in data.decode("utf-8", "replace").splitlines() if x.strip()]
            if lines:
                return lines[-1]
    return None


def read_trial(run_dir: Path, trial_id: str, *, cap: int = DEFAULT_CAP) -> dict:
    """The transcript of one trial (see the module docstring); never raises for a
    missing or malformed file: what could not be read is listed under "missing"."""
    tdir = run_dir / TRAJECTORIES_DIR / trial_id
    ldir = run_dir / LOGS_DIR / trial_id
    where = f"{TRAJECTORIES_DIR}/{trial_id}/trajectory.json"
    out: dict[str, Any] = {"steps": [], "missing": []}
    raw = _read(tdir / "trajectory.json", MAX_FILE_BYTES)
    atif = None
    if raw is None:
        out["missing"].append(f"{where} (no transcript was recorded)")
    else:
        try:
            atif = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            out["missing"].append(f"{where} is not JSON ({e})")
        del raw
    if isinstance(atif, dict):
        out["traj"] = where
        if isinstance(atif.get("steps"), list):
            out["steps"] = steps_from_atif(atif, cap, where)
        elif isinstance(atif.get("messages"), list):
            out["steps"] = steps_from_messages(atif["messages"], cap, where)
        ours = (atif.get("extra") or {}).get("apexrl")
        if isinstance(ours, dict):
            out["agent"] = {
                k: ours.get(k)
                for k in ("status", "model", "steps", "tool_outcomes", "repairs", "nudge_step")
                if ours.get(k) not in (None, {}, 0)
            }
            if ours.get("final_answer") is not None:
                out["answer"] = fold(str(ours["final_answer"]), cap, where)
    if "answer" not in out:
        data = _read(ldir / "agent" / "answer.txt", MAX_SMALL_BYTES)
        if data is not None:
            out["answer"] = fold(data.decode("utf-8", "replace"), cap, f"{LOGS_DIR}/{trial_id}")
    verdicts = _json(tdir / "verdicts.json")
    grading = _json(ldir / "verifier" / "grading.json")
    if not isinstance(verdicts, dict) and isinstance(grading, dict):
        verdicts = grading
    if isinstance(verdicts, dict) and isinstance(verdicts.get("verdicts"), list):
        out["verdicts"] = [
            {
                "c": str(v.get("criteria") or v.get("verifier_id") or "?"),
                "met": bool(v.get("met")),
                "src": v.get("source"),
                "why": fold(as_text(v.get("rationale")), cap, where),
                "err": v.get("error"),
                "judge": v.get("judge_model"),
            }
            for v in verdicts["verdicts"]
            if isinstance(v, dict)
        ]
    changes = grading.get("changes") if isinstance(grading, dict) else None
    if isinstance(changes, dict):
        out["files"] = {
            k: [str(p) for p in changes.get(k) or [] if isinstance(p, str)][:500]
            for k in ("created", "modified", "deleted")
        }
    msg = error_message(run_dir, trial_id, atif if isinstance(atif, dict) else None)
    if msg:
        out["error"] = fold(msg, 2000, f"{LOGS_DIR}/{trial_id}")
    return out
