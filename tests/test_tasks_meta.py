"""The one task-metadata reader: apexrl [metadata], archipelago.json, both, neither."""

from __future__ import annotations

import json

import pytest

from apexrl.errors import BadRecordError
from apexrl.tasks.meta import (
    domain_from_short_name,
    find_task_meta,
    read_task_meta,
    rubric_criteria,
)


def _task(tmp_path, toml: str | None, arch: dict | None):
    d = tmp_path / "t1"
    d.mkdir()
    if toml is not None:
        (d / "task.toml").write_text(toml)
    if arch is not None:
        (d / "archipelago.json").write_text(json.dumps(arch))
    return d


ARCH = {
    "task_id": "task_a",
    "task_slug": "slug-a",
    "world_id": "world_a",
    "world_short_name": "management-consulting-world-129",
    "ecr_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/w@sha256:" + "c" * 64,
}


def test_metadata_table_wins_and_archipelago_fills_the_rest(tmp_path):
    toml = '[agent]\ntimeout_sec = 1.0\n\n[metadata]\ntask_id = "task_a"\ndomain = "law"\n'
    meta = read_task_meta(_task(tmp_path, toml + 'world_id = "world_b"\n', ARCH))
    assert meta.source == "apexrl" and meta.domain == "law" and meta.world_id == "world_b"
    assert meta.world_short_name == ARCH["world_short_name"]
    assert meta.image_digest == "sha256:" + "c" * 64 and meta.image.endswith("/w")


def test_archipelago_only(tmp_path):
    meta = read_task_meta(_task(tmp_path, "[agent]\ntimeout_sec = 1.0\n", ARCH))
    assert meta.source == "archipelago" and meta.domain == "management-consulting"
    assert meta.task_slug == "slug-a" and meta.needs_snapshot is True  # the recipe's default


def test_neither_and_broken(tmp_path):
    d = _task(tmp_path, "[agent]\ntimeout_sec = 1.0\n", None)
    assert find_task_meta(d) is None
    with pytest.raises(BadRecordError, match="no task metadata") as e:
        read_task_meta(d)
    assert "archipelago.json" in (e.value.hint or "")
    (d / "archipelago.json").write_text("{not json")
    with pytest.raises(BadRecordError, match="archipelago.json"):
        read_task_meta(d)
    (d / "archipelago.json").unlink()
    (d / "task.toml").write_text('[metadata]\ntask_id = "x"\n')  # no world
    with pytest.raises(BadRecordError, match="names no world"):
        read_task_meta(d)
    assert find_task_meta(d, require_world=False).world_id == ""


def test_rubric_shapes_and_short_names():
    apexrl = [{"verifier_id": "v1", "criteria": "A", "check": {"kind": "exact", "value": "x"}}]
    assert rubric_criteria(apexrl) == apexrl
    arch = [{"verifier_id": "v2", "verifier_values": {"criteria": "B"}, "verifier_index": 0}]
    assert rubric_criteria(arch)[0]["criteria"] == "B"
    with pytest.raises(ValueError, match="no text"):
        rubric_criteria([{"verifier_id": "v3", "verifier_values": {}}])
    assert domain_from_short_name("law-world-433") == "law"
    assert domain_from_short_name("investment-banking-world-219") == "investment-banking"
    assert domain_from_short_name("Tax Advisory-world-7") == "tax-advisory"
    assert domain_from_short_name("") == ""


def test_the_training_tables_rows_read_metadata_through_the_one_reader(tmp_path):
    """train/entrypoint.task_meta (the parquet rows SkyRL trains on) agrees with
    read_task_meta, and falls back to the dir name where the metadata is unreadable."""
    from apexrl.train.entrypoint import task_meta

    d = _task(tmp_path, "[agent]\ntimeout_sec = 1.0\n", ARCH)
    assert task_meta(d) == {
        "task_id": "task_a",
        "world_id": "world_a",
        "domain": "management-consulting",
    }
    (d / "archipelago.json").write_text("{not json")
    assert task_meta(d) == {"task_id": "t1", "world_id": "", "domain": ""}
    (d / "archipelago.json").unlink()
    (d / "task.toml").write_text('[metadata]\ntask_id = "x"\ndomain = "law"\n')
    assert task_meta(d) == {"task_id": "x", "world_id": "", "domain": "law"}
