"""A synthetic run folder of any size, laid out as `apexrl eval run` leaves it: run.json,
results.parquet (written by the runner's own writer), summary.json, and per trial
trajectories/<trial>/trajectory.json in the ATIF shape apexrl's agent writes (system and
user steps, agent steps with tool calls, observations and extra.apexrl, but no token ids)
and verdicts.json, with logs/<trial>/verifier/grading.json's file changes.

Text comes from slices of a fixed pseudo-random word corpus, so it compresses about as
prose and tables do. Sizes follow APEX-Agents' shape: 10-40 agent steps, tool results
mostly a few KB with a long tail (up to the 42,000-character cap), 1-10 criteria.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import orjson

DOMAINS = ("investment-banking", "law", "management-consulting")
TOOLS = (
    "filesystem_list_files",
    "filesystem_read_text_file",
    "excel_read_tab",
    "code_execution_code_exec",
    "pdfs_read_pdf_pages",
    "mail_search_messages",
)
WORDS = (
    "revenue margin deal memo clause liability cap termination notice client board "
    "forecast EBITDA multiple valuation quarter fiscal total market region growth "
    "the of and to in for with on by from as at that this is are was were be "
    "agreement party section schedule table sheet cell value formula report draft"
)
ERRORS = (
    ("agent_timeout", "agent_timeout", "the agent ran past its 3600 s budget"),
    ("context_length", "context_length", "prompt of 262,400 tokens exceeds the 262,144 window"),
    ("error", "llm_transient", "engine answered 503 three times: Service Unavailable"),
)


def corpus(rng: np.random.Generator, n_words: int = 60_000) -> str:
    words = WORDS.split()
    picks = rng.integers(0, len(words), size=n_words)
    out = []
    for i, w in enumerate(picks):
        out.append(words[w])
        if i % 9 == 4:
            out.append(f"{rng.integers(0, 100_000):,}")
        if i % 17 == 16:
            out.append("\n")
    return " ".join(out)


class _Text:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.text = corpus(self.rng)

    def take(self, n: int) -> str:
        n = max(1, min(int(n), len(self.text) - 1))
        start = int(self.rng.integers(0, len(self.text) - n))
        return self.text[start : start + n]


def atif(src: _Text, trial_id: str, n_steps: int, status: str, error: str | None) -> dict:
    rng = src.rng
    steps = [
        {"step_id": 1, "source": "system", "message": "You are an expert. " + src.take(600)},
        {"step_id": 2, "source": "user", "message": src.take(int(rng.integers(200, 1200)))},
    ]
    prompt = 2000
    for k in range(n_steps):
        last = k == n_steps - 1
        step: dict = {
            "step_id": len(steps) + 1,
            "source": "agent",
            "model_name": "synthetic",
            "message": src.take(int(rng.integers(20, 400))),
            "reasoning_content": src.take(int(rng.integers(50, 800))),
            "metrics": {"prompt_tokens": prompt, "completion_tokens": int(rng.integers(20, 900))},
            "extra": {"finish_reason": "stop", "apexrl": {"tool_calls": []}},
        }
        if not last:
            name = TOOLS[int(rng.integers(0, len(TOOLS)))]
            cid = f"call_{k}"
            size = int(min(rng.lognormal(7.3, 1.0), 42_000))
            step["tool_calls"] = [
                {
                    "tool_call_id": cid,
                    "function_name": name,
                    "arguments": {"path": "/" + src.take(30).replace(" ", "_"), "limit": 50},
                }
            ]
            step["observation"] = {"results": [{"source_call_id": cid, "content": src.take(size)}]}
            st = "ok" if rng.random() > 0.04 else "mcp_error"
            step["extra"]["apexrl"]["tool_calls"] = [
                {"call_id": cid, "name": name, "status": st, "duration_s": 0.2, "chars": size}
            ]
            prompt += size // 4
        steps.append(step)
    return {
        "schema_version": "ATIF-v1.2",
        "session_id": trial_id,
        "trajectory_id": trial_id,
        "agent": {"name": "apexrl", "version": "0", "model_name": "synthetic"},
        "steps": steps,
        "extra": {
            "apexrl": {
                "status": status,
                "error": error,
                "final_answer": steps[-1]["message"],
                "model": "synthetic",
                "steps": n_steps,
                "tool_outcomes": {"ok": n_steps - 1},
            }
        },
    }


def write_run(run_dir: Path, *, n_tasks: int, attempts: int, seed: int = 0) -> list[dict]:
    """Write the run folder; its rows."""
    from apexrl.eval import resume
    from apexrl.eval.metrics import summarize
    from apexrl.eval.models import DatasetInfo, EvalResultRow, EvalRunConfig

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    src = _Text(seed)
    rng = src.rng
    skill = rng.beta(1.2, 4.0, size=n_tasks)
    rows = []
    for t in range(n_tasks):
        name = f"{DOMAINS[t % 3]}-task-{t:04d}-{seed:02d}"
        total = int(rng.integers(1, 11))
        criteria = [src.take(int(rng.integers(30, 120))) for _ in range(total)]
        for a in range(attempts):
            tid = f"{name}.a{a}"
            r = rng.random()
            status, eclass, msg = "complete", None, None
            if r < 0.04:
                status, eclass, msg = ERRORS[int(rng.integers(0, len(ERRORS)))]
            met = total if rng.random() < skill[t] else int(rng.integers(0, total))
            met = met if status == "complete" else 0
            n_steps = int(rng.integers(10, 41))
            tdir = run_dir / "trajectories" / tid
            tdir.mkdir(parents=True, exist_ok=True)
            (tdir / "trajectory.json").write_bytes(
                orjson.dumps(atif(src, tid, n_steps, status, msg))
            )
            verdicts = [
                {
                    "criteria": c,
                    "met": i < met,
                    "source": "judge",
                    "rationale": src.take(int(rng.integers(100, 600))),
                    "judge_model": "gemini/gemini-2.5-flash",
                }
                for i, c in enumerate(criteria)
            ]
            (tdir / "verdicts.json").write_bytes(orjson.dumps({"verdicts": verdicts}))
            vdir = run_dir / "logs" / tid / "verifier"
            vdir.mkdir(parents=True, exist_ok=True)
            changes = {
                "created": [f"filesystem/outputs/{name}.xlsx"],
                "modified": [],
                "deleted": [],
            }
            (vdir / "grading.json").write_bytes(orjson.dumps({"changes": changes}))
            rows.append(
                EvalResultRow(
                    trial_id=tid,
                    task_id=f"task_{seed:02d}{t:030x}",
                    domain=DOMAINS[t % 3],
                    world_id=f"world_{t % 33}",
                    attempt=a,
                    status=status,
                    error_class=eclass,
                    reward=met / total if status == "complete" else 0.0,
                    criteria_met=met,
                    criteria_total=total,
                    turns=n_steps,
                    tokens_in=int(rng.integers(10_000, 200_000)),
                    tokens_out=int(rng.integers(1_000, 20_000)),
                    tool_calls=n_steps - 1,
                    tool_call_success_rate=1.0,
                    duration_s=float(rng.uniform(30, 900)),
                )
            )
    resume.write_results(run_dir, rows)
    resume.write_summary(run_dir, summarize(rows))
    config = EvalRunConfig(
        apexrl_version="0.1.0",
        created_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        dataset=DatasetInfo(source="synthetic", digest="sha256:" + "0" * 64, n_tasks=n_tasks),
        attempts=attempts,
    )
    (run_dir / "run.json").write_text(config.model_dump_json(indent=2))
    return [r.model_dump() for r in rows]
