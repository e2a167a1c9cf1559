"""Bad input: clear errors naming the record, distinct exit codes, nothing half-written."""

from __future__ import annotations

import json

from apexrl.cli.app import app
from tests.conftest import make_task, write_apex


def run_convert(runner, src, out, *extra):
    return runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out), *extra])


def test_corrupt_json_names_file_and_line(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "law")])
    (src / "tasks_and_rubrics.json").write_text('[\n  {"task_id": "task_1",\n  oops\n]')
    out = tmp_path / "out"
    result = run_convert(runner, src, out)
    assert result.exit_code == 1
    assert "tasks_and_rubrics.json:3" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir())


def test_non_utf8_input(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "law")])
    (src / "tasks_and_rubrics.json").write_bytes(b'[{"task_name": "caf\xe9"}]')
    result = run_convert(runner, src, tmp_path / "out")
    assert result.exit_code == 1
    assert "not UTF-8" in result.stderr


def _mixed(tmp_path):
    tasks = [
        make_task(1, "world_a", "law"),
        make_task(2, "world_missing", "law"),  # no zip
        make_task(1, "world_b", "investment-banking"),  # duplicate id
        make_task(4, "world_b", "investment-banking", rubric=[]),  # empty rubric
        make_task(5, "world_c", "management-consulting", task_id="../../escape"),
        make_task(6, "world_c", "management-consulting"),
    ]
    return write_apex(tmp_path / "apex", tasks)


def test_partial_success_writes_good_records_and_exits_5(runner, tmp_path):
    src = _mixed(tmp_path)
    out = tmp_path / "out"
    result = run_convert(runner, src, out)
    assert result.exit_code == 5, result.output
    written = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(r["task_id"] for r in written) == [f"task_{1:032x}", f"task_{6:032x}"]
    err = result.stderr
    assert "tasks_and_rubrics.json[1]" in err and "world_missing.zip is missing" in err
    assert "tasks_and_rubrics.json[2]" in err and "duplicate task_id" in err
    assert "tasks_and_rubrics.json[3]" in err and "rubric is empty" in err
    assert "tasks_and_rubrics.json[4]" in err and "not a safe identifier" in err
    assert sorted(p.name for p in out.iterdir()) == sorted(r["path"] for r in written)


def test_strict_stops_at_first_bad_record_and_writes_nothing(runner, tmp_path):
    src = _mixed(tmp_path)
    out = tmp_path / "out"
    result = run_convert(runner, src, out, "--strict")
    assert result.exit_code == 1
    assert "tasks_and_rubrics.json[1]" in result.stderr
    assert "duplicate" not in result.stderr
    assert not out.exists()


def test_missing_input_file_named(runner, tmp_path):
    src = write_apex(
        tmp_path / "apex", [make_task(1, "world_a", "law", task_input_files="a.xlsx, b.pdf")]
    )
    result = run_convert(runner, src, tmp_path / "out", "--strict")
    assert result.exit_code == 1
    assert "'a.xlsx'" in result.stderr and "task_files/" in result.stderr


def test_unknown_domain_is_carried_through(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", "Forensic Astrology")])
    result = run_convert(runner, src, tmp_path / "out", "--strict")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["domain"] == "forensic-astrology"


def test_empty_domain_names_field(runner, tmp_path):
    src = write_apex(tmp_path / "apex", [make_task(1, "world_a", " ")])
    result = run_convert(runner, src, tmp_path / "out", "--strict")
    assert result.exit_code == 1
    assert "field 'domain'" in result.stderr
