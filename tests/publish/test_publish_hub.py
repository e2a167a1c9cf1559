"""`apexrl publish` through huggingface_hub's real client against the local Hub stand-in."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pyarrow.parquet as pq
from huggingface_hub import HfApi, hf_hub_download

from apexrl.cli.app import app
from tests.hub_standin import Fault
from tests.publish.conftest import READ_TOKEN, SECRET_MARKERS, WRITE_TOKEN


def _publish(runner, *args):
    return runner.invoke(app, ["publish", *args, "--json"])


def _rows(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _no_secret(data: bytes, where: str) -> None:
    for m in SECRET_MARKERS:
        assert m.encode() not in data, f"{m} leaked into {where}"


def _download(hub, repo, path, tmp_path, repo_type="model", revision=None) -> bytes:
    p = hf_hub_download(
        repo,
        path,
        repo_type=repo_type,
        revision=revision,
        cache_dir=str(tmp_path / "dl"),
        endpoint=hub.url,
        token=WRITE_TOKEN,
    )
    with open(p, "rb") as fh:
        return fh.read()


def test_model_roundtrip(runner, hub_env, ckpt, run_dir, tmp_path):
    hub = hub_env
    stage = tmp_path / "stage"
    r = _publish(
        runner, "model", str(ckpt), "--repo", "acme/tiny", "--eval", str(run_dir),
        "--base-model", "Qwen/Qwen3-0.6B", "--stage", str(stage),
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rows = _rows(r)
    paths = {x["path"] for x in rows}
    assert paths == {
        "README.md", "chat_template.jinja", "config.json", "generation_config.json",
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
        "model.safetensors.index.json", "recipe.toml", "tokenizer.json", "tokenizer_config.json",
        ".eval_results/apex-tasks.yaml",
    }  # fmt: skip
    assert {x["status"] for x in rows} == {"uploaded"}
    assert "verified" in r.stderr
    repo = hub.repo("acme/tiny")
    assert repo.private  # private by default
    assert len(repo.commits) == 1  # few large commits
    # read back through the real client and compare with what was staged / the weights
    for x in rows:
        got = _download(hub, "acme/tiny", x["path"], tmp_path)
        assert hashlib.sha256(got).hexdigest() == x["sha256"]
        assert len(got) == x["size_bytes"]
        _no_secret(got, x["path"])
        if x["path"].endswith(".safetensors"):
            assert got == (ckpt / x["path"]).read_bytes()
    # the tree the client lists is the plan, with LFS for the weights
    tree = {f.path: f for f in HfApi(endpoint=hub.url, token=WRITE_TOKEN).list_repo_tree(
        "acme/tiny", recursive=True)}  # fmt: skip
    assert set(tree) == paths | {".eval_results"}  # its folder listed too
    assert tree["model-00001-of-00002.safetensors"].lfs is not None
    card = _download(hub, "acme/tiny", "README.md", tmp_path).decode()
    assert "base_model: Qwen/Qwen3-0.6B" in card and "model-index:" in card
    assert "| run | law | 1 | 50.00 | [40.00, 60.00] |" in card
    assert "optimizer.pt" not in paths


def test_rerun_sends_nothing(runner, hub_env, ckpt):
    hub = hub_env
    hub.page_size = 3  # the tree listing comes in pages (Link: rel="next")
    assert _publish(runner, "model", str(ckpt), "--repo", "acme/tiny").exit_code == 0
    n_commits, n_puts = len(hub.repo("acme/tiny").commits), len(hub.lfs_puts)
    start = len(hub.requests)
    r = _publish(runner, "model", str(ckpt), "--repo", "acme/tiny")
    assert r.exit_code == 0, r.stderr
    assert {x["status"] for x in _rows(r)} == {"unchanged"}
    assert len(hub.repo("acme/tiny").commits) == n_commits and len(hub.lfs_puts) == n_puts
    assert not [q for q in hub.requests[start:] if "/preupload/" in q or "/commit/" in q]
    assert sum("/tree/main" in q for q in hub.requests[start:]) == 2 * 4  # 10 files, 2 listings


def test_interrupted_upload_resumes_without_resending(runner, hub_env, ckpt):
    hub = hub_env
    # ~1 KB per commit: several commits; the second commit fails (5xx) until retries run out
    hub.faults.append(Fault(r"POST /api/models/acme/tiny/commit/", 500, times=100, skip=1))
    args = ["model", str(ckpt), "--repo", "acme/tiny", "--commit-size", "0.000001"]
    r = _publish(runner, *args)
    assert r.exit_code == 4, r.stderr
    assert "after 6 attempts" in r.stderr and "rerun the same command" in r.stderr
    repo = hub.repo("acme/tiny")
    first_commit = set(repo.commits[0]["ops"])
    assert first_commit and "README.md" not in repo.branches["main"]  # card comes last
    puts_before = list(hub.lfs_puts)
    assert puts_before  # the failed commit's LFS objects were already uploaded
    hub.faults.clear()
    r = _publish(runner, *args)
    assert r.exit_code == 0, r.stderr
    rows = _rows(r)
    assert {x["path"] for x in rows if x["status"] == "unchanged"} == first_commit
    resent = [c["ops"] for c in repo.commits[1:]]
    assert not first_commit & {p for ops in resent for p in ops}  # committed files not resent
    resent_lfs = hub.lfs_puts[len(puts_before) :]
    assert not set(resent_lfs) & set(puts_before)  # no LFS object sent twice
    assert len(set(hub.lfs_puts)) == len(hub.lfs_puts)
    assert "README.md" in repo.branches["main"]


def test_retries_429_and_5xx(runner, hub_env, ckpt):
    hub = hub_env
    hub.faults += [
        Fault(r"POST /api/repos/create", 503, times=2, message="upstream unavailable"),
        Fault(r"POST /api/models/acme/tiny/commit/", 429, times=1, retry_after=0),
    ]
    r = _publish(runner, "model", str(ckpt), "--repo", "acme/tiny")
    assert r.exit_code == 0, r.stderr
    assert r.stderr.count("retrying") == 3
    assert sum(q == "POST /api/repos/create" for q in hub.requests) == 3


def test_other_4xx_not_retried(runner, hub_env, ckpt):
    hub = hub_env
    hub.faults.append(
        Fault(r"POST /api/models/acme/tiny/commit/", 400, times=5, message="Invalid path 'x'")
    )
    r = _publish(runner, "model", str(ckpt), "--repo", "acme/tiny")
    assert r.exit_code == 4, r.stderr
    assert "the Hub answered 400: Invalid path 'x'" in r.stderr and "hint:" in r.stderr
    assert sum("/commit/" in q for q in hub.requests) == 1  # not retried


def test_read_only_token_is_auth_error(runner, hub_env, ckpt, monkeypatch):
    hub = hub_env
    monkeypatch.setenv("HF_TOKEN", READ_TOKEN)
    r = _publish(runner, "model", str(ckpt), "--repo", "acme/tiny")
    assert r.exit_code == 3, r.stderr
    assert "read-only" in r.stderr
    assert sum(q == "POST /api/repos/create" for q in hub.requests) == 1


def test_missing_token_exits_3(runner, hub_env, ckpt, monkeypatch, tmp_path):
    import huggingface_hub.constants as c

    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(c, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(c, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-tokens"))
    r = _publish(runner, "model", str(ckpt), "--repo", "acme/tiny")
    assert r.exit_code == 3, r.stderr
    assert "HF_TOKEN" in r.stderr
    assert hub_env.requests == []
    # a dry run needs no token
    assert _publish(runner, "model", str(ckpt), "--repo", "acme/tiny", "--dry-run").exit_code == 0


def test_model_to_branch(runner, hub_env, ckpt):
    hub = hub_env
    r = _publish(
        runner, "model", str(ckpt), "--repo", "acme/tiny", "--revision", "step-100", "--public"
    )
    assert r.exit_code == 0, r.stderr
    repo = hub.repo("acme/tiny")
    assert not repo.private
    assert "config.json" in repo.branches["step-100"] and repo.branches["main"] == {}


def test_traces_roundtrip(runner, hub_env, run_dir, tmp_path):
    hub = hub_env
    # one trial whose messages hold no secret: its token ids are published (the others'
    # spell a planted secret and are withheld, issue 29)
    traj = run_dir / "trajectories" / "task_a.a0" / "trajectory.json"
    atif = json.loads(traj.read_text())
    for m in atif["extra"]["tito"]["messages"]:
        m["content"] = "clean text" if m["content"] else m["content"]
    traj.write_text(json.dumps(atif))
    r = _publish(runner, "traces", str(run_dir), "--repo", "acme/traces", "--include-tokens")
    assert r.exit_code == 0, r.stderr
    paths = {x["path"] for x in _rows(r)}
    sessions = {f"sessions/{t[:6]}/{t}.jsonl" for t in ("task_a.a0", "task_a.a1", "task_b.a0",
                                                        "task_b.a1")}  # fmt: skip
    assert paths == {"README.md", "data/train-00000-of-00001.parquet", "run.json",
                     "summary.json"} | sessions  # fmt: skip
    repo = hub.repo("acme/traces", "dataset")
    assert repo.private  # traces are private by default
    for p in paths:
        data = _download(hub, "acme/traces", p, tmp_path, repo_type="dataset")
        if p.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(data))
            rows = table.to_pylist()
            data = json.dumps(rows).encode()
            assert len(rows) == 4
            assert {r["trial_id"] for r in rows} == {
                "task_a.a0",
                "task_a.a1",
                "task_b.a0",
                "task_b.a1",
            }
            row = next(r for r in rows if r["trial_id"] == "task_a.a0")
            assert row["token_ids"] == [1, 2, 3, 4, 5, 6]
            assert row["loss_mask"] == [0, 0, 0, 1, 1, 0]
            assert all(r["token_ids"] == [] for r in rows if r is not row)
            assert [m["role"] for m in row["messages"]] == [
                "system", "user", "assistant", "tool", "assistant",
            ]  # fmt: skip
            assert (
                json.loads(row["messages"][2]["tool_calls"])[0]["function"]["name"] == "files_read"
            )
            assert row["criteria"][0] == {
                "id": "v1", "criterion": "States 42", "met": True, "score": None, "reason": None,
                "source": "deterministic",
            }  # fmt: skip
            assert [x["name"] for x in row["logs"]] == ["agent/agent.log"]
            assert "[REDACTED:env:FMP_API_KEY]" in row["logs"][0]["text"]
            assert "[REDACTED:env:OPENAI_API_KEY]" in row["criteria"][1]["reason"]
            planted = next(r for r in rows if r["trial_id"] == "task_b.a0")
            assert "[REDACTED:" in planted["messages"][3]["content"]
        _no_secret(data, p)
    card = _download(hub, "acme/traces", "README.md", tmp_path, repo_type="dataset").decode()
    assert "path: data/train-*.parquet" in card and "| token_ids |" in card


def test_dataset_roundtrip(runner, hub_env, packed_dataset, tmp_path):
    hub = hub_env
    r = _publish(
        runner, "dataset", str(packed_dataset), "--repo", "acme/tasks", "--license", "cc-by-4.0"
    )
    assert r.exit_code == 0, r.stderr
    assert "github-token" in r.stderr  # the planted key was found and reported
    # the real client reads it back through `tasks unpack hf://`
    out = tmp_path / "unpacked"
    u = runner.invoke(app, ["tasks", "unpack", "hf://acme/tasks", "-o", str(out), "--json"])
    assert u.exit_code == 0, u.stderr
    names = sorted(p.name for p in (tmp_path / "tasks").iterdir() if not p.name.startswith("."))
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == names
    for p in out.rglob("*"):
        if p.is_file():
            _no_secret(p.read_bytes(), str(p))
    assert any("[REDACTED:github-token]" in p.read_text() for p in out.rglob("instruction.md"))
    card = _download(hub, "acme/tasks", "README.md", tmp_path, repo_type="dataset").decode()
    assert "license: cc-by-4.0" in card and "| law |" in card
    # shards inside stay gzip tars
    shard = next(iter(hub.repo("acme/tasks", "dataset").branches["main"]))
    assert shard.startswith("data/") or shard in ("README.md", "_dataset.json")
    for path in hub.repo("acme/tasks", "dataset").branches["main"]:
        if path.endswith(".parquet"):
            data = hub.file_bytes("acme/tasks", path, "dataset")
            for row in pq.read_table(io.BytesIO(data)).to_pylist():
                with tarfile.open(fileobj=io.BytesIO(row["task_binary"]), mode="r:gz") as tf:
                    assert tf.getmembers()
                assert hashlib.sha256(row["task_binary"]).hexdigest() == row["sha256"]


def test_killed_upload_resumes(runner, hub_env, ckpt, tmp_path):
    """SIGKILL in the middle of an upload (the second commit hangs), then rerun."""
    import os
    import subprocess
    import sys
    import time

    hub = hub_env
    hub.faults.append(Fault(r"POST /api/models/acme/tiny/commit/", -1, times=1, skip=1))
    args = ["model", str(ckpt), "--repo", "acme/tiny", "--commit-size", "0.000001"]
    # SIGKILL leaves the killed publish's staged copy in its temp folder: under tmp_path
    (tmp_path / "tmp").mkdir()
    env = {
        **os.environ,
        "HF_HUB_DISABLE_XET": "1",
        "NO_COLOR": "1",
        "TMPDIR": str(tmp_path / "tmp"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "apexrl", "publish", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not hub.held and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert hub.held, proc.stderr.read().decode() if proc.poll() is not None else "no commit"
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stderr.close()
        hub.release.set()
    repo = hub.repo("acme/tiny")
    committed = set(repo.commits[0]["ops"])
    assert len(repo.commits) == 1 and "README.md" not in repo.branches["main"]
    puts = list(hub.lfs_puts)
    r = _publish(runner, *args)
    assert r.exit_code == 0, r.stderr
    assert {x["path"] for x in _rows(r) if x["status"] == "unchanged"} == committed
    assert not committed & {p for c in repo.commits[1:] for p in c["ops"]}
    assert not set(hub.lfs_puts[len(puts) :]) & set(puts)
    assert "README.md" in repo.branches["main"]


def test_private_publish_refuses_existing_public_repo(runner, hub_env, run_dir):
    hub = hub_env
    assert _publish(runner, "traces", str(run_dir), "--repo", "acme/t", "--public").exit_code == 0
    assert not hub.repo("acme/t", "dataset").private
    n = len(hub.repo("acme/t", "dataset").commits)
    r = _publish(runner, "traces", str(run_dir), "--repo", "acme/t")  # private by default
    assert r.exit_code == 1 and "already exists and is public" in r.stderr
    assert len(hub.repo("acme/t", "dataset").commits) == n
