"""Datasets in the recipe's own format, both ways.

Reading: a Parquet dataset with only `path` + `task_binary`, whose task dirs carry
archipelago.json and a task.toml without apexrl's [metadata], and a rubric in
archipelago's verifier shape (verifier_values.criteria): validate, ls, split --by
world and the oracle eval work on it.
Writing: a packed apexrl dataset carries archipelago.json with the fields the
recipe's code reads (task_slug, ecr_image, required_env_keys, needs_snapshot,
world_short_name).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from apexrl.envs.modal import task_image
from apexrl.tasks.meta import read_task_meta
from tests.published_shape import hex32

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com/apex-worlds"
WORLDS = {  # world short names as the recipe's archipelago.json spells them
    "law-world-433": "law",
    "investment-banking-world-219": "investment-banking",
    "management-consulting-world-129": "management-consulting",
}
TASK_TOML = """version = "1.0"

[agent]
timeout_sec = 3600.0

[verifier]
timeout_sec = 600.0

[verifier.env]
GOOGLE_API_KEY = "${GOOGLE_API_KEY:-}"

[environment]
cpus = 2
memory_mb = 4096
"""
TEST_SH = "#!/usr/bin/env bash\npython3 /tests/grade.py\n"


def recipe_task(root: Path, short_name: str, i: int) -> Path:
    world_id = f"world_{hex32(short_name)}"
    task_id = f"task_{hex32(short_name, i)}"
    slug = f"mercor-{short_name.split('-world-')[-1]}-{i:02d}-{task_id[-8:]}"
    d = root / slug
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "solution").mkdir()
    (d / "instruction.md").write_text(f"What is the margin in {short_name}? ({i})\n")
    (d / "task.toml").write_text(TASK_TOML)
    (d / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    answer = f"The margin is 40 in {short_name}."
    (d / "archipelago.json").write_text(
        json.dumps(
            {
                "task_id": task_id,
                "task_name": f"World{short_name.split('-')[-1]}_{i:02d}",
                "task_slug": slug,
                "world_id": world_id,
                "world_short_name": short_name,
                "ecr_image": f"{ECR}:{short_name}",
                "required_env_keys": ["FMP_API_KEY"] if "banking" in short_name else [],
                "needs_snapshot": False,
                "rubric_version": 2,  # unknown fields are kept, not fatal
            }
        )
    )
    verifiers = [
        {
            "verifier_id": f"ver_{hex32(task_id, k)}",
            "verifier_version": 1,
            "world_id": world_id,
            "task_id": task_id,
            "eval_config_id": "ec_output_llm",
            "verifier_values": {"criteria": text, "is_primary_objective": k == 0},
            "verifier_index": k,
            "verifier_dependencies": None,
        }
        for k, text in enumerate(["States the margin is 40", "Names the world"])
    ]
    (d / "tests" / "verifiers.json").write_text(json.dumps(verifiers))
    (d / "tests" / "golden_responses.json").write_text(json.dumps({"gold_response": answer}))
    (d / "tests" / "test.sh").write_text(TEST_SH)
    (d / "tests" / "test.sh").chmod(0o755)
    (d / "solution" / "solve.sh").write_text(
        f"#!/usr/bin/env bash\nmkdir -p /logs/agent\nprintf '%s\\n' '{answer}' "
        "> /logs/agent/answer.txt\n"
    )
    return d


@pytest.fixture(scope="module")
def recipe_dataset(tmp_path_factory):
    """(dataset .parquet with only path + task_binary, world store, task dirs)."""
    root = tmp_path_factory.mktemp("recipe")
    tasks, store = root / "tasks", root / "worlds"
    dirs = [recipe_task(tasks, name, i) for name in WORLDS for i in (1, 2)]
    for name in WORLDS:
        w = store / f"world_{hex32(name)}"
        (w / "filesystem").mkdir(parents=True)
        (w / "filesystem" / "figures.csv").write_text("item,value\nrevenue,120\ncost,80\n")
        (w / ".apps_data" / "mail").mkdir(parents=True)
        (w / ".apps_data" / "mail" / "inbox.mbox").write_text("")
    rows = []
    for d in dirs:  # the recipe's rows: members prefixed by the task dir name
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(d, arcname=d.name)
        rows.append({"path": d.name, "task_binary": buf.getvalue()})
    pq.write_table(pa.Table.from_pylist(rows), root / "recipe.parquet")
    return root / "recipe.parquet", store, dirs


def ndjson(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_one_reader_takes_archipelago_json(recipe_dataset):
    _, _, dirs = recipe_dataset
    meta = read_task_meta(dirs[0])
    arch = json.loads((dirs[0] / "archipelago.json").read_text())
    assert meta.source == "archipelago" and meta.task_id == arch["task_id"]
    assert meta.domain == "law" and meta.world_id == arch["world_id"]
    assert meta.task_slug == arch["task_slug"] and meta.n_criteria == 2
    assert meta.image == arch["ecr_image"] and meta.image_profile == "mercor"
    # the Modal environment's image choice comes from the same reader
    img = task_image(dirs[0] / "environment")
    assert img.ref == arch["ecr_image"] and img.profile == "mercor"
    assert img.task_slug == arch["task_slug"] and img.world_id == arch["world_id"]


def test_validate_ls_split_on_a_recipe_dataset(runner, recipe_dataset, tmp_path):
    ds, _, dirs = recipe_dataset
    res = runner.invoke(app, ["tasks", "validate", str(ds), "--json"])
    assert res.exit_code == 0, res.output
    assert [f for f in ndjson(res.stdout) if f["severity"] == "error"] == []
    listing = ndjson(runner.invoke(app, ["tasks", "ls", str(ds), "--json"]).stdout)
    assert len(listing) == len(dirs)
    assert all(r["task_id"] and r["world_id"] for r in listing)
    assert sorted({r["domain"] for r in listing}) == sorted(set(WORLDS.values()))
    res = runner.invoke(
        app,
        ["tasks", "split", str(ds), "--by", "world", "--eval-fraction", "0.3", "-o", str(tmp_path)],
    )
    assert res.exit_code == 0, res.output
    sides = {s["split"]: set(s["worlds"]) for s in ndjson(res.stdout)}
    assert sides["train"] and sides["eval"] and not sides["train"] & sides["eval"]


def test_validate_names_a_broken_archipelago_json(runner, recipe_dataset, tmp_path):
    import shutil

    _, _, dirs = recipe_dataset
    bad = tmp_path / "tasks" / dirs[0].name
    shutil.copytree(dirs[0], bad)
    (bad / "archipelago.json").write_text('{"task_id": "task_x"}')  # no task_slug
    res = runner.invoke(app, ["tasks", "validate", str(bad.parent), "--json"])
    assert res.exit_code == 1
    found = ndjson(res.stdout)
    assert any(f["check"] == "metadata" and "task_slug" in f["message"] for f in found)


def test_oracle_eval_on_a_recipe_dataset(runner, recipe_dataset, tmp_path):
    ds, store, dirs = recipe_dataset
    run_dir = tmp_path / "run"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(ds), "--worlds", str(store)]
    # The tasks declare FMP_API_KEY (required_env_keys): the preflight wants it set.
    res = runner.invoke(app, [*args, "-o", str(run_dir), "-n", "3"], env={"FMP_API_KEY": "x"})
    assert res.exit_code == 0, res.output
    s = orjson.loads(res.stdout.strip().splitlines()[-1])
    assert s["n_tasks"] == len(dirs) and s["pass_at_1"]["value"] == 1.0
    assert set(s["per_domain"]) == set(WORLDS.values())
    rows = pq.read_table(run_dir / "results.parquet").to_pylist()
    assert all(r["criteria_total"] == 2 == r["criteria_met"] for r in rows)


def test_packed_apexrl_dataset_carries_archipelago_json(runner, mini_apex, tmp_path):
    images = tmp_path / "images.jsonl"
    images.write_text(
        json.dumps({"world_id": "world_b", "ref": f"{ECR}:world_b", "digest": "sha256:" + "a" * 64})
        + "\n"
    )
    tasks = tmp_path / "tasks"
    res = runner.invoke(
        app, ["tasks", "convert", str(mini_apex), "-o", str(tasks), "--images", str(images)]
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(tmp_path / "ds")])
    assert res.exit_code == 0, res.output
    table = pq.read_table(next((tmp_path / "ds").rglob("*.parquet"))).to_pylist()
    seen = set()
    for row in table:
        with tarfile.open(fileobj=io.BytesIO(row["task_binary"]), mode="r:gz") as tar:
            names = {m.name.removeprefix("./") for m in tar}
            arch = json.loads(
                tar.extractfile(next(m for m in tar if m.name.endswith("archipelago.json"))).read()
            )
        assert "archipelago.json" in names
        # what the recipe reads: task_slug (required), ecr_image, required_env_keys,
        # needs_snapshot, world_short_name (its prefix is the domain)
        assert arch["task_slug"] == row["path"]
        assert arch["world_short_name"].startswith(row["domain"] + "-")
        assert isinstance(arch["required_env_keys"], list)
        assert isinstance(arch["needs_snapshot"], bool)
        assert arch["task_id"] == row["task_id"] and arch["world_id"] == row["world_id"]
        if row["world_id"] == "world_b":
            assert arch["ecr_image"] == f"{ECR}@sha256:" + "a" * 64
        else:
            assert arch["ecr_image"] is None
        seen.add(row["domain"])
    assert seen == {"law", "investment-banking", "management-consulting"}


def test_images_jsonl_records_the_image_profile(runner, mini_apex, tmp_path):
    images = tmp_path / "images.jsonl"
    rec = {"world_id": "world_b", "ref": f"{ECR}:w", "digest": "sha256:" + "b" * 64}
    images.write_text(json.dumps({**rec, "profile": "mercor"}) + "\n")
    tasks = tmp_path / "tasks"
    res = runner.invoke(
        app, ["tasks", "convert", str(mini_apex), "-o", str(tasks), "--images", str(images)]
    )
    assert res.exit_code == 0, res.output
    by_world = {read_task_meta(d).world_id: d for d in tasks.iterdir() if d.is_dir()}
    meta = read_task_meta(by_world["world_b"])
    assert meta.image_profile == "mercor" and meta.source == "apexrl"
    assert task_image(by_world["world_b"] / "environment").profile == "mercor"
    assert read_task_meta(by_world["world_c"]).image_profile is None  # apexrl's default
