"""`tasks unpack hf://org/name`: huggingface_hub's real client against a local Hub stand-in."""

from __future__ import annotations

import json
import shutil

from apexrl.cli.app import app
from tests.hub_standin import HubStandIn


def test_unpack_from_hub(runner, mini_apex, tmp_path, monkeypatch):
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0
    with HubStandIn() as hub:
        hub.repos["acme/apex-tasks"] = ds
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        out = tmp_path / "out"
        result = runner.invoke(
            app, ["tasks", "unpack", "hf://acme/apex-tasks", "-o", str(out), "--json"]
        )
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert len(rows) == 4 and {r["status"] for r in rows} == {"written"}
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
            p.name for p in tasks.iterdir() if p.is_dir()
        )
        assert any(r.startswith("GET /datasets/acme/apex-tasks/resolve/") for r in hub.requests)

        missing = runner.invoke(
            app, ["tasks", "unpack", "hf://acme/nope", "-o", str(tmp_path / "o2")]
        )
        assert missing.exit_code == 4, missing.stderr
        assert "not found" in missing.stderr
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)


def test_bad_hf_address_is_usage_error(runner, tmp_path):
    result = runner.invoke(app, ["tasks", "unpack", "hf://not-a-repo", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "hf://org/name" in result.stderr
