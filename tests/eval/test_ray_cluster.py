"""`eval run --ray-address` on a real multi-node Ray cluster on this machine.

A head with no CPUs (no trial runs there) and worker nodes of one CPU each, every one
its own raylet (tests/raycluster.py). The worker nodes run under bubblewrap with a
private /tmp and /dev/shm: they cannot see the driver's tasks, worlds or run folder,
so a trial that read a driver path would fail. Real trials (Harbor, the local
environment's bubblewrap sandbox, apexrl's grading) with the oracle agent.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import orjson
import pytest

from apexrl.eval import resume
from apexrl.eval.runner import EvalRequest, run_eval
from tests.raycluster import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

VARIES = {"started_at", "duration_s", "node_id", "infra_retries"}


@pytest.fixture(scope="module")
def data(example_dirs, tmp_path_factory) -> Path:
    """The driver's folders: tasks, world store, run dirs (hidden from the workers)."""
    expert, tasks = example_dirs
    root = tmp_path_factory.mktemp("driver")
    shutil.copytree(tasks, root / "tasks")
    shutil.copytree(expert / "world_files_zipped", root / "worlds")
    (root / "runs").mkdir()
    return root


@pytest.fixture(scope="module")
def cluster(data, example_dirs, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("raycluster"))
    try:
        c.start_head()
        c.start_worker("a", hide=[data, example_dirs[0].parent])
        yield c
    finally:
        c.stop()


def _request(data: Path, run: str, **kw) -> EvalRequest:
    return EvalRequest(
        tasks=str(data / "tasks"),
        run_dir=data / "runs" / run,
        agent="oracle",
        worlds_dir=data / "worlds",
        **kw,
    )


def _rows(run_dir: Path) -> dict[str, dict]:
    return {
        tid: row.model_dump(exclude=VARIES) for tid, row in resume.load_journal(run_dir).items()
    }


def test_the_worker_node_cannot_see_the_driver(cluster, data):
    import ray

    ray.init(address=cluster.address, log_to_driver=False)
    try:

        @ray.remote(num_cpus=0, resources={"node_a": 0.01})
        def look(paths):
            import os

            return ray.get_runtime_context().get_node_id(), [os.path.exists(p) for p in paths]

        paths = [str(data), str(data / "tasks"), str(data / "worlds"), str(data / "runs")]
        node, seen = ray.get(look.remote(paths), timeout=120)
    finally:
        ray.shutdown()
    assert node == cluster.node_id("a")
    assert seen == [False] * 4
    assert all(Path(p).exists() for p in paths)  # the driver sees them


def test_preflight_asks_every_node(cluster):
    """Each node is asked, from the node: unreachable URLs and missing env keys."""
    from apexrl.eval.cluster import preflight_nodes, session
    from tests.raycluster import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with session(cluster.address):
        problems = preflight_nodes("local", ["APEXRL_TEST_NEVER_SET"], [url])
    text = "\n".join(p.what for p in problems)
    for name in ("head", "a"):
        nid = cluster.node_id(name)[:12]
        assert f"node {nid} cannot reach {url}" in text
        assert f"node {nid} lacks env key(s) the tasks need: APEXRL_TEST_NEVER_SET" in text


def test_oracle_eval_runs_on_the_isolated_node_and_equals_a_local_run(cluster, data):
    infos: list[str] = []
    req = _request(data, "cluster", limit=3, ray_address=cluster.address)
    report, cfg = run_eval(req, on_info=infos.append)
    assert report.ran == 3 and report.lost == []
    assert report.summary.pass_at_1.value == 1.0
    assert any("1 trial(s) at once" in i and "1 in flight" in i for i in infos), infos
    run_dir = data / "runs" / "cluster"
    rows = resume.load_journal(run_dir)
    assert {r.node_id for r in rows.values()} == {cluster.node_id("a")}
    for tid, r in rows.items():
        assert r.status == "complete" and r.criteria_met == r.criteria_total > 0
        assert r.infra_retries == 0
        # the trial folder and trajectory came back through Ray; the driver wrote them
        assert (run_dir / "logs" / tid / "result.json").is_file()
        verdicts = orjson.loads((run_dir / "trajectories" / tid / "verdicts.json").read_bytes())
        assert len(verdicts["verdicts"]) == r.criteria_total
    # nothing of the node's scratch paths in what the driver keeps
    assert "apexrl-ray-" not in (run_dir / "results.jsonl").read_text()

    local, _ = run_eval(_request(data, "local", limit=3))
    assert local.ran == 3
    assert _rows(run_dir) == _rows(data / "runs" / "local")
    a, b = report.summary.model_dump(), local.summary.model_dump()
    for s in (a, b):
        s.pop("duration_s_mean")
    assert a == b


def test_a_killed_node_loses_no_trial(cluster, data):
    """Two worker nodes; the first one's raylet is killed while it runs a trial. The
    lost trial is resubmitted and runs on the other node; none is scored 0."""
    b = cluster.start_worker("b", hide=[data])
    a = cluster.nodes["a"]
    node_b = cluster.node_id("b")
    req = _request(data, "killed", limit=3, attempts=2, ray_address=cluster.address)
    box: dict = {}

    def go():
        try:
            box["report"] = run_eval(req)[0]
        except BaseException as e:  # re-raised below
            box["error"] = e

    t = threading.Thread(target=go)
    t.start()
    deadline = time.monotonic() + 300
    killed = None
    while time.monotonic() < deadline and t.is_alive():
        if _trial_in_flight(a):  # a trial is in flight on node a: kill its raylet
            killed = a.kill_raylet()
            break
        time.sleep(0.2)
    t.join(timeout=600)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    assert killed is not None, "node a never ran a trial"
    report = box["report"]
    assert report.lost == [] and report.ran == 6
    rows = resume.load_journal(data / "runs" / "killed")
    assert len(rows) == 6
    assert all(r.status == "complete" and r.reward == 1.0 for r in rows.values())
    retried = [r for r in rows.values() if r.infra_retries]
    assert retried and all(r.node_id == node_b for r in retried)
    losses = (data / "runs" / "killed" / resume.INFRA_FILE).read_text().splitlines()
    assert {orjson.loads(x)["trial_id"] for x in losses} == {r.trial_id for r in retried}
    assert b.proc.poll() is None


def _trial_in_flight(node) -> bool:
    """Whether a trial's folder exists in the node's scratch, seen through one of its
    processes' root (the node's own mount namespace: its private /tmp)."""
    for pid in sorted(node.descendants()):
        for d in Path(f"/proc/{pid}/root/tmp").glob("apexrl-ray-*/trials/*"):
            if d.is_dir():
                return True
    return False
