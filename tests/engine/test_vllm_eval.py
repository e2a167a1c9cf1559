"""`apexrl eval run TINY --engine vllm`: apexrl starts vLLM's CPU build itself (from
APEXRL_VLLM_PYTHON), runs an agent trial on an example task against it, records the
sampled token ids and logprobs, and stops vLLM when the eval ends."""

from __future__ import annotations

import math
import os
import re
import socket
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from apexrl.eval.models import EvalRunConfig
from apexrl.tito.trajectory import TitoTrajectory
from tests.engine.vllm_tier import tiny_checkpoint, vllm_python

runner = CliRunner()


def _example(root: Path) -> tuple[Path, Path]:
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example

    write_example(root / "expert", seed=0)
    list(convert_all(load_source(root / "expert"), root / "tasks", {}, strict=True))
    return root / "expert", root / "tasks"


def _processes_with(text: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


@pytest.mark.vllm
@pytest.mark.integration
@pytest.mark.timeout(1500)
def test_eval_run_starts_vllm_cpu_runs_a_trial_and_stops_it(tmp_path, monkeypatch):
    monkeypatch.setenv("APEXRL_VLLM_PYTHON", vllm_python())
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    expert, tasks = _example(tmp_path)
    ckpt = tiny_checkpoint(tmp_path)  # make-tiny's defaults: a 32k window
    run_dir = tmp_path / "run"
    res = runner.invoke(
        app,
        ["eval", "run", str(ckpt), "--engine", "vllm", "--tasks", str(tasks), "-o", str(run_dir)]
        + ["--worlds", str(expert / "world_files_zipped"), "--limit", "1"]
        + ["--max-steps", "3", "--max-tokens", "16", "--seed", "7", "--json", "--no-judge"],
    )
    log = run_dir / "engine.log"
    assert res.exit_code == 0, res.output + (log.read_text()[-3000:] if log.is_file() else "")
    cfg = EvalRunConfig.model_validate_json((run_dir / "run.json").read_bytes())
    assert cfg.engine.kind == "vllm" and cfg.engine.version == "vllm 0.32.0 (cpu)"
    (row,) = pq.read_table(run_dir / "results.parquet").to_pylist()
    keys = ("status", "error_class", "turns", "tokens_in", "tokens_out", "duration_s")
    print("vLLM CPU trial:", {k: row.get(k) for k in keys})
    assert row["turns"] >= 1 and row["tokens_out"] > 0, row
    assert row["tokens_in"] > 6000  # the example task's first prompt fits the window
    assert row["error_class"] != "context_window_full", row
    # the sampled ids and their logprobs are recorded, aligned
    tdir = run_dir / "trajectories" / row["trial_id"]
    traj = TitoTrajectory.model_validate_json((tdir / "tokens.jsonl").read_bytes())
    sampled = [t for t in traj.turns if t.kind == "sampled"]
    assert sampled and all(t.token_ids for t in sampled)
    lps = [x for t in sampled for x in t.logprobs]
    assert lps and all(math.isfinite(x) and x <= 0 for x in lps)
    assert orjson.loads((tdir / "trajectory.json").read_bytes()).get("steps")
    # vLLM itself answered (its log), and it is gone: port closed, no process left
    text = log.read_text(errors="replace")
    assert "vllm.entrypoints.openai.api_server" in text or "version 0.32.0" in text
    port = int(re.search(r"'port': (\d+)", text).group(1))
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert _processes_with(str(ckpt)) == []
    assert os.environ["APEXRL_VLLM_PYTHON"]
