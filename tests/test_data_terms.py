"""Terms that travel with data (issue 44): `tasks convert` / `tasks pack` record the source's
licence and terms; `apexrl train` refuses evaluation-only data (exit 2, naming the terms)
unless the user states their right to train on it, which the run manifest records."""

from __future__ import annotations

import json
import shutil
import tomllib

from apexrl.cli.app import app
from tests.published_shape import build

# A dataset card in the shape of the published APEX-Agents card (our own words): a
# licence in the YAML front matter, a title, and an evaluation-only restriction.
APEX_CARD = """---
license: cc-by-4.0
pretty_name: APEX-Agents
---

# APEX-Agents

Tasks, rubrics and worlds for measuring agents at professional work.
"""
OTHER_CARD = """---
license: other
---

# Acme expert tasks

Use of this data is restricted. The data may only be used for model evaluation. Contact us.
"""


def _meta(task_dir) -> dict:
    return tomllib.loads((task_dir / "task.toml").read_text())["metadata"]


def _apex_shaped(runner, tmp_path):
    src = tmp_path / "source"
    build(src, bad=False)
    (src / "README.md").write_text(APEX_CARD)
    tasks = tmp_path / "tasks"
    r = runner.invoke(app, ["tasks", "convert", str(src), "-o", str(tasks)])
    assert r.exit_code == 0, r.stderr
    return tasks, r


def test_convert_and_pack_record_apex_agents_as_evaluation_only(runner, tmp_path):
    tasks, r = _apex_shaped(runner, tmp_path)
    assert "terms: EVALUATION ONLY; licence cc-by-4.0" in r.stderr
    dirs = sorted(p for p in tasks.iterdir() if p.is_dir())
    assert dirs
    for d in dirs:
        terms = _meta(d)["data_terms"]
        assert terms["evaluation_only"] is True and terms["license"] == "cc-by-4.0"
        assert "APEX-Agents" in terms["terms"] and "evaluation only" in terms["terms"]
    ds = tmp_path / "ds"
    r = runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)])
    assert r.exit_code == 0, r.stderr
    manifest = json.loads((ds / "_dataset.json").read_text())
    assert manifest["data_terms"]["evaluation_only"] is True
    assert manifest["data_terms"]["license"] == "cc-by-4.0"
    # a split keeps the terms on both sides
    r = runner.invoke(app, ["tasks", "split", str(ds), "-o", str(tmp_path / "sp")])
    assert r.exit_code == 0, r.stderr
    for side in ("train", "eval"):
        got = json.loads((tmp_path / "sp" / side / "_dataset.json").read_text())
        assert got["data_terms"]["evaluation_only"] is True


def test_terms_from_a_card_and_from_flags(runner, mini_apex, tmp_path):
    (mini_apex / "README.md").write_text(OTHER_CARD)
    out = tmp_path / "t1"
    r = runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    terms = _meta(next(p for p in out.iterdir() if p.is_dir()))["data_terms"]
    assert terms == {
        "license": "other",
        "terms": "The data may only be used for model evaluation.",
        "evaluation_only": True,
        "origin": "dataset card README.md",
    }
    (mini_apex / "README.md").unlink()
    out = tmp_path / "t2"
    r = runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(out)])
    assert r.exit_code == 0 and "terms:" not in r.stderr
    assert "data_terms" not in _meta(next(p for p in out.iterdir() if p.is_dir()))
    out = tmp_path / "t3"
    r = runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(out),
                            "--license", "apache-2.0", "--terms", "Ours, any use."])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    terms = _meta(next(p for p in out.iterdir() if p.is_dir()))["data_terms"]
    assert terms["license"] == "apache-2.0" and terms["evaluation_only"] is False
    ds = tmp_path / "ds"
    r = runner.invoke(app, ["tasks", "pack", str(out), "-o", str(ds), "--evaluation-only"])
    assert r.exit_code == 0, r.stderr
    got = json.loads((ds / "_dataset.json").read_text())["data_terms"]
    assert got["evaluation_only"] is True and got["license"] == "apache-2.0"


def test_train_refuses_evaluation_only_data_naming_the_terms(runner, tmp_path):
    tasks, _ = _apex_shaped(runner, tmp_path)
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0
    for data in (tasks, ds):
        r = runner.invoke(app, ["train", "smoke-1gpu", "--data", str(data), "--dry-run"])
        assert r.exit_code == 2, r.output
        assert "marked evaluation-only" in r.stderr and "APEX-Agents" in r.stderr
        assert "--training-rights" in r.stderr
    # an eval-mode run on the same data is what its terms allow
    r = runner.invoke(app, ["train", "eval", "--val-data", str(ds), "--dry-run",
                            "--set", "agent.judge=none"])  # fmt: skip
    assert r.exit_code == 0, r.output
    # a remote source recognised by its name
    r = runner.invoke(app, ["train", "smoke-1gpu", "--data", "hf://mercor/apex-agents",
                            "--dry-run"])  # fmt: skip
    assert r.exit_code == 2 and "APEX-Agents" in r.stderr


def test_with_the_statement_train_runs_and_the_manifest_records_it(runner, tmp_path, monkeypatch):
    from apexrl.train import launch

    tasks, _ = _apex_shaped(runner, tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    real = launch.LocalRay
    monkeypatch.setattr(launch, "LocalRay", lambda: real(num_cpus=1, timeout_s=120))
    statement = "Acme holds a written licence from the publisher to train on this data."
    run = tmp_path / "run"
    r = runner.invoke(
        app,
        ["train", "smoke-1gpu", "--data", str(tasks), "--check-only", "--no-ship-code",
         "--json", "--training-rights", statement,
         "--set", f'checkpoint.path="{run}/ckpts"', "--set", 'run_name="terms"',
         "--set", "agent.judge=none"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    manifest = json.loads((run / "apexrl_manifest.json").read_text())
    assert manifest["training_rights"] == statement
    (terms,) = manifest["data_terms"]
    assert terms["dataset"] == str(tasks) and terms["evaluation_only"] is True


def test_published_harbor_tasks_named_apex_agents_are_refused(runner, tmp_path):
    """APEX-Agents v1.1 ships as Harbor tasks (no apexrl metadata): recognised by the
    dataset folder's name (as downloaded) or its card."""
    root = tmp_path / "apex-agents-v1.1"
    for name in ("task-a", "task-b"):
        (root / name).mkdir(parents=True)
        (root / name / "task.toml").write_text("")
        (root / name / "instruction.md").write_text(f"Do {name}.")
    r = runner.invoke(app, ["train", "smoke-1gpu", "--data", str(root), "--dry-run"])
    assert r.exit_code == 2 and "marked evaluation-only" in r.stderr, r.output
    plain = tmp_path / "tasks"
    root.rename(plain)
    r = runner.invoke(app, ["train", "smoke-1gpu", "--data", str(plain), "--dry-run",
                            "--set", "agent.judge=none"])  # fmt: skip
    assert "marked evaluation-only" not in r.stderr
    (plain / "README.md").write_text(APEX_CARD)
    r = runner.invoke(app, ["train", "smoke-1gpu", "--data", str(plain), "--dry-run"])
    assert r.exit_code == 2 and "APEX-Agents" in r.stderr


def test_the_job_gets_a_manifest_with_the_statement(runner, tmp_path, monkeypatch):
    """The manifest `train` hands its job (launch.job_dir, what the job writes beside the
    checkpoints), captured before Ray starts: the test above runs the job itself."""
    from apexrl.train import launch

    tasks, _ = _apex_shaped(runner, tmp_path)
    real, seen = launch.job_dir, []

    class Stop(Exception):
        pass

    def capture(spec, manifest):
        d = real(spec, manifest)  # a temp folder the job would have removed: removed here
        seen.append(json.loads((d / launch.MANIFEST_NAME).read_text()))
        shutil.rmtree(d)
        raise Stop

    monkeypatch.setattr(launch, "job_dir", capture)
    statement = "We licensed this data for training from its publisher."
    r = runner.invoke(
        app,
        ["train", "smoke-1gpu", "--data", str(tasks), "--check-only", "--no-ship-code",
         "--training-rights", statement, "--set", "agent.judge=none",
         "--set", f'checkpoint.path="{tmp_path}/ckpts"'],
    )  # fmt: skip
    assert r.exit_code != 0  # stopped (Stop) before any Ray
    (manifest,) = seen
    assert manifest["training_rights"] == statement
    assert manifest["data_terms"][0]["evaluation_only"] is True
    assert "APEX-Agents" in manifest["data_terms"][0]["terms"]


def test_publish_dataset_card_carries_the_terms(runner, tmp_path):
    tasks, _ = _apex_shaped(runner, tmp_path)
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0
    stage = tmp_path / "stage"
    r = runner.invoke(app, ["publish", "dataset", str(ds), "--repo", "a/d", "--dry-run",
                            "--stage", str(stage)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    card = (stage / "README.md").read_text()
    assert "license: cc-by-4.0" in card and "evaluation-only" in card
    assert "**Evaluation only.** APEX-Agents" in card
    assert json.loads((stage / "_dataset.json").read_text())["data_terms"]["evaluation_only"]
