"""One configuration layer: the registry covers every APEXRL_* variable the code reads,
docs/configuration.md is generated from it, `.env` and `apexrl.toml` fill the
environment (never over it), and `apexrl config` shows each value and its source with
secrets masked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import orjson

from apexrl import config

REPO = Path(__file__).resolve().parents[1]
# a shell heredoc delimiter, and the prefix of APEXRL_ARCHIVE_MAX_* in prose
NOT_SETTINGS = {"APEXRL_GOLD_EOF", "APEXRL_ARCHIVE_MAX"}


def test_every_apexrl_variable_in_the_code_is_in_the_registry():
    found = set()
    for path in (REPO / "apexrl").rglob("*.py"):
        found |= set(re.findall(r"APEXRL_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    missing = sorted(found - NOT_SETTINGS - set(config.BY_NAME))
    assert not missing, f"add to apexrl/config.py SETTINGS: {missing}"
    assert len({s.name for s in config.all_settings()}) == len(config.all_settings())


def test_configuration_doc_is_current():
    doc = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert doc == config.render_markdown(), "docs/configuration.md is stale: make config-docs"


def apexrl(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("APEXRL_")}
    for k in ("OPENAI_API_KEY", "HF_TOKEN"):
        base.pop(k, None)
    base["PYTHONPATH"] = str(REPO)
    return subprocess.run(
        [sys.executable, "-m", "apexrl", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def by_name(stdout: str) -> dict[str, dict]:
    return {r["name"]: r for r in map(orjson.loads, stdout.splitlines())}


def test_env_file_and_project_file_fill_the_environment_with_their_sources(tmp_path):
    project = tmp_path / "proj"
    work = project / "sub"
    work.mkdir(parents=True)
    secret = "sk-test-" + "x" * 40
    (project / ".env").write_text(f"OPENAI_API_KEY={secret}\nAPEXRL_LOCAL_SCRATCH=ram\n")
    (project / "apexrl.toml").write_text(
        '[defaults]\njudge = "openai/j"\nworlds = "w"\n[env]\nAPEXRL_LOCAL_SCRATCH = "disk"\n'
        "APEXRL_TASK_MEMO = 0\n"
    )
    res = apexrl(work, "config", "--json", env={"APEXRL_WORLDS": "from-env"})
    assert res.returncode == 0, res.stderr
    rows = by_name(res.stdout)
    assert rows["APEXRL_JUDGE"]["value"] == "openai/j"
    assert rows["APEXRL_JUDGE"]["source"] == f"apexrl.toml ({project / 'apexrl.toml'})"
    assert rows["APEXRL_WORLDS"] == {
        **rows["APEXRL_WORLDS"],
        "value": "from-env",
        "source": "environment",
    }
    assert rows["APEXRL_LOCAL_SCRATCH"]["value"] == "ram"  # .env above apexrl.toml
    assert rows["APEXRL_LOCAL_SCRATCH"]["source"] == f".env ({project / '.env'})"
    assert rows["APEXRL_TASK_MEMO"]["value"] == "0"
    key = rows["OPENAI_API_KEY"]
    assert key["source"].startswith(".env") and key["value"] == "set (48 characters, hidden)"
    assert secret not in res.stdout and secret not in res.stderr
    assert rows["APEXRL_PROGRESS_EVERY"]["source"] == "default"
    assert "APEXRL_WORLD_FS" not in rows  # set inside sandboxes: only with --all
    assert "APEXRL_WORLD_FS" in by_name(apexrl(work, "config", "--json", "--all").stdout)


def test_a_bad_project_file_is_named_with_the_nearest_key(tmp_path):
    (tmp_path / "apexrl.toml").write_text('[defaults]\njugde = "openai/j"\n')
    res = apexrl(tmp_path, "config", "--json")
    assert res.returncode == 1 and "defaults.jugde" in res.stderr
    assert "did you mean `judge`?" in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "apexrl.toml").write_text('[env]\nAPEXRL_ENGINE_API_KEY = "k"\n')
    res = apexrl(tmp_path, "config", "--json")
    assert res.returncode == 1 and "a secret does not belong in apexrl.toml" in res.stderr


def test_eval_run_takes_its_defaults_from_the_project_file(tmp_path):
    """judge, judge_api_base, worlds and output_root from apexrl.toml reach `eval run`."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    write_example(tmp_path / "expert", seed=0)
    list(convert_all(load_source(tmp_path / "expert"), tmp_path / "tasks", {}, strict=True))
    (tmp_path / "apexrl.toml").write_text(
        '[defaults]\njudge = "openai/x"\njudge_api_base = "http://127.0.0.1:9/v1"\n'
        f'worlds = "{tmp_path / "expert" / "world_files_zipped"}"\noutput_root = "runs"\n'
    )
    args = ["eval", "run", "--agent", "oracle", "--tasks", "tasks", "-o", "r", "--limit", "1"]
    res = apexrl(tmp_path, *args)
    assert res.returncode == 4, res.stderr  # the configured judge was probed: it is down
    assert "the judge openai/x at http://127.0.0.1:9/v1 does not answer" in res.stderr
    # --no-judge overrides the configured judge; worlds from the file; under output_root
    res = apexrl(tmp_path, *args, "--no-judge", "--json")
    assert res.returncode == 0, res.stderr
    summary = orjson.loads((tmp_path / "runs" / "r" / "summary.json").read_bytes())
    assert summary["complete"] and summary["pass_at_1"]["value"] == 1.0
    # the commands that read or write a run folder find it where `eval run -o` put it
    res = apexrl(tmp_path, "eval", "report", "r", "-f", "json")
    assert res.returncode == 0, res.stderr
    assert orjson.loads(res.stdout)["summary"]["pass_at_1"]["value"] == 1.0
    res = apexrl(tmp_path, "eval", "view", "r")
    assert res.returncode == 0 and (tmp_path / "runs" / "r" / "viewer.html").is_file(), res.stderr
    res = apexrl(tmp_path, "eval", "regrade", "r", "-o", "r2")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "runs" / "r2" / "regrade.json").is_file() and not (tmp_path / "r2").exists()
    stage = tmp_path / "stage"
    res = apexrl(
        tmp_path, "publish", "traces", "r", "--repo", "a/t", "--dry-run", "--stage", str(stage)
    )
    assert res.returncode == 0, res.stderr
    assert list(stage.glob("data/*.parquet"))
