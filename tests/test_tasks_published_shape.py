"""`tasks convert` on data shaped like the published APEX-Agents dataset, then the oracle."""

from __future__ import annotations

import json
import tomllib

import orjson
import pytest

from apexrl.cli.app import app
from tests.published_shape import build


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    ids = build(root / "apex")
    return root / "apex", ids


def test_convert_takes_every_good_record_of_the_published_shape(runner, published, tmp_path):
    src, ids = published
    out = tmp_path / "tasks"
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out)])
    assert res.exit_code == 5, res.output  # one bad record, the rest written
    records = ndjson(res.stdout)
    assert sorted(r["task_id"] for r in records) == sorted(ids["good"])
    bad = ids["bad"][0]
    assert bad in res.stderr and "task_input_files" in res.stderr
    assert f"task_files/{bad}/ is missing" in res.stderr
    by_id = {r["task_id"]: r for r in records}
    domains = {r["domain"] for r in records}
    assert domains == {"investment-banking", "law", "management-consulting", "accounting-audit"}
    for r in records:
        d = out / r["path"]
        meta = tomllib.loads((d / "task.toml").read_text())["metadata"]
        arch = json.loads((d / "archipelago.json").read_text())
        assert meta["domain"] == r["domain"] and arch["task_slug"] == r["path"]
        assert arch["world_short_name"].startswith(r["domain"] + "-")
        if r["domain"] == "law":
            assert meta["domain_label"] == "Law"
    # the snapshot-id task: its folder overlaid as a world (filesystem/ and .apps_data/)
    snap = next(r for r in records if r["task_name"].endswith("_02") and "LAW" in r["task_name"])
    files = out / snap["path"] / "environment" / "task_files"
    assert (files / "filesystem" / "Inputs" / "engagement.txt").is_file()
    assert (files / ".apps_data" / "chat" / "Groups" / "space_deal" / "messages.json").is_file()
    # the boolean task_input_files with loose files: under filesystem/
    acc = next(r for r in records if r["domain"] == "accounting-audit")
    loose = out / acc["path"] / "environment" / "task_files" / "filesystem" / "ledger.txt"
    assert loose.is_file()
    # the file answer: gold files relative to filesystem/
    gold = next(r for r in records if r["task_name"].endswith("IB_03"))
    golden = json.loads((out / gold["path"] / "tests" / "golden_responses.json").read_text())
    assert list(golden["gold_files"]) == ["Outputs/margin.md"]
    assert by_id[gold["task_id"]]["n_criteria"] == 2


def test_strict_refuses_the_bad_record_and_writes_nothing(runner, published, tmp_path):
    src, ids = published
    out = tmp_path / "tasks"
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out), "--strict"])
    assert res.exit_code == 1
    assert ids["bad"][0] in res.stderr
    assert not out.exists() or not any(out.iterdir())


def test_oracle_passes_every_converted_task(runner, tmp_path):
    src = tmp_path / "apex"
    ids = build(src, bad=False)
    out = tmp_path / "tasks"
    res = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    run_dir = tmp_path / "run"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(out)]
    args += ["--worlds", str(src / "world_files_zipped"), "-o", str(run_dir), "-n", "4"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    s = orjson.loads(res.stdout.strip().splitlines()[-1])
    assert s["n_tasks"] == len(ids["good"]) and s["pass_at_1"]["value"] == 1.0
    assert set(s["per_domain"]) == {
        "investment-banking",
        "law",
        "management-consulting",
        "accounting-audit",
    }
