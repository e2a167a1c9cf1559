"""The pieces of `eval run --ray-address` that need no cluster: placement arithmetic,
failure classes, what a node unpacks and caches, and a trial folder's trip back.
(tests/eval/test_ray_cluster.py runs them together on a real multi-node cluster.)"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from apexrl.eval import cluster, node
from apexrl.trial.config import SandboxSettings


def _node(cpu: float, mem_gb: float, alive: bool = True) -> dict:
    return {"Alive": alive, "Resources": {"CPU": cpu, "memory": mem_gb * 2**30}}


def test_capacity_is_per_node_the_fewer_of_cpus_and_memory():
    nodes = [_node(8, 8), _node(2, 64), _node(16, 64, alive=False), _node(0, 64)]
    # 8 CPUs / 8 GiB at 1 CPU + 2 GiB: 4 (memory); 2 CPUs / 64 GiB: 2 (CPUs); dead: 0; none
    assert cluster.capacity(nodes, 1.0, 2048) == 6
    assert cluster.capacity(nodes, 2.0, 4096) == 2 + 1
    assert cluster.capacity([_node(1, 1)], 1.0, 2048) == 0


def test_a_trial_asks_for_the_sandbox_limits():
    assert cluster.trial_resources(SandboxSettings()) == (1.0, cluster.DEFAULT_MEMORY_MB)
    assert cluster.trial_resources(SandboxSettings(cpus=2, memory_mb=4096)) == (2.0, 4096)


def test_only_system_failures_are_resubmitted():
    import ray.exceptions as rx

    assert cluster.is_infra(rx.WorkerCrashedError())
    assert cluster.is_infra(rx.NodeDiedError("n"))
    assert cluster.is_infra(rx.ObjectLostError("00" * 28, None, ""))
    assert not cluster.is_infra(rx.TaskCancelledError())
    assert not cluster.is_infra(rx.RayTaskError("f", "tb", ValueError("bad task")))
    assert not cluster.is_infra(ValueError("x"))


def _shipped(kind: str, name: str, blob: bytes, monkeypatch) -> node.Shipped:
    monkeypatch.setattr(node, "_fetch", lambda item: blob)
    digest = hashlib.sha256(blob).hexdigest()
    return node.Shipped(kind, name, digest, len(blob), [None])


def test_a_task_is_unpacked_once_per_digest(task_dirs, tmp_path, monkeypatch):
    from apexrl.tasks.pack import pack_task_dir

    src = sorted(task_dirs.iterdir())[0]
    blob, sha = pack_task_dir(src)
    item = _shipped("task", src.name, blob, monkeypatch)
    scratch = tmp_path / "scratch"
    got = node.task_dir(scratch, item)
    assert got == scratch / "tasks" / sha / src.name
    assert (got / "task.toml").read_bytes() == (src / "task.toml").read_bytes()
    monkeypatch.setattr(node, "_fetch", lambda item: pytest.fail("fetched again"))
    assert node.task_dir(scratch, item) == got  # cached: the bytes are not fetched
    assert [p.name for p in (scratch / "tasks").iterdir()] == [sha]  # no temp left


def test_a_world_zip_becomes_a_one_world_store(example_dirs, tmp_path, monkeypatch):
    from apexrl.worlds.store import WorldStore

    expert, _ = example_dirs
    zpath = sorted((expert / "world_files_zipped").glob("*.zip"))[0]
    world_id = zpath.stem
    item = _shipped("world-zip", world_id, zpath.read_bytes(), monkeypatch)
    store = node.world_store(tmp_path, item)
    assert store == tmp_path / "worlds" / item.digest
    root = WorldStore(store, cache_dir=tmp_path / "unused").pristine(world_id)
    assert root == store / world_id and (root / "filesystem").is_dir()
    assert not (tmp_path / "unused").exists()  # a folder store: nothing extracted again


def test_bytes_that_do_not_match_their_digest_are_refused(monkeypatch):
    import ray

    from apexrl.errors import BadRecordError

    monkeypatch.setattr(ray, "get", lambda ref: b"other bytes")
    item = node.Shipped("task", "t", hashlib.sha256(b"task").hexdigest(), 4, [None])
    with pytest.raises(BadRecordError, match="hash to"):
        node._fetch(item)


def test_a_trial_folder_comes_back_without_links_and_capped(tmp_path, monkeypatch):
    src = tmp_path / "trial"
    (src / "agent").mkdir(parents=True)
    (src / "agent" / "trajectory.json").write_text("{}")
    (src / "result.json").write_text('{"ok": 1}')
    (src / "big.bin").write_bytes(b"x" * 5000)
    os.symlink("/etc/passwd", src / "agent" / "leak")
    monkeypatch.setattr(node, "LOGS_MAX_BYTES", 1000)
    dest = tmp_path / "run" / "logs" / "t.a0"
    cluster.restore_logs(node.pack_logs(src), dest)
    names = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert names == ["agent/trajectory.json", node.LOGS_SKIPPED, "result.json"]
    assert "big.bin\t5000 bytes" in (dest / node.LOGS_SKIPPED).read_text()
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    cluster.restore_logs(node.pack_logs(src), dest)  # again: replaced as a whole
    assert sorted(p.name for p in dest.parent.iterdir()) == ["t.a0"]


def test_local_tokenizer_files_travel_not_the_weights(tmp_path, monkeypatch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "tokenizer.json").write_text("{}")
    (ckpt / "chat_template.jinja").write_text("{{ x }}")
    (ckpt / "model.safetensors").write_bytes(b"\0" * 1000)
    blob = node.pack_files(ckpt)
    item = _shipped("dir", ckpt.name, blob, monkeypatch)
    got = node.local_files(tmp_path / "scratch", item)
    assert sorted(p.name for p in got.iterdir()) == ["chat_template.jinja", "tokenizer.json"]
    blob = node.pack_files(ckpt / "chat_template.jinja")
    tpl = _shipped("file", "chat_template.jinja", blob, monkeypatch)
    path = node.local_files(tmp_path / "scratch", tpl)
    assert path.name == "chat_template.jinja" and path.read_text() == "{{ x }}"
    assert Path(path).parent.parent == tmp_path / "scratch" / "files"
