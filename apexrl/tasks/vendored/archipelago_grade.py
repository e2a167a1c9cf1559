#!/usr/bin/env python3
"""Runs archipelago's grading runner (vendored in runner/ by `apexrl tasks convert
--grader-from`) on this trial and writes Harbor's reward. Started by tests/test.sh
with a Python that has the runner's dependencies; itself standard library only.

Evidence, read from where the trial left it:
  - the final answer: /logs/agent/trajectory.json when it holds a "messages" list
    (the recipe's agent uploads its trajectory there), else /logs/agent/answer.txt
    (apexrl's agents and the oracle), sent as [task prompt, answer]; the runner takes
    messages[-1].content as the final answer;
  - the world's files: archipelago/initial_snapshot.zip (the world as the task starts,
    carried in the task when a criterion reads files) against the world now (/world
    in apexrl's local sandbox, / in a world image: filesystem/ and .apps_data/). Only
    what differs goes to the runner: the before-state of modified and deleted files,
    the after-state of created and modified ones. A task without the snapshot is
    graded on its answer alone (both snapshots empty).
The judge comes from the verifier's environment: GRADING_MODEL (a LiteLLM model),
GRADING_API_BASE and GRADING_API_KEY for an OpenAI-compatible server, GRADING_EXTRA_ARGS
(JSON, e.g. {"temperature": 0}); provider keys (GOOGLE_API_KEY, ...) pass to the runner
by name and are never written to a file; known secret values are blanked in its log.

Writes /logs/verifier/reward.json {"reward": the runner's final score (the mean over
criteria), "passed", "criteria_met", "criteria_total"}, verdicts.json and runner.log.
When the runner does not complete, no reward is written (grading_error.txt says why)
and the exit code is 1: a grading that failed is not a 0.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

TESTS = Path(os.environ.get("APEXRL_TESTS_DIR") or Path(__file__).resolve().parent)
OUT = Path(os.environ.get("APEXRL_VERIFIER_DIR", "/logs/verifier"))
AGENT = Path(os.environ.get("APEXRL_AGENT_DIR", "/logs/agent"))
INPUTS = TESTS / "archipelago"
TOPS = ("filesystem", ".apps_data")
DEFAULT_MODEL = "gemini/gemini-2.5-flash"
TIMEOUT_S = float(os.environ.get("GRADING_TIMEOUT_S") or 3500)
PASS_KEYS = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "VERTEXAI_PROJECT",
    "VERTEXAI_LOCATION",
    "MERCOR_DOCUMENT_API",
    "MERCOR_DOCUMENT_API_KEY",
    "FILE_EXTRACTION_STRATEGY",
)
SECRET_KEYS = ("GRADING_API_KEY",) + PASS_KEYS[:4] + ("MERCOR_DOCUMENT_API_KEY",)


def world_root():
    if os.environ.get("APEXRL_WORLD_ROOT"):
        return Path(os.environ["APEXRL_WORLD_ROOT"])
    return Path("/world") if Path("/world/filesystem").is_dir() else Path("/")


def world_files(root):
    """{'filesystem/a/b': path} of the regular files under the world's top folders
    (links are neither followed nor listed)."""
    out = {}
    for top in TOPS:
        start = root / top
        if not start.is_dir() or start.is_symlink():
            continue
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(
                d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))
            )
            for name in filenames:
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    out[p.relative_to(root).as_posix()] = p
    return out


def crc_of(path):
    crc = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc & 0xFFFFFFFF


def sparse_snapshots(initial, root, before_zip, after_zip):
    """Write the runner's snapshots: before = initial files modified or deleted, after =
    current files created or modified. Returns (created, modified, deleted) counts."""
    now = world_files(root)
    counts = [0, 0, 0]
    with (
        zipfile.ZipFile(before_zip, "w", zipfile.ZIP_DEFLATED) as zb,
        zipfile.ZipFile(after_zip, "w", zipfile.ZIP_DEFLATED) as za,
    ):
        if initial is None:
            return tuple(counts)
        with zipfile.ZipFile(initial) as zi:
            old = {i.filename: i for i in zi.infolist() if not i.is_dir()}
            for name in sorted(set(old) | set(now)):
                info, path = old.get(name), now.get(name)
                if info is not None and path is not None:
                    if info.file_size == path.stat().st_size and crc_of(path) == info.CRC:
                        continue
                    counts[1] += 1
                elif path is not None:
                    counts[0] += 1
                else:
                    counts[2] += 1
                if info is not None:
                    with zi.open(info) as src, zb.open(name, "w") as dst:
                        shutil.copyfileobj(src, dst)
                if path is not None:
                    za.write(path, name)
    return tuple(counts)


def read_messages(prompt):
    traj = AGENT / "trajectory.json"
    if traj.is_file() and not traj.is_symlink():
        try:
            data = json.loads(traj.read_text("utf-8"))
        except (ValueError, OSError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("messages"), list) and data["messages"]:
            return data["messages"], float(data.get("time_elapsed") or 0.0)
    answer = ""
    ans = AGENT / "answer.txt"
    if ans.is_file() and not ans.is_symlink():
        answer = ans.read_text("utf-8", "replace").strip()
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}], 0.0


def settings():
    extra = {}
    if os.environ.get("GRADING_EXTRA_ARGS"):
        extra.update(json.loads(os.environ["GRADING_EXTRA_ARGS"]))
    base = os.environ.get("GRADING_API_BASE")
    if base:
        extra["api_base"] = base
        if not os.environ.get("GRADING_API_KEY"):
            extra["api_key"] = "none"  # a local server; a real key goes by environment
    model = os.environ.get("GRADING_MODEL") or DEFAULT_MODEL
    return {"llm_judge_model": model, "llm_judge_extra_args": extra or None}


def runner_env(home):
    env = {
        "PATH": os.environ.get("PATH") or "/usr/bin:/bin",
        "HOME": home,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "FILE_EXTRACTION_STRATEGY": "LOCAL_ONLY",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for key in PASS_KEYS:
        if os.environ.get(key):
            env[key] = os.environ[key]
    key = os.environ.get("GRADING_API_KEY")
    model = os.environ.get("GRADING_MODEL") or DEFAULT_MODEL
    if key and model.startswith("openai/"):
        env["OPENAI_API_KEY"] = key
    if model.startswith("gemini/") and "GEMINI_API_KEY" not in env and "GOOGLE_API_KEY" in env:
        env["GEMINI_API_KEY"] = env["GOOGLE_API_KEY"]  # the recipe names the key GOOGLE_API_KEY
    return env


def runtime_note():
    """Which Python grades, and whether its dependencies were locked from the same
    uv.lock as the vendored runner (a built runner keeps its uv.lock beside .venv)."""
    import hashlib

    def digest(p):
        return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None

    theirs = digest(Path(sys.prefix).parent / "uv.lock")
    ours = digest(TESTS / "runner" / "uv.lock")
    same = None if theirs is None or ours is None else theirs == ours
    if same is False:
        print(
            "warning: the grading Python's dependencies were locked from another uv.lock "
            "than the vendored runner's",
            file=sys.stderr,
        )
    return {"python": sys.executable, "version": sys.version.split()[0], "same_lock": same}


def redact(text):
    for name in SECRET_KEYS:
        value = os.environ.get(name) or ""
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def fail(message, log=""):
    (OUT / "grading_error.txt").write_text(redact(message) + "\n", encoding="utf-8")
    if log:
        (OUT / "runner.log").write_text(redact(log)[-200_000:], encoding="utf-8")
    print("grading failed: " + redact(message), file=sys.stderr)
    return 1


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "grading_runtime.json").write_text(json.dumps(runtime_note()) + "\n", "utf-8")
    task = json.loads((INPUTS / "task.json").read_text("utf-8"))
    messages, elapsed = read_messages(task.get("prompt") or "")
    initial = INPUTS / "initial_snapshot.zip"
    with tempfile.TemporaryDirectory(prefix="archipelago-grading-") as tmp:
        work = Path(tmp)
        counts = sparse_snapshots(
            initial if initial.is_file() else None,
            world_root(),
            work / "initial.zip",
            work / "final.zip",
        )
        traj = {"messages": messages, "status": "completed", "time_elapsed": elapsed, "output": {}}
        (work / "trajectory.json").write_text(json.dumps(traj), encoding="utf-8")
        (work / "settings.json").write_text(json.dumps(settings()), encoding="utf-8")
        # -E -s -B: no PYTHON* variables, no user site, no bytecode written; the runner
        # imports from its own folder (the working folder), never from the world
        argv = [
            sys.executable,
            "-E",
            "-s",
            "-B",
            "-m",
            "runner.main",
            "--grading-run-id",
            "apexrl",
            "--trajectory-id",
            str(task.get("task_id") or "trial"),
            "--initial-snapshot",
            str(work / "initial.zip"),
            "--final-snapshot",
            str(work / "final.zip"),
            "--trajectory",
            str(work / "trajectory.json"),
            "--grading-settings",
            str(work / "settings.json"),
            "--verifiers",
            str(INPUTS / "verifiers.json"),
            "--eval-configs",
            str(INPUTS / "eval_configs.json"),
            "--scoring-config",
            str(INPUTS / "scoring.json"),
            "--output",
            str(work / "grades.json"),
        ]
        home = work / "home"
        home.mkdir()
        try:
            r = subprocess.run(
                argv,
                cwd=str(TESTS / "runner"),
                env=runner_env(str(home)),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return fail(f"the grading runner took over {TIMEOUT_S:.0f} s")
        log = r.stdout.decode("utf-8", "replace")
        (OUT / "runner.log").write_text(redact(log)[-200_000:], encoding="utf-8")
        out = work / "grades.json"
        if r.returncode != 0 or not out.is_file():
            return fail(f"the grading runner exited {r.returncode}: {log.strip()[-800:]}")
        grades = json.loads(out.read_text("utf-8"))
    status = str(grades.get("grading_run_status") or "")
    scoring = grades.get("scoring_results") or {}
    if status != "completed":
        values = scoring.get("scoring_method_result_values") or {}
        why = values.get("error") if isinstance(values, dict) else None
        return fail(f"the grading runner ended {status or 'without a status'}: {why or '-'}")
    verdicts = []
    for v in grades.get("verifier_results") or []:
        values = v.get("verifier_result_values") or {}
        score = float(v.get("score") or 0.0)
        verdicts.append(
            {
                "verifier_id": v.get("verifier_id"),
                "score": score,
                "met": score >= 0.5,
                "rationale": values.get("grade_rationale"),
                "auto_fail_reason": values.get("auto_fail_reason"),
            }
        )
    met = sum(1 for v in verdicts if v["met"])
    total = len(verdicts)
    reward = {
        "reward": float(scoring.get("final_score") or 0.0),
        "passed": 1.0 if total and met == total else 0.0,
        "criteria_met": met,
        "criteria_total": total,
        "files_created": counts[0],
        "files_modified": counts[1],
        "files_deleted": counts[2],
    }
    (OUT / "verdicts.json").write_text(redact(json.dumps(verdicts, indent=1)), encoding="utf-8")
    (OUT / "reward.json").write_text(json.dumps(reward) + "\n", encoding="utf-8")
    print(f"reward {reward['reward']} ({met}/{total} criteria met)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
