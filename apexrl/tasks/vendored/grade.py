#!/usr/bin/env python3
"""Deterministic rubric grading, run inside the sandbox by tests/test.sh.

Standard library only (the sandbox's Python has nothing else). Criteria with a
`check` are graded here; criteria without one need the LLM judge (apexrl's
grading stage) and count as unmet unless a judge verdict file is present.
Writes /logs/verifier/reward.json: {"reward": 0|1, "score": met/total, ...}.
"""

import json
import os
import re
import sys
from pathlib import Path

TESTS = Path(os.environ.get("APEXRL_TESTS_DIR", "/tests"))
WORLD_FS = Path(os.environ.get("APEXRL_WORLD_FS", "/world/filesystem"))
ANSWER = Path(os.environ.get("APEXRL_ANSWER_FILE", "/logs/agent/answer.txt"))
OUT_DIR = Path(os.environ.get("APEXRL_VERIFIER_DIR", "/logs/verifier"))
JUDGE = OUT_DIR / "judge_verdicts.json"
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?")


def normalise(text):
    return " ".join(str(text).lower().split())


def numbers_in(text):
    for match in NUMBER.findall(text or ""):
        try:
            yield float(match.replace(",", ""))
        except ValueError:
            continue


def inside_world(rel):
    path = (WORLD_FS / rel).resolve()
    return path if path.is_relative_to(WORLD_FS.resolve()) else None


def run_check(check, answer):
    kind = check["kind"]
    if kind == "exact":
        return normalise(check["value"]) in normalise(answer)
    if kind == "number":
        target, tol = float(check["value"]), float(check.get("tolerance") or 0.0)
        return any(abs(n - target) <= tol for n in numbers_in(answer))
    path = inside_world(check.get("path") or "")
    if path is None or not path.is_file():
        return False
    if kind == "file_exists":
        return True
    if kind == "file_contains":
        return normalise(check["value"]) in normalise(read_text(path))
    raise ValueError(f"unknown check kind {kind!r}")


def read_text(path):
    """Plain text of a file; .docx/.xlsx/.pptx are zips of XML: strip the tags."""
    if path.suffix.lower() in {".docx", ".xlsx", ".pptx"}:
        import zipfile

        with zipfile.ZipFile(path) as zf:
            xml = " ".join(
                zf.read(n).decode("utf-8", "replace") for n in zf.namelist() if n.endswith(".xml")
            )
        return re.sub(r"<[^>]+>", " ", xml)
    return path.read_text(encoding="utf-8", errors="replace")


def main():
    criteria = json.loads((TESTS / "verifiers.json").read_text(encoding="utf-8"))
    answer = ANSWER.read_text(encoding="utf-8", errors="replace") if ANSWER.is_file() else ""
    judged = json.loads(JUDGE.read_text(encoding="utf-8")) if JUDGE.is_file() else {}
    verdicts = []
    for c in criteria:
        if c.get("check"):
            ok, source = bool(run_check(c["check"], answer)), "deterministic"
        else:
            ok, source = bool(judged.get(c["verifier_id"], False)), "judge"
        verdicts.append({"verifier_id": c["verifier_id"], "met": ok, "source": source})
    met = sum(v["met"] for v in verdicts)
    total = len(verdicts)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    reward = {"reward": float(met == total and total > 0), "score": met / total if total else 0.0}
    reward.update(criteria_met=met, criteria_total=total)
    (OUT_DIR / "reward.json").write_text(json.dumps(reward), encoding="utf-8")
    (OUT_DIR / "verdicts.json").write_text(json.dumps(verdicts, indent=2), encoding="utf-8")
    print(json.dumps(reward))
    return 0


if __name__ == "__main__":
    sys.exit(main())
