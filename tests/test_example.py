"""`apexrl tasks example`: layout, records, real documents, solvable checks, determinism."""

from __future__ import annotations

import csv
import io
import json
import mailbox
import re
import statistics
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.artifacts.models import DOMAINS, ApexTask, ApexWorld
from apexrl.cli.app import app
from apexrl.tasks.example import write_example

TASK_ID = re.compile(r"^task_[0-9a-f]{32}$")
WORLD_ID = re.compile(r"^world_[0-9a-f]{32}$")
APPS = {"files", "docs", "sheets", "slides", "pdf", "mail", "chat", "calendar", "code"}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("example") / "data"
    summary = write_example(out, seed=0)
    return out, summary


@pytest.fixture(scope="module")
def worlds_dir(example: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each world zip extracted to <dir>/<world_id>/."""
    out, _ = example
    root = tmp_path_factory.mktemp("worlds")
    for z in sorted((out / "world_files_zipped").glob("*.zip")):
        with zipfile.ZipFile(z) as zf:
            zf.extractall(root / z.stem)
    return root


def load(out: Path) -> tuple[list[dict], list[dict]]:
    tasks = json.loads((out / "tasks_and_rubrics.json").read_text(encoding="utf-8"))
    worlds = json.loads((out / "world_descriptions.json").read_text(encoding="utf-8"))
    return tasks, worlds


def all_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- text of a document, through the field's own libraries ---------------------------


def doc_text(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".docx":
        import docx

        d = docx.Document(str(path))
        parts = [p.text for p in d.paragraphs]
        parts += [c.text for t in d.tables for row in t.rows for c in row.cells]
        return "\n".join(parts)
    if suffix == ".xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path)
        return "\n".join(
            str(c.value) for ws in wb.worksheets for row in ws.iter_rows() for c in row if c.value
        )
    if suffix == ".pptx":
        from pptx import Presentation

        parts = []
        for slide in Presentation(str(path)).slides:
            for shape in slide.shapes:
                if shape.has_text_frame:
                    parts.append(shape.text_frame.text)
                if shape.has_table:
                    parts += [c.text for row in shape.table.rows for c in row.cells]
        return "\n".join(parts)
    if suffix == ".pdf":
        from pypdf import PdfReader

        return "\n".join(page.extract_text() for page in PdfReader(str(path)).pages)
    return path.read_text(encoding="utf-8")


def norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in re.findall(r"-?\d[\d,]*\.?\d*", text)]


# --- a small evaluator for the formulas the example workbooks use --------------------


def eval_workbook(path: Path) -> dict[tuple[str, str], float]:
    """Value of every formula cell (sheet, coordinate), computed from the formulas."""
    import openpyxl
    from openpyxl.utils import range_boundaries
    from openpyxl.utils.cell import get_column_letter

    wb = openpyxl.load_workbook(path)
    cache: dict[tuple[str, str], object] = {}

    def value(sheet: str, coord: str) -> object:
        key = (sheet, coord)
        if key not in cache:
            raw = wb[sheet][coord].value
            cache[key] = formula(sheet, raw[1:]) if isinstance(raw, str) and raw[:1] == "=" else raw
        return cache[key]

    def cells(sheet: str, ref: str) -> list[object]:
        min_col, min_row, max_col, max_row = range_boundaries(ref)
        return [
            value(sheet, f"{get_column_letter(c)}{r}")
            for r in range(min_row, max_row + 1)
            for c in range(min_col, max_col + 1)
        ]

    def sheet_ref(default: str, token: str) -> tuple[str, str]:
        if "!" in token:
            s, ref = token.split("!")
            return s.strip("'"), ref
        return default, token

    def formula(sheet: str, text: str) -> object:
        def sumif(args: str) -> float:
            rng, crit, total = (a.strip() for a in args.split(","))
            s1, r1 = sheet_ref(sheet, rng)
            s2, r2 = sheet_ref(sheet, total)
            sc, rc = sheet_ref(sheet, crit)
            wanted = value(sc, rc)
            pairs = zip(cells(s1, r1), cells(s2, r2), strict=True)
            return sum(v for k, v in pairs if k == wanted)

        funcs = {"SUM": sum, "MEDIAN": statistics.median, "AVERAGE": statistics.mean}
        m = re.fullmatch(r"SUMIF\((.*)\)", text)
        if m:
            return sumif(m.group(1))

        def repl_func(match: re.Match) -> str:
            name, arg = match.group(1), match.group(2)
            s, ref = sheet_ref(sheet, arg)
            vals = [v for v in cells(s, ref) if isinstance(v, int | float)]
            return repr(float(funcs[name](vals)))

        text = re.sub(r"(SUM|MEDIAN|AVERAGE)\(([^()]+)\)", repl_func, text)

        def repl_ref(match: re.Match) -> str:
            s, ref = sheet_ref(sheet, match.group(0))
            return repr(float(value(s, ref)))

        text = re.sub(r"(?:'?[A-Za-z][A-Za-z ]*'?!)?\$?[A-Z]{1,2}\$?\d+", repl_ref, text)
        assert re.fullmatch(r"[\d.eE+\-*/() ]+", text), text
        return eval(text)  # noqa: S307 - arithmetic only, checked just above

    out: dict[tuple[str, str], float] = {}
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for c in row:
                if isinstance(c.value, str) and c.value.startswith("="):
                    out[(ws.title, c.coordinate)] = float(value(ws.title, c.coordinate))
    return out


# --- tests ---------------------------------------------------------------------------


def test_layout_and_summary(example: tuple[Path, dict]) -> None:
    out, summary = example
    tasks, worlds = load(out)
    assert summary["out"] == str(out)
    assert summary["n_tasks"] == len(tasks) >= 12
    assert summary["n_worlds"] == len(worlds) >= 3
    assert set(summary["domains"]) == set(DOMAINS)
    assert all(n >= 4 for n in summary["domains"].values())
    for w in worlds:
        z = out / "world_files_zipped" / f"{w['world_id']}.zip"
        with zipfile.ZipFile(z) as zf:
            tops = {n.split("/")[0] for n in zf.namelist()}
        assert tops == {"filesystem", ".apps_data"}
    top = {p.name for p in out.iterdir()} - {".apexrl-output"}
    assert top == {
        "tasks_and_rubrics.json",
        "world_descriptions.json",
        "world_files_zipped",
        "task_files",
        "gold_files",
    }


def test_records_validate_and_cover_the_cases(example: tuple[Path, dict]) -> None:
    out, _ = example
    tasks, worlds = load(out)
    by_world = {}
    for w in worlds:
        ApexWorld.model_validate(w)
        assert WORLD_ID.match(w["world_id"])
        assert set(w["apps"]) <= APPS
        domain = next(d for d in DOMAINS if w["world_name"].startswith(d + "-"))
        by_world[w["world_id"]] = domain
    assert sorted(by_world.values()) == sorted(DOMAINS)

    kinds: set[str] = set()
    sizes: set[int] = set()
    ids: set[str] = set()
    for t in tasks:
        task = ApexTask.model_validate(t)
        assert TASK_ID.match(task.task_id) and task.task_id not in ids
        ids.add(task.task_id)
        assert by_world[task.world_id] == task.domain
        assert 1 <= len(task.rubric) <= 6
        sizes.add(len(task.rubric))
        assert len({c.verifier_id for c in task.rubric}) == len(task.rubric)
        kinds |= {c.check.kind for c in task.rubric if c.check}
        names = task.task_input_files
        if names is not None:
            for name in [names] if isinstance(names, str) else names:
                assert (out / "task_files" / task.task_id / name).is_file(), name
        gold = out / "gold_files" / task.task_id
        if task.gold_response_type == "file":
            assert gold.is_dir() and any(gold.rglob("*"))
        else:
            assert not gold.exists()
        assert task.gold_response
    assert kinds == {"exact", "number", "file_exists", "file_contains"}
    assert {1, 6} <= sizes

    records = [ApexTask.model_validate(t) for t in tasks]
    assert any(
        t.gold_response_type == "file" and t.expected_output == "make_new_doc" for t in records
    )
    assert any(isinstance(t.task_input_files, str) for t in records)
    assert any(isinstance(t.task_input_files, list) for t in records)
    assert any(t.task_input_files is None and t.expected_output is None for t in records)
    # Every task_files dir belongs to a task that names its files.
    named = {t.task_id for t in records if t.task_input_files}
    assert {p.name for p in (out / "task_files").iterdir()} == named


def test_gold_answers_satisfy_deterministic_checks(example: tuple[Path, dict]) -> None:
    out, _ = example
    tasks, _ = load(out)
    n_checked = 0
    for t in tasks:
        task = ApexTask.model_validate(t)
        answer = task.gold_response or ""
        for c in task.rubric:
            chk = c.check
            if chk is None:
                continue
            n_checked += 1
            where = f"{task.task_id} {c.verifier_id}"
            if chk.kind == "exact":
                assert norm(chk.value) in norm(answer), where
            elif chk.kind == "number":
                assert any(abs(n - float(chk.value)) <= chk.tolerance for n in numbers(answer)), (
                    where,
                    chk.value,
                    answer,
                )
            else:
                path = out / "gold_files" / task.task_id / chk.path
                assert path.is_file(), where
                if chk.kind == "file_contains":
                    assert norm(chk.value) in norm(doc_text(path)), where
    assert n_checked >= 12


def test_numeric_answers_are_computable_from_the_workbooks(
    example: tuple[Path, dict], worlds_dir: Path
) -> None:
    out, _ = example
    tasks, _ = load(out)
    computed: dict[str, list[float]] = {}
    for world in worlds_dir.iterdir():
        values: list[float] = []
        for xlsx in (world / "filesystem").rglob("*.xlsx"):
            values += eval_workbook(xlsx).values()
        computed[world.name] = values
    n = 0
    for t in tasks:
        mentions_workbook = ".xlsx" in t["prompt"] or "deal model" in t["prompt"]
        if not mentions_workbook or t["task_input_files"]:
            continue
        for c in t["rubric"]:
            chk = c.get("check")
            if chk and chk["kind"] == "number":
                tol = max(chk["tolerance"], 1e-9)
                assert any(abs(v - chk["value"]) <= tol for v in computed[t["world_id"]]), (
                    t["task_name"],
                    chk,
                )
                n += 1
    assert n >= 5


def thread_depth(message_id: str, parent: dict[str, str]) -> int:
    depth = 1
    while message_id in parent:
        message_id = parent[message_id]
        depth += 1
    return depth


def test_world_documents_open_with_their_libraries(worlds_dir: Path) -> None:
    import openpyxl
    from icalendar import Calendar

    for world in sorted(worlds_dir.iterdir()):
        fs = world / "filesystem"
        suffixes = {p.suffix for p in fs.rglob("*") if p.is_file()}
        assert {".docx", ".xlsx", ".pdf", ".pptx", ".csv", ".md"} <= suffixes, world.name
        for p in fs.rglob("*.xlsx"):
            wb = openpyxl.load_workbook(p)
            formulas = [
                c.value
                for ws in wb.worksheets
                for row in ws.iter_rows()
                for c in row
                if isinstance(c.value, str) and c.value.startswith("=")
            ]
            assert any(f.startswith("=SUM(") for f in formulas), p
        for p in fs.rglob("*.pdf"):
            assert len(doc_text(p)) > 100, p
        for p in fs.rglob("*.docx"):
            assert len(doc_text(p)) > 100, p
        for p in fs.rglob("*.pptx"):
            from pptx import Presentation

            assert len(Presentation(str(p)).slides) >= 3
            assert doc_text(p).strip()
        for p in fs.rglob("*.csv"):
            rows = list(csv.reader(io.StringIO(p.read_text(encoding="utf-8"))))
            assert len(rows) >= 2 and all(len(r) == len(rows[0]) for r in rows)

        apps = world / ".apps_data"
        box = mailbox.mbox(apps / "mail" / "inbox.mbox", create=False)
        msgs = list(box)
        ids = {m["Message-ID"] for m in msgs}
        assert len(msgs) >= 4 and None not in ids and len(ids) == len(msgs)
        parent = {}
        for m in msgs:
            if m["In-Reply-To"]:
                assert m["In-Reply-To"] in ids
                refs = m["References"].split()
                assert set(refs) <= ids and refs[-1] == m["In-Reply-To"]
                parent[m["Message-ID"]] = m["In-Reply-To"]
        roots = [i for i in ids if i not in parent]
        assert len(roots) >= 2

        assert max(thread_depth(i, parent) for i in ids) >= 3

        icss = list((apps / "calendar").glob("*.ics"))
        assert icss
        for ics in icss:
            events = Calendar.from_ical(ics.read_bytes()).walk("VEVENT")
            assert len(events) >= 2
            for ev in events:
                for prop in ("UID", "SUMMARY", "DTSTART", "DTEND", "LOCATION", "ATTENDEE"):
                    assert ev.get(prop), (ics, prop)
                assert ev.decoded("DTEND") > ev.decoded("DTSTART")

        groups = list((apps / "chat" / "Groups").iterdir())
        assert groups
        for g in groups:
            info = json.loads((g / "group_info.json").read_text(encoding="utf-8"))
            assert info["name"] and all({"name", "email"} == set(m) for m in info["members"])
            messages = json.loads((g / "messages.json").read_text(encoding="utf-8"))["messages"]
            assert messages
            for m in messages:
                assert set(m) == {
                    "message_id",
                    "creator",
                    "created_date",
                    "text",
                    "topic_id",
                    "reactions",
                }
                assert set(m["creator"]) == {"name", "email"}
                for r in m["reactions"]:
                    assert r["emoji"]["unicode"] and r["reactor_emails"]
                assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", m["created_date"])
        users = list((apps / "chat" / "Users").iterdir())
        assert users
        for u in users:
            user = json.loads((u / "user_info.json").read_text(encoding="utf-8"))["user"]
            assert set(user) == {"name", "email"}


def test_same_seed_is_byte_identical_and_seeds_differ(
    example: tuple[Path, dict], tmp_path: Path
) -> None:
    out, _ = example
    again = tmp_path / "again"
    write_example(again, seed=0)
    assert all_files(again) == all_files(out)

    other = tmp_path / "other"
    write_example(other, seed=1)
    a, b = all_files(out), all_files(other)
    assert a.keys() != b.keys()  # ids derive from the seed
    tasks_a, worlds_a = load(out)
    tasks_b, worlds_b = load(other)
    assert {t["task_id"] for t in tasks_a}.isdisjoint(t["task_id"] for t in tasks_b)
    assert [w["world_name"] for w in worlds_a] != [w["world_name"] for w in worlds_b]
    assert [t["gold_response"] for t in tasks_a] != [t["gold_response"] for t in tasks_b]


def test_zip_entries_are_sorted_with_fixed_dates(example: tuple[Path, dict]) -> None:
    out, _ = example
    for z in (out / "world_files_zipped").glob("*.zip"):
        with zipfile.ZipFile(z) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            assert names == sorted(names)
            for info in infos:
                assert info.date_time == (1980, 1, 1, 0, 0, 0)
                mode = (info.external_attr >> 16) & 0o777
                assert mode == (0o755 if info.is_dir() else 0o644)
                if info.filename.endswith((".docx", ".xlsx", ".pptx")):
                    with zipfile.ZipFile(io.BytesIO(zf.read(info))) as inner:
                        assert {i.date_time for i in inner.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_existing_output_is_replaced(tmp_path: Path) -> None:
    """Issue 16: a non-empty folder apexrl did not write is refused without --force."""
    from apexrl.errors import UsageError

    out = tmp_path / "data"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    with pytest.raises(UsageError, match="not written by apexrl"):
        write_example(out, seed=2)
    assert (out / "stale.txt").read_text() == "old"
    write_example(out, seed=2, force=True)
    write_example(out, seed=2)  # apexrl's own output: replaced without --force
    assert not (out / "stale.txt").exists()
    assert (out / "tasks_and_rubrics.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # no temp dirs left behind


def test_cli_writes_the_layout(tmp_path: Path) -> None:
    out = tmp_path / "ex"
    result = CliRunner().invoke(app, ["tasks", "example", "-o", str(out), "--seed", "3"])
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("{"))
    summary = json.loads(line)
    assert summary["n_tasks"] >= 12 and summary["n_worlds"] == 3
    tasks, worlds = load(out)
    assert len(tasks) == summary["n_tasks"]
    for w in worlds:
        assert (out / "world_files_zipped" / f"{w['world_id']}.zip").is_file()
