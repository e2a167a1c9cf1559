"""`apexrl peer fetch`: archipelago cloned with git at a pinned, verified commit into
apexrl's cache, and found there by every command that needs it (issue 44). The remote is a
local git repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from apexrl.cli.app import app


def git(*args: str, cwd: Path) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def make_remote(root: Path, files: dict[str, str]) -> list[str]:
    """A git repository with two commits of `files` (the second edits one); their ids."""
    root.mkdir(parents=True)
    git("init", "-q", "-b", "main", ".", cwd=root)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "one", cwd=root)
    first = git("rev-parse", "HEAD", cwd=root)
    (root / "README.md").write_text("second\n")
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "two", cwd=root)
    return [first, git("rev-parse", "HEAD", cwd=root)]


LAYOUT = {
    "mcp_servers/filesystem/pyproject.toml": "[project]\nname = 'fs'\n",
    "grading/runner/main.py": "print('runner')\n",
    "README.md": "first\n",
}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("APEXRL_ARCHIPELAGO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("APEXRL_ARCHIPELAGO", raising=False)
    return tmp_path / "cache"


def test_fetch_a_pinned_commit_and_find_it(runner, cache, tmp_path, monkeypatch):
    from apexrl.artifacts.archipelago_runner import resolve_checkout
    from apexrl.peer.runtime import find_checkout

    first, second = make_remote(tmp_path / "remote", LAYOUT)
    r = runner.invoke(app, ["peer", "fetch", "--from", str(tmp_path / "remote"),
                            "--commit", first, "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    path = Path(rec["path"])
    assert rec["commit"] == first and path == (cache / first).resolve()
    assert git("rev-parse", "HEAD", cwd=path) == first
    assert (path / "README.md").read_text() == "first\n"  # that commit's tree, not main's
    assert json.loads((cache / "current.json").read_text())["commit"] == first
    # every command's resolver finds it; an explicit checkout still wins
    assert find_checkout() == path and resolve_checkout(None).root == path
    assert resolve_checkout(None).commit == first
    other = tmp_path / "other"
    shutil.copytree(path, other)
    monkeypatch.setenv("APEXRL_ARCHIPELAGO", str(other))
    assert find_checkout() == other.resolve() and find_checkout(path) == path
    r = runner.invoke(app, ["peer", "where", "--json"])
    assert json.loads(r.stdout)["path"] == str(other)
    monkeypatch.delenv("APEXRL_ARCHIPELAGO")
    # a short id: fetched with the history, checked out, verified
    r = runner.invoke(app, ["peer", "fetch", "--from", str(tmp_path / "remote"),
                            "--commit", second[:7], "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["commit"] == second and find_checkout() == cache / second
    # again: reused, not cloned twice
    r = runner.invoke(app, ["peer", "fetch", "--from", str(tmp_path / "remote"),
                            "--commit", second])  # fmt: skip
    assert r.exit_code == 0 and "already in" in r.stderr
    assert sorted(p.name for p in cache.iterdir()) == sorted([first, second, "current.json"])


def test_a_moved_checkout_is_not_used(runner, cache, tmp_path):
    from apexrl.artifacts.archipelago_cache import fetched
    from apexrl.peer.runtime import find_checkout

    first, _ = make_remote(tmp_path / "remote", LAYOUT)
    assert runner.invoke(app, ["peer", "fetch", "--from", str(tmp_path / "remote"),
                               "--commit", first]).exit_code == 0  # fmt: skip
    git("commit", "-q", "--allow-empty", "-m", "edited", cwd=cache / first)
    assert fetched() is None  # HEAD no longer the recorded commit
    with pytest.raises(Exception, match="apexrl peer fetch"):
        find_checkout()


def test_bad_commits_and_remotes(runner, cache, tmp_path):
    first, _ = make_remote(tmp_path / "remote", LAYOUT)
    remote = str(tmp_path / "remote")
    r = runner.invoke(app, ["peer", "fetch", "--from", remote, "--commit", "0" * 40])
    assert r.exit_code == 2 and "has no commit" in r.stderr
    r = runner.invoke(app, ["peer", "fetch", "--from", remote, "--commit", "not-a-sha"])
    assert r.exit_code == 2 and "is not a commit id" in r.stderr
    r = runner.invoke(app, ["peer", "fetch", "--from", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such repository" in r.stderr
    other, _ = make_remote(tmp_path / "other", {"README.md": "x\n"})
    r = runner.invoke(app, ["peer", "fetch", "--from", str(tmp_path / "other"), "--commit", other])
    assert r.exit_code == 1 and "is not archipelago" in r.stderr
    assert [p.name for p in cache.iterdir()] == []  # nothing half-written
    r = runner.invoke(app, ["peer", "where"])
    assert r.exit_code == 2 and "apexrl peer fetch" in r.stderr


def test_no_default_refers_to_a_development_layout():
    pkg = Path(__file__).resolve().parents[2] / "apexrl"
    for f in pkg.rglob("*.py"):
        assert "shared/peers" not in f.read_text("utf-8"), f


@pytest.mark.peer
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_world_verify_with_only_the_fetched_checkout(runner, checkout, cache, tmp_path,
                                                     published_world):  # fmt: skip
    """Done-when: where only `apexrl peer fetch` provided archipelago, `world verify` runs.
    The remote is a git repository of the checkout's files (the same content: the runtimes
    built for it are reused)."""
    remote = tmp_path / "remote"
    shutil.copytree(checkout, remote, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))  # fmt: skip
    git("init", "-q", "-b", "main", ".", cwd=remote)
    git("add", "-A", "-f", cwd=remote)
    git("commit", "-q", "-m", "archipelago", cwd=remote)
    sha = git("rev-parse", "HEAD", cwd=remote)
    r = runner.invoke(app, ["peer", "fetch", "--from", str(remote), "--commit", sha])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["world", "verify", str(published_world), "--servers", "filesystem",
                            "--json"])  # fmt: skip
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert lines and r.exit_code in (0, 1), r.output  # 1: a case differs, not a failure to run
    summary = lines[-1]
    assert summary["cases"] == len(lines) - 1 > 3
    assert {x["server"] for x in lines[:-1]} == {"filesystem"}
