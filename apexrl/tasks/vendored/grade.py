#!/usr/bin/env python3
"""Rubric grading runner, copied into every task's tests/ (run by tests/test.sh).

Standard library only: it runs inside the sandbox, whose Python has nothing else.
apexrl's host-side grader (apexrl.grading) imports this same file for its
deterministic checks, so both agree on what a check means.

A criterion is met by, in order:
  1. its deterministic `check` (exact/contains/equals, number, file_exists,
     file_contains, sheet_cell), when it has one;
  2. the reference match: the final answer equals the golden response and every
     gold file is present with the gold bytes, so a rubric written for the gold
     output is met by construction;
  3. otherwise it needs the LLM judge, which runs host-side (apexrl.grading); here
     such a criterion is marked `needs_judge` and counted neither way: when a failed
     check already decides the task (reward 0) the reward is written without a score;
     otherwise no reward is written and the runner exits 3 saying a judge is needed
     (judge_needed.txt), rather than scoring the judge's criteria 0.

Nothing the agent wrote under /logs/verifier is read: the evidence is the final
answer (/logs/agent/answer.txt), the world's files and this folder (/tests, which
the agent never sees). Writes /logs/verifier/reward.json: {"reward": 0|1,
"score": met/total, "criteria_met", "criteria_total"} and verdicts.json.
"""

import csv
import hashlib
import json
import os
import re
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

TESTS = Path(os.environ.get("APEXRL_TESTS_DIR", "/tests"))
WORLD_FS = Path(os.environ.get("APEXRL_WORLD_FS", "/world/filesystem"))
ANSWER = Path(os.environ.get("APEXRL_ANSWER_FILE", "/logs/agent/answer.txt"))
OUT_DIR = Path(os.environ.get("APEXRL_VERIFIER_DIR", "/logs/verifier"))
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?")
CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d{1,7})$")
MAX_TEXT = 20_000_000  # bytes read from one file for a text check
XLSX_NS = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
REL_NS = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
PKG_REL_NS = "{http://schemas.openxmlformats.org/package/2006/relationships}"


def normalise(text):
    return " ".join(str(text).lower().split())


def numbers_in(text):
    for match in NUMBER.findall(text or ""):
        try:
            yield float(match.replace(",", "").rstrip("."))
        except ValueError:
            continue


def inside(root, rel):
    """`rel` under `root`, or None when it escapes (.., absolute, links out)."""
    rel = str(rel or "").replace("\\", "/").lstrip("/")
    if not rel or "\x00" in rel:
        return None
    base = Path(root).resolve()
    path = (base / rel).resolve()
    return path if path.is_relative_to(base) and path != base else None


def read_text(path):
    """Plain text of a file; .docx/.xlsx/.pptx are zips of XML: strip the tags."""
    if path.suffix.lower() in {".docx", ".xlsx", ".xlsm", ".pptx"}:
        try:
            with zipfile.ZipFile(path) as zf:
                xml = " ".join(
                    zf.read(n).decode("utf-8", "replace")
                    for n in zf.namelist()
                    if n.endswith(".xml")
                )
        except (zipfile.BadZipFile, OSError):
            return ""
        return re.sub(r"<[^>]+>", " ", xml)
    with open(path, "rb") as f:
        return f.read(MAX_TEXT).decode("utf-8", "replace")


def split_cell(cell):
    """'B7' -> (column index from 1, row from 1)."""
    m = CELL.match(str(cell or "").strip())
    if not m:
        raise ValueError(f"not a cell reference: {cell!r}")
    col = 0
    for ch in m.group(1).upper():
        col = col * 26 + (ord(ch) - 64)
    return col, int(m.group(2))


def sheet_cell_value(path, sheet, cell):
    """The value of one cell of a .csv or .xlsx (the value the spreadsheet app cached).

    Returns None for an empty cell, or for a formula nobody computed (files written
    by libraries); apexrl's host grader evaluates those."""
    col, row = split_cell(cell)
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
            rows = list(csv.reader(f))
        if row > len(rows) or col > len(rows[row - 1]):
            return None
        return rows[row - 1][col - 1]
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        book = ElementTree.fromstring(zf.read("xl/workbook.xml"))
        rels = ElementTree.fromstring(zf.read("xl/_rels/workbook.xml.rels"))
        targets = {r.get("Id"): r.get("Target") for r in rels.iter(PKG_REL_NS + "Relationship")}
        sheets = [(s.get("name"), s.get(REL_NS + "id")) for s in book.iter(XLSX_NS + "sheet")]
        if not sheets:
            return None
        chosen = sheets[0] if not sheet else next((s for s in sheets if s[0] == sheet), None)
        if chosen is None:
            raise ValueError(f"no sheet {sheet!r}")
        target = targets.get(chosen[1], "")
        part = target.lstrip("/") if target.startswith("/") else "xl/" + target
        shared = []
        if "xl/sharedStrings.xml" in names:
            sst = ElementTree.fromstring(zf.read("xl/sharedStrings.xml"))
            for si in sst.iter(XLSX_NS + "si"):
                shared.append("".join(t.text or "" for t in si.iter(XLSX_NS + "t")))
        ref = cell.replace("$", "").upper()
        for c in ElementTree.fromstring(zf.read(part)).iter(XLSX_NS + "c"):
            if c.get("r") != ref:
                continue
            kind = c.get("t")
            v = c.find(XLSX_NS + "v")
            if kind == "inlineStr":
                return "".join(t.text or "" for t in c.iter(XLSX_NS + "t"))
            if v is None or v.text is None:
                return None
            if kind == "s":
                return shared[int(v.text)]
            if kind == "b":
                return v.text == "1"
            return v.text
    return None


def values_equal(actual, expected, tolerance=0.0):
    if actual is None:
        return False
    try:
        a = float(str(actual).replace(",", "").strip().rstrip("%"))
        e = float(str(expected).replace(",", "").strip().rstrip("%"))
        return abs(a - e) <= float(tolerance or 0.0) + 1e-9
    except ValueError:
        return normalise(actual) == normalise(expected)


def run_check(check, answer, fs_root=None, cell_reader=None):
    """True when the check holds for this final answer and world filesystem."""
    fs_root = Path(fs_root or WORLD_FS)
    kind = check["kind"]
    if kind in ("exact", "contains"):
        return normalise(check["value"]) in normalise(answer)
    if kind == "equals":
        return normalise(check["value"]) == normalise(answer)
    if kind == "number":
        target, tol = float(check["value"]), float(check.get("tolerance") or 0.0)
        return any(abs(n - target) <= tol + 1e-9 for n in numbers_in(answer))
    if kind not in ("file_exists", "file_contains", "sheet_cell"):
        raise ValueError(f"unknown check kind {kind!r}")
    path = inside(fs_root, check.get("path"))
    if path is None or not path.is_file():
        return False
    if kind == "file_exists":
        return True
    if kind == "file_contains":
        return normalise(check["value"]) in normalise(read_text(path))
    value = (cell_reader or sheet_cell_value)(path, check.get("sheet"), check.get("cell"))
    return values_equal(value, check.get("value"), check.get("tolerance"))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def reference_match(answer, gold, fs_root=None):
    """The final answer is the golden response and every gold file has the gold bytes."""
    fs_root = Path(fs_root or WORLD_FS)
    expected = (gold or {}).get("gold_response")
    files = (gold or {}).get("gold_files") or {}
    if not (expected or "").strip() and not files:
        return False
    if (expected or "").strip() and normalise(expected) != normalise(answer):
        return False
    for rel, digest in files.items():
        path = inside(fs_root, rel)
        if path is None or not path.is_file() or sha256_file(path) != digest:
            return False
    return True


def grade_deterministic(criteria, answer, gold, fs_root=None, cell_reader=None):
    """One verdict per criterion; criteria only the judge can decide get met=None."""
    ref = None  # computed once, only when some criterion has no check
    verdicts = []
    for c in criteria:
        v = {"verifier_id": c["verifier_id"], "criteria": c.get("criteria", "")}
        if c.get("check"):
            try:
                v.update(met=bool(run_check(c["check"], answer, fs_root, cell_reader)))
            except Exception as e:  # a broken check is unmet, with the reason
                v.update(met=False, error=f"{type(e).__name__}: {e}")
            v["source"] = "deterministic"
        else:
            if ref is None:
                ref = reference_match(answer, gold, fs_root)
            if ref:
                v.update(met=True, source="reference")
            else:
                v.update(met=None, source="judge")
        verdicts.append(v)
    return verdicts


def summarise(verdicts):
    met = sum(1 for v in verdicts if v["met"])
    total = len(verdicts)
    return {
        "reward": float(total > 0 and met == total),
        "score": met / total if total else 0.0,
        "criteria_met": met,
        "criteria_total": total,
    }


JUDGE_NEEDED = (
    "{n} criteria of this task need an LLM judge, which this runner does not have: no "
    "reward is written rather than scoring them 0. Grade the task with apexrl's verifier "
    "(`apexrl eval run --judge MODEL`), or convert it with a grading runner that has one "
    "(`apexrl tasks convert --grader-from CHECKOUT`)."
)


def main():
    criteria = json.loads((TESTS / "verifiers.json").read_text(encoding="utf-8"))
    gold_path = TESTS / "golden_responses.json"
    gold = json.loads(gold_path.read_text(encoding="utf-8")) if gold_path.is_file() else {}
    answer = ANSWER.read_text(encoding="utf-8", errors="replace") if ANSWER.is_file() else ""
    verdicts = grade_deterministic(criteria, answer, gold)
    pending = [v for v in verdicts if v["met"] is None]
    for v in pending:  # only a judge can decide it: not counted either way
        v.update(met=None, needs_judge=True)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "verdicts.json").write_text(json.dumps(verdicts, indent=2), encoding="utf-8")
    failed = any(v["met"] is False for v in verdicts)
    if pending and not failed:  # the outcome hangs on the judge: say so, score nothing
        note = JUDGE_NEEDED.format(n=len(pending))
        (OUT_DIR / "judge_needed.txt").write_text(note + "\n", encoding="utf-8")
        print(note, file=sys.stderr)
        return 3
    reward = summarise(verdicts)
    if pending:  # a failed check decides pass/fail (0); the fraction met is not known
        reward.pop("score")
        reward["criteria_needing_judge"] = len(pending)
    (OUT_DIR / "reward.json").write_text(json.dumps(reward), encoding="utf-8")
    print(json.dumps(reward))
    return 0


if __name__ == "__main__":
    sys.exit(main())
