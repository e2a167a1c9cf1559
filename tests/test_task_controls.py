"""The controls of every task's rubric (issue 44): `tasks validate --no-op` grades the
initial world with an empty answer (a criterion met is a finding, exit 5) and `--oracle`
the gold answer and files (a criterion not met is a finding, exit 5), over the example
and the held-out real-shape samples; `expected_file_type` labels: an unknown one is
refused at convert, validate and grading time, the older spellings are accepted."""

from __future__ import annotations

import json

import pytest

from apexrl.cli.app import app
from apexrl.tasks.example import write_example
from tests.published_shape import build


def _converted(runner, src, tmp_path):
    out = tmp_path / "tasks"
    r = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    return out


def _controls(runner, tasks, src, *more):
    return runner.invoke(
        app,
        ["tasks", "validate", str(tasks), "--no-op", "--oracle", "--worlds", str(src), "--json",
         *more],
    )  # fmt: skip


@pytest.fixture
def example(tmp_path):
    src = tmp_path / "example"
    write_example(src, seed=0)
    return src


@pytest.fixture
def real_shape(tmp_path):
    src = tmp_path / "real"
    build(src, bad=False)
    return src


def test_both_controls_pass_on_the_example_and_the_real_shape_samples(
    runner, example, real_shape, tmp_path
):
    for src in (example, real_shape):
        tasks = _converted(runner, src, tmp_path / src.name)
        r = _controls(runner, tasks, src)
        assert r.exit_code == 0, r.output
        assert "0 control finding(s)" in r.stderr
        assert "its world is not in --worlds" not in r.stderr  # graded over the real world
    # the example's deterministic criteria were graded by both controls (not all unjudged)
    r = _controls(runner, tmp_path / "example" / "tasks", example)
    n_unjudged = int(r.stderr.split(" criterion check(s) need the LLM judge")[0].split()[-1])
    n_checks = sum(
        len(json.loads(p.read_text()))
        for p in (tmp_path / "example" / "tasks").glob("*/tests/verifiers.json")
    )
    assert n_unjudged < n_checks


def test_no_op_control_reports_a_rubric_an_empty_answer_passes(runner, real_shape, tmp_path):
    tasks = _converted(runner, real_shape, tmp_path)
    task = sorted(p for p in tasks.iterdir() if p.is_dir())[1]
    rubric = task / "tests" / "verifiers.json"
    criteria = json.loads(rubric.read_text())
    # met before the agent does anything: the file is in the world from the start
    exists = {"kind": "file_exists", "path": "Documents/overview.txt"}
    criteria.append({"verifier_id": "v_free", "criteria": "An overview exists", "check": exists})
    rubric.write_text(json.dumps(criteria))
    r = runner.invoke(app, ["tasks", "validate", str(tasks), "--no-op", "--worlds",
                            str(real_shape), "--json"])  # fmt: skip
    assert r.exit_code == 5, r.output
    findings = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(f["where"], f["check"]) for f in findings] == [(task.name, "no-op")]
    assert "v_free" in findings[0]["message"] and "empty answer" in findings[0]["message"]
    # the oracle control of the same rubric is clean (the gold output meets it too)
    r = runner.invoke(app, ["tasks", "validate", str(tasks), "--oracle", "--worlds",
                            str(real_shape)])  # fmt: skip
    assert r.exit_code == 0, r.output


def test_oracle_control_reports_a_criterion_the_gold_output_misses(runner, example, tmp_path):
    tasks = _converted(runner, example, tmp_path)
    task = sorted(p for p in tasks.iterdir() if p.is_dir())[0]
    rubric = task / "tests" / "verifiers.json"
    criteria = json.loads(rubric.read_text())
    criteria.append({"verifier_id": "v_gold", "criteria": "Says zebra",
                     "check": {"kind": "contains", "value": "zebra-not-in-gold"}})  # fmt: skip
    rubric.write_text(json.dumps(criteria))
    r = _controls(runner, tasks, example)
    assert r.exit_code == 5, r.output
    findings = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(f["where"], f["check"]) for f in findings] == [(task.name, "oracle")]
    assert "v_gold" in findings[0]["message"]


LEGACY = "Word Documents (.docx, .doc)"


def test_file_type_labels_at_convert_validate_and_grading(runner, real_shape, tmp_path):
    from apexrl.artifacts.file_types import UnknownFileType
    from apexrl.grading.judge import criterion_scope

    records = json.loads((real_shape / "tasks_and_rubrics.json").read_text())
    records[0]["rubric"][0]["expected_file_type"] = "Word Docs"  # no such label
    records[1]["rubric"][0]["verifier_values"] = {"expected_file_type": LEGACY}
    (real_shape / "tasks_and_rubrics.json").write_text(json.dumps(records))
    out = tmp_path / "tasks"
    r = runner.invoke(app, ["tasks", "convert", str(real_shape), "-o", str(out)])
    assert r.exit_code == 5, r.output  # that record skipped, the rest written
    assert "tasks_and_rubrics.json[0]" in r.stderr and ".rubric[0]" in r.stderr
    assert "unknown expected_file_type 'Word Docs'" in r.stderr
    assert "tasks_and_rubrics.json[1]" not in r.stderr  # the older spelling is accepted
    # a task dir whose rubric was edited after conversion: refused by validate
    task = sorted(p for p in out.iterdir() if p.is_dir())[0]
    rubric = task / "tests" / "verifiers.json"
    criteria = json.loads(rubric.read_text())
    criteria[0]["expected_file_type"] = "Slides (.key)"
    rubric.write_text(json.dumps(criteria))
    r = runner.invoke(app, ["tasks", "validate", str(out), "--json"])
    assert r.exit_code == 1, r.output
    (f,) = [json.loads(x) for x in r.stdout.splitlines() if "expected_file_type" in x]
    assert f["where"] == task.name and "criterion 0" in f["message"]
    # the grader filters by the older spelling and never widens an unknown label
    assert criterion_scope({"expected_file_type": LEGACY}) == ("files", (".docx", ".doc"))
    assert criterion_scope({"expected_file_type": "any"}) == ("both", ())
    with pytest.raises(UnknownFileType):
        criterion_scope({"expected_file_type": "Word Docs"})
    with pytest.raises(UnknownFileType):
        criterion_scope({"expected_file_type": "word docs"}, lenient=True)
    assert criterion_scope({"expected_file_type": LEGACY.upper()}, lenient=True)[0] == "files"


def test_archipelagos_runner_gets_known_labels_only():
    from apexrl.artifacts.archipelago_runner import runner_verifiers
    from apexrl.artifacts.file_types import UnknownFileType

    (v,) = runner_verifiers([{"criteria": "c", "expected_file_type": LEGACY}], "t")
    # the pinned runner widens the older spelling to all output: it gets the current one
    assert v["verifier_values"]["expected_file_type"] == "Word Documents (.docx, .doc, .odt)"
    with pytest.raises(UnknownFileType):
        runner_verifiers([{"criteria": "c", "expected_file_type": "Word Docs"}], "t")
