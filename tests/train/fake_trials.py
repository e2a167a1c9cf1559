"""A stand-in for apexrl.trial.run.run_trial: crafted outcomes and token records.

The task dir's `scenario.json` says what happens: {"status": ..., "reward": ...,
"tokens": true|false, "trailing_observation": bool, "crash": bool, "sleep": s}.
Each call writes its process id to <logs_dir>/pid (the generator runs every trial
in its own process).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from apexrl.artifacts.models import TrialResult
from apexrl.tito.trajectory import TitoTrajectory, TitoTurn
from apexrl.trial.config import TrialConfig, TrialOutcome

PROMPT = [101, 102, 103]
S1, L1 = [11, 12], [-0.1, -0.2]
OBS = [21, 22, 23]
S2, L2 = [13], [-0.3]


def run_trial(task_dir: Path, config: TrialConfig) -> TrialOutcome:
    sc = json.loads((Path(task_dir) / "scenario.json").read_text())
    logs = Path(config.logs_dir)
    (logs / "agent").mkdir(parents=True, exist_ok=True)
    (logs / "pid").write_text(str(os.getpid()))
    (logs / "config.json").write_text(config.model_dump_json())
    if sc.get("sleep"):
        time.sleep(sc["sleep"])
    if sc.get("crash"):
        marker = logs / "crashed-once"
        if sc["crash"] == "always" or not marker.exists():
            marker.write_text("1")
            raise RuntimeError("runner blew up")
    tokens_path = None
    if sc.get("tokens", True):
        turns = [
            TitoTurn(kind="sampled", token_ids=S1, logprobs=L1),
            TitoTurn(kind="observation", token_ids=OBS),
            TitoTurn(kind="sampled", token_ids=S2, logprobs=L2),
        ]
        if sc.get("trailing_observation"):
            turns.append(TitoTurn(kind="observation", token_ids=[31, 32]))
        traj = TitoTrajectory(
            trajectory_id=logs.name,
            messages=[{"role": "user", "content": "q"}],
            prompt_ids=PROMPT,
            turns=turns,
        )
        tokens_path = logs / "agent" / "tito.json"
        tokens_path.write_text(traj.model_dump_json())
    return TrialOutcome(
        result=TrialResult(
            task_id=Path(task_dir).name,
            status=sc.get("status", "complete"),
            error_class=sc.get("error_class"),
            reward=float(sc.get("reward", 0.0)),
            turns=2,
            tool_calls=1,
            tool_call_success_rate=1.0,
            duration_s=0.01,
        ),
        tokens_path=tokens_path,
    )
