"""The acting miniature end to end (issue 40): data, base model, teacher, warm start, RL,
held-out evals, the final vLLM eval with its prefix-cache share. Every stage is a
command a user runs (`apexrl tasks synthetic/convert`, `apexrl engine make-tiny`,
`apexrl eval run`, `apexrl train sft`, `apexrl train export`, `apexrl train`,
`apexrl eval report`), run here as a subprocess of this interpreter.

Used by tests/benchmarks/test_bench_acting.py (`make bench-acting`) and by the train
tier's 2-step wiring test (tests/train/test_acting.py). The teacher (tests/acting_teacher)
serves only the teacher eval on the train split; RL and the held-out evals never see it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Plan:
    root: Path
    seed: int = 0  # the model's init and the training seed
    train_seed: int = 100  # the train split's seed
    held_seed: int = 200  # the held-out split's seed
    train_worlds: int = 32
    held_worlds: int = 20
    hidden: int = 128
    layers: int = 2
    teacher_tasks: int = 64  # teacher trials on the train split (the warm start's data)
    sft_recipe: Path = REPO / "recipes" / "sft" / "acting-sft-cpu.toml"
    rl_recipe: Path = REPO / "recipes" / "acting-cpu.toml"
    sft_set: list[str] = field(default_factory=list)
    rl_set: list[str] = field(default_factory=list)
    eval_attempts: int = 1
    max_tokens: int = 40  # per turn
    max_steps: int = 4  # agent turns per trial
    concurrency: int = 2
    # the world's tools offered (`--tool`): the two the tasks need, so the prompt is ~650
    # tokens, not ~1,100 of six file-tool schemas (the teacher uses exactly these)
    tools: tuple[str, ...] = ("filesystem_search_files", "filesystem_read_text_file")
    vllm: bool = True
    stages: tuple[str, ...] = ("base", "warm", "rl")


def apexrl(*args: str, env: dict | None = None, timeout: float = 3600) -> str:
    """Run `apexrl ARGS` with this interpreter; stdout, or an AssertionError with the tail."""
    e = {**os.environ, "HARBOR_TELEMETRY": "0", **(env or {})}
    p = subprocess.run(
        [sys.executable, "-m", "apexrl", *args],
        capture_output=True,
        text=True,
        env=e,
        timeout=timeout,
        cwd=REPO,
    )
    if p.returncode != 0:
        raise AssertionError(
            f"apexrl {' '.join(args)} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        )
    return p.stdout


# torch decoding of a tiny model is memory-bound: one thread each on a shared 2-core box
ENGINE_ENV = {"OMP_NUM_THREADS": "1"}


def eval_args(plan: Plan, tasks: Path, worlds: Path, out: Path) -> list[str]:
    return [
        "--tasks", str(tasks), "--worlds", str(worlds), "-o", str(out), "--no-judge",
        "--max-steps", str(plan.max_steps), "--max-tokens", str(plan.max_tokens),
        "-n", str(plan.concurrency), "-k", str(plan.eval_attempts), "--seed", str(plan.seed),
        "--json", "--force", *[x for t in plan.tools for x in ("--tool", t)],
    ]  # fmt: skip


def trial_figures(run: Path) -> dict:
    """Tool calls and final answers per trial of an eval run (its agent records)."""
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x]
    calls, answered = [], 0
    for r in rows:
        calls.append(int(r.get("tool_calls") or 0))
        rec = run / "logs" / r["trial_id"] / "agent" / "apexrl_agent.json"
        if rec.is_file():
            a = json.loads(rec.read_text())
            answered += bool((a.get("final_answer") or "").strip()) and a["status"] == "complete"
    n = max(len(rows), 1)
    return {
        "trials": len(rows),
        "tool_calls_per_trial": sum(calls) / n,
        "share_with_tool_call": sum(c >= 1 for c in calls) / n,
        "share_final_answer": answered / n,
    }


def summary(run: Path) -> dict:
    s = json.loads((run / "summary.json").read_text())
    return {
        "pass_at_1": s["pass_at_1"],
        "errors": s.get("errors", {}),
        "n_tasks": s["n_tasks"],
        **trial_figures(run),
    }


def paired(a: Path, b: Path) -> dict:
    out = json.loads(apexrl("eval", "report", str(a), str(b), "-f", "json"))
    return out["comparison"]["overall"]["metrics"]["pass_at_1"]


# --- the prefix cache: a proxy that attributes vLLM's counters to each request ---------
METRIC = re.compile(r"^vllm:prefix_cache_(hits|queries)_total(?:\{[^}]*\})? ([0-9.eE+-]+)$", re.M)


def cache_counters(url: str) -> dict[str, float]:
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=30).text
    out = {"hits": 0.0, "queries": 0.0}
    for kind, v in METRIC.findall(text):
        out[kind] += float(v)
    return out


class CacheProbe:
    """A proxy in front of vLLM that forwards one request at a time and reads the prefix
    cache counters before and after each: a request whose prompt extends an earlier one
    (a later turn of a trial) is a continuation; the share is the cache hits of the
    continuations over their prompt tokens."""

    def __init__(self, upstream: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        self.upstream = upstream
        self.rows: list[dict] = []
        self.prompts: list[tuple[int, ...]] = []
        lock = threading.Lock()
        probe = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _relay(self, method: str) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else None
                with lock:
                    before = cache_counters(probe.upstream) if method == "POST" else None
                    r = httpx.request(
                        method,
                        probe.upstream + self.path,
                        content=body,
                        headers={"content-type": "application/json"},
                        timeout=600,
                    )
                    if before is not None and self.path == "/v1/completions":
                        after = cache_counters(probe.upstream)
                        probe._record(json.loads(body or b"{}"), before, after)
                self.send_response(r.status_code)
                self.send_header("content-type", r.headers.get("content-type", "text/plain"))
                self.send_header("content-length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            def do_GET(self):
                self._relay("GET")

            def do_POST(self):
                self._relay("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _record(self, body: dict, before: dict, after: dict) -> None:
        prompt = tuple(body.get("prompt") or ())
        cont = any(len(p) < len(prompt) and prompt[: len(p)] == p for p in self.prompts[-64:])
        self.prompts.append(prompt)
        self.rows.append(
            {
                "prompt_tokens": len(prompt),
                "continuation": cont,
                "hits": after["hits"] - before["hits"],
                "queries": after["queries"] - before["queries"],
            }
        )

    def figures(self) -> dict:
        cont = [r for r in self.rows if r["continuation"]]
        tokens = sum(r["prompt_tokens"] for r in cont)
        hits = sum(r["hits"] for r in cont)
        return {
            "requests": len(self.rows),
            "continuations": len(cont),
            "continuation_prompt_tokens": tokens,
            "continuation_cache_hits": hits,
            "share_after_first_turn": hits / tokens if tokens else None,
            "hits_total": sum(r["hits"] for r in self.rows),
            "queries_total": sum(r["queries"] for r in self.rows),
        }

    def close(self) -> None:
        self.server.shutdown()


def serve_vllm(model: Path, log: Path, window: int = 4096):
    """`apexrl engine serve --engine vllm` (vLLM's CPU build) as a subprocess: (proc, url)."""
    py = os.environ.get("APEXRL_VLLM_PYTHON")
    args = [sys.executable, "-m", "apexrl", "engine", "serve", str(model), "--engine", "vllm"]
    args += ["--port", "0", "--max-model-len", str(window), "--log-file", str(log)]
    args += ["--served-model-name", "acting-rl"]
    if py:
        args += ["--vllm-python", py]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ, **ENGINE_ENV}
    )
    line = proc.stdout.readline()  # one JSON line once it answers
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"vLLM did not start (exit {proc.returncode}); see {log}")
    return proc, json.loads(line)["url"]


# --- the pipeline ----------------------------------------------------------------------
def run_pipeline(plan: Plan, say: Callable[[str], None] = print) -> dict:
    from apexrl.tasks import tooluse
    from tests.acting_teacher import TeacherEngine

    root = plan.root
    root.mkdir(parents=True, exist_ok=True)
    t_all = time.monotonic()
    times: dict[str, float] = {}
    res: dict = {"plan": {k: str(v) for k, v in plan.__dict__.items()}}

    def timed(name: str):
        t0 = time.monotonic()

        def done():
            times[name] = round(time.monotonic() - t0, 1)
            say(f"[acting] {name} done in {times[name]:.0f}s")
            # what is known so far, kept should a later stage fail
            (root / "acting.json").write_text(json.dumps(res | {"times_s": times}, indent=1))

        return done

    done = timed("data")
    src, train_tasks, _ = tooluse.write_split(
        root / "data" / "train", seed=plan.train_seed, n_worlds=plan.train_worlds
    )
    hsrc, held_tasks, _ = tooluse.write_split(
        root / "data" / "held",
        seed=plan.held_seed,
        n_worlds=plan.held_worlds,
        avoid_src=src,
    )
    train_worlds, held_worlds = src / "world_files_zipped", hsrc / "world_files_zipped"
    done()

    done = timed("base_model")
    base = root / "models" / "base"
    apexrl(
        "engine", "make-tiny", str(base), "--seed", str(plan.seed),
        "--hidden-size", str(plan.hidden), "--layers", str(plan.layers), "--window", "4096",
        "--untied",
    )  # fmt: skip
    done()

    done = timed("teacher")
    teacher_run = root / "runs" / "teacher"
    with TeacherEngine([], model="teacher") as eng:
        args = ["eval", "run", "teacher", "--endpoint", eng.url, "--tokenizer", str(base)]
        args += eval_args(plan, train_tasks, train_worlds, teacher_run)
        args += ["--limit", str(plan.teacher_tasks)]
        apexrl(*args)
    res["teacher"] = summary(teacher_run)
    done()

    done = timed("sft")
    sft_run = root / "runs" / "sft"
    sets = [f'checkpoint.path="{sft_run}/ckpts"', f'model.path="{base}"', *plan.sft_set]
    apexrl(
        "train", "sft", "--recipe", str(plan.sft_recipe), "--from", str(teacher_run),
        *[x for s in sets for x in ("--set", s)], env=ENGINE_ENV,
    )  # fmt: skip
    warm = root / "models" / "warm"
    apexrl("train", "export", str(sft_run), "-o", str(warm))
    done()

    done = timed("rl")
    rl_run = root / "runs" / "rl"
    sets = [f'checkpoint.path="{rl_run}/ckpts"', f'data.worlds_dir="{train_worlds}"']
    sets += [f"training.seed={plan.seed}", *plan.rl_set]
    apexrl(
        "train", str(plan.rl_recipe), "--model", str(warm), "--data", str(train_tasks),
        *[x for s in sets for x in ("--set", s)], env=ENGINE_ENV,
    )  # fmt: skip
    rl = root / "models" / "rl"
    apexrl("train", "export", str(rl_run), "-o", str(rl))
    steps = [json.loads(x) for x in (rl_run / "metrics.jsonl").read_text().splitlines() if x]
    res["rl_steps"] = [
        {k: s[k] for k in ("step", "reward_mean", "n_trained", "loss", "rollout_s", "train_s")}
        | {"step_s": s["step_s"]}
        for s in steps
    ]
    res["s_per_rl_step"] = sum(s["step_s"] for s in steps) / max(len(steps), 1)
    done()

    models = {"base": base, "warm": warm, "rl": rl}
    runs = {}
    for name in plan.stages:
        done = timed(f"eval_{name}")
        runs[name] = root / "runs" / f"held-{name}"
        apexrl(
            "eval", "run", str(models[name]), "--engine", "local",
            *eval_args(plan, held_tasks, held_worlds, runs[name]), env=ENGINE_ENV,
        )  # fmt: skip
        res[name] = summary(runs[name])
        done()
    if "warm" in runs and "rl" in runs:
        res["rl_minus_warm"] = paired(runs["warm"], runs["rl"])
    if "base" in runs and "warm" in runs:
        res["warm_minus_base"] = paired(runs["base"], runs["warm"])

    if plan.vllm:
        done = timed("final_vllm")
        res["final_vllm"] = final_vllm(plan, rl, held_tasks, held_worlds)
        done()
    res["times_s"] = times
    res["wall_s"] = round(time.monotonic() - t_all, 1)
    (root / "acting.json").write_text(json.dumps(res, indent=1))
    return res


def final_vllm(plan: Plan, model: Path, tasks: Path, worlds: Path) -> dict:
    """The held-out eval of `model` on vLLM's CPU build, one request at a time through the
    CacheProbe: the eval's figures and the prefix cache's."""
    root = plan.root
    proc, url = serve_vllm(model, root / "vllm.log")
    probe = CacheProbe(url)
    try:
        final = root / "runs" / "held-rl-vllm"
        args = eval_args(plan, tasks, worlds, final)
        args[args.index("-n") + 1] = "1"  # one request at a time: exact attribution
        apexrl(
            "eval", "run", "acting-rl", "--endpoint", probe.url, "--tokenizer", str(model), *args
        )
        return summary(final) | {"prefix_cache": probe.figures()}
    finally:
        probe.close()
        proc.terminate()
        proc.wait(timeout=120)
