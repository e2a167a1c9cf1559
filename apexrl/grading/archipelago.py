"""archipelago's own grading runner, run from a checkout the user names.

apexrl never copies archipelago's code or text: it builds the checkout's `grading/`
project into a venv of its own (uv, Python 3.13) keyed by the folder's content, writes
the runner's input files (sparse snapshots, trajectory, verifiers, settings), runs
`python -m runner.main` with a bare environment and reads its grades back into
apexrl's GradeResult.

Snapshots hold only what a trial changed: `initial.zip` the before-state of modified
and deleted files, `final.zip` the after-state of created and modified files. The
runner's snapshot diff over them is the diff over the whole worlds (unchanged files
appear in neither).

The checkout, its built venv (where it lives, when it is built) and the input formats:
apexrl.artifacts.archipelago_runner.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from apexrl.artifacts.archipelago_runner import (
    EVAL_CONFIGS,
    SCORING,
    Checkout,
    resolve_checkout,
    runner_dir,
    runner_verifiers,
)
from apexrl.errors import ApexError
from apexrl.secrets import JUDGE_KEYS, VERTEX_ENV

RUN_TIMEOUT_S = 3900.0  # the runner's own judge timeout is 3600 s per call
# what a judge model may need from the environment (the copy vendored into converted
# tasks, tasks/vendored/archipelago_grade.py, passes these and more: a test holds it)
PASS_KEYS = JUDGE_KEYS + VERTEX_ENV


# --- the runner's inputs -------------------------------------------------------------


def sparse_snapshot(path: Path, files: dict[str, bytes]) -> None:
    """A snapshot zip (`filesystem/...`, `.apps_data/...`) holding `files`."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in sorted(files):
            z.writestr(zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0)), files[rel])


def grading_settings(model: str, api_base: str | None, api_key: str | None = None) -> dict:
    extra = {"api_base": api_base, "api_key": api_key or "none"} if api_base else None
    return {"llm_judge_model": model, "llm_judge_extra_args": extra}


@dataclass
class RunnerInputs:
    task_id: str
    criteria: list[dict]
    messages: list[dict]
    before: dict[str, bytes]  # 'filesystem/x' -> bytes: modified and deleted files
    after: dict[str, bytes]  # created and modified files
    elapsed_s: float = 0.0


@dataclass
class RunnerResult:
    status: str  # the runner's grading_run_status
    final_score: float
    verifiers: list[dict]  # the runner's verifier_results
    error: str | None = None
    duration_s: float = 0.0


def write_inputs(
    folder: Path, inp: RunnerInputs, model: str, api_base: str | None, api_key: str | None = None
) -> list[str]:
    """The runner's input files in `folder`; the command-line arguments naming them."""
    folder.mkdir(parents=True, exist_ok=True)
    sparse_snapshot(folder / "initial.zip", inp.before)
    sparse_snapshot(folder / "final.zip", inp.after)
    traj = {
        "messages": inp.messages,
        "status": "completed",
        "time_elapsed": float(inp.elapsed_s),
        "output": {},
    }
    files = {
        "trajectory.json": traj,
        "settings.json": grading_settings(model, api_base, api_key),
        "verifiers.json": runner_verifiers(inp.criteria, inp.task_id),
        "eval_configs.json": EVAL_CONFIGS,
        "scoring.json": SCORING,
    }
    for name, obj in files.items():
        (folder / name).write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return [
        "--grading-run-id",
        "apexrl",
        "--trajectory-id",
        inp.task_id or "trial",
        "--initial-snapshot",
        str(folder / "initial.zip"),
        "--final-snapshot",
        str(folder / "final.zip"),
        "--trajectory",
        str(folder / "trajectory.json"),
        "--grading-settings",
        str(folder / "settings.json"),
        "--verifiers",
        str(folder / "verifiers.json"),
        "--eval-configs",
        str(folder / "eval_configs.json"),
        "--scoring-config",
        str(folder / "scoring.json"),
        "--output",
        str(folder / "grades.json"),
    ]


def runner_env() -> dict[str, str]:
    """A bare environment: no Datadog, Redis or S3 (local mode), local file extraction,
    LiteLLM's bundled cost map (no fetch), and only the judge's provider keys."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "FILE_EXTRACTION_STRATEGY": "LOCAL_ONLY",
    }
    for k in PASS_KEYS:
        if os.environ.get(k):
            env[k] = os.environ[k]
    return env


class RunnerWorker:
    """One long-lived runner interpreter (runner_driver.py): jobs one at a time."""

    def __init__(self, runner: Path) -> None:
        self.runner = runner
        self.log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - lives with the worker
        self.proc = subprocess.Popen(
            [str(runner / ".venv" / "bin" / "python"), str(DRIVER)],
            cwd=runner,
            env=runner_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name="apexrl-runner-out").start()
        self.lock = threading.Lock()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, argv: list[str], timeout_s: float) -> tuple[int, str]:
        """(exit code, the runner's stderr for this job)."""
        with self.lock:
            self.log.seek(0, os.SEEK_END)
            start = self.log.tell()
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(argv) + "\n")
            self.proc.stdin.flush()
            deadline = time.monotonic() + timeout_s
            rc: int | None = None
            while rc is None:
                left = deadline - time.monotonic()
                try:
                    line = self.lines.get(timeout=max(left, 0.01))
                except queue.Empty:
                    self.close()
                    raise ApexError(
                        f"archipelago's grading runner took over {timeout_s:.0f} s"
                    ) from None
                if line is None:
                    rc = self.proc.wait()
                    rc = rc if rc else 1
                elif line.startswith(DONE_MARK):
                    rc = int(line.split()[1])
            self.log.seek(start)
            return rc, self.log.read().decode("utf-8", "replace")

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        self.log.close()


DRIVER = Path(__file__).with_name("runner_driver.py")
DONE_MARK = "@@apexrl-runner-done@@"  # runner_driver.DONE_MARK
_WORKERS: dict[Path, RunnerWorker] = {}
_WORKERS_LOCK = threading.Lock()


def _worker(runner: Path) -> RunnerWorker:
    with _WORKERS_LOCK:
        w = _WORKERS.get(runner)
        if w is None or not w.alive():
            w = _WORKERS[runner] = RunnerWorker(runner)
        return w


@atexit.register
def close_workers() -> None:
    with _WORKERS_LOCK:
        for w in _WORKERS.values():
            w.close()
        _WORKERS.clear()


def run_runner(
    runner: Path,
    inp: RunnerInputs,
    *,
    model: str,
    api_base: str | None,
    api_key: str | None = None,
    timeout_s: float = RUN_TIMEOUT_S,
    keep: Path | None = None,
) -> RunnerResult:
    """Grade one trial with the runner; ApexError when it does not finish. `api_key`:
    what the runner sends to `api_base` (the caching proxy's per-run secret)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="apexrl-archipelago-") as tmp:
        folder = Path(tmp)
        args = write_inputs(folder, inp, model, api_base, api_key)
        rc, log = _worker(runner).run(args, timeout_s)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "runner.log").write_text(log[-200_000:], encoding="utf-8")
        out = folder / "grades.json"
        if rc != 0 or not out.is_file():
            raise ApexError(
                f"archipelago's grading runner failed (exit {rc}): {log.strip()[-800:]}"
            )
        data = json.loads(out.read_text("utf-8"))
    scoring = data.get("scoring_results") or {}
    values = scoring.get("scoring_method_result_values") or {}
    return RunnerResult(
        status=str(data.get("grading_run_status") or ""),
        final_score=float(scoring.get("final_score") or 0.0),
        verifiers=list(data.get("verifier_results") or []),
        error=values.get("error") if isinstance(values, dict) else None,
        duration_s=time.monotonic() - t0,
    )


# --- one trial, graded -----------------------------------------------------------------


def grade_archipelago(
    criteria: list[dict],
    inputs,  # apexrl.grading.inputs.GradingInputs
    before: dict[str, bytes],
    after: dict[str, bytes],
    *,
    judge,  # apexrl.grading.judge.JudgeSettings
    checkout: Checkout,
    reward: str = "pass",
    cache=None,  # apexrl.grading.judge_cache.JudgeCache
    keep: Path | None = None,
    log=None,
):
    """A GradeResult from archipelago's runner. The judge is reached through apexrl's
    caching pass-through when it has an api_base (`openai/<name>` servers); provider
    models (gemini/..., vertex_ai/...) are called by the runner directly, uncached.
    JudgeError when the runner does not complete (no verifier result, not a 0)."""
    from apexrl.grading.inputs import conversation
    from apexrl.grading.judge import JudgeError
    from apexrl.grading.judge_cache import CachingProxy
    from apexrl.grading.models import GradeResult, Verdict

    t0 = time.monotonic()
    runner = runner_dir(checkout, log=log)
    run_in = RunnerInputs(
        task_id=inputs.task_id,
        criteria=criteria,
        messages=conversation(inputs.messages, inputs.task_prompt, inputs.answer),
        before=before,
        after=after,
        elapsed_s=inputs.elapsed_s,
    )
    calls: int | None = None
    if judge.api_base:
        with CachingProxy(judge.api_base, judge.model, cache, api_key=judge.api_key) as proxy:
            res = run_runner(
                runner,
                run_in,
                model=judge.model,
                api_base=proxy.url,
                api_key=proxy.token,
                keep=keep,
            )
            calls = proxy.calls
    else:
        res = run_runner(runner, run_in, model=judge.model, api_base=None, keep=keep)
    if res.status != "completed":
        raise JudgeError(
            f"archipelago's grading runner ended {res.status or 'without a status'}: "
            f"{res.error or 'no reason given'}",
            kind="bad_json" if "JSON" in str(res.error) else "unavailable",
            retryable=True,
        )
    by_id = {str(v.get("verifier_id")): v for v in res.verifiers}
    verdicts = []
    for i, c in enumerate(criteria):
        vid = str(c.get("verifier_id") or f"criterion_{i}")
        v = by_id.get(vid)
        if v is None:
            raise JudgeError(
                f"archipelago's grading runner gave no result for criterion {vid}",
                kind="unavailable",
                retryable=False,
            )
        values = v.get("verifier_result_values") or {}
        verdicts.append(
            Verdict(
                verifier_id=vid,
                criteria=str(c.get("criteria") or ""),
                met=float(v.get("score") or 0.0) >= 0.5,
                source="judge",
                rationale=values.get("grade_rationale"),
                error=values.get("auto_fail_reason"),
                judge_model=judge.model,
            )
        )
    return GradeResult(
        task_id=inputs.task_id,
        **GradeResult.tally(verdicts, reward),
        changes=inputs.changes,
        answer_chars=len(inputs.final_message()),
        judge_model=judge.model,
        duration_s=time.monotonic() - t0,
        grader="archipelago",
        grader_commit=checkout.commit or f"content:{checkout.key[:16]}",
        judge_calls=calls,
    )


if __name__ == "__main__":  # `make peer-grader`: build the runner of a checkout
    import sys

    ck = resolve_checkout(sys.argv[1] if len(sys.argv) > 1 else None)
    print(runner_dir(ck, log=lambda m: print(m, file=sys.stderr)))
