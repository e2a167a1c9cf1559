"""ApexAgent against the local CPU engine on a tiny random-weight Qwen3 checkpoint."""

from __future__ import annotations

import json

from harbor.models.trajectories import Trajectory

from apexrl.tito.trajectory import TitoTrajectory
from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv


def test_random_model_ends_classified_with_a_well_formed_trajectory(tmp_path, world_zip):
    from apexrl.engine.cpu import EngineServer, LocalEngine
    from apexrl.engine.tiny import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint(tmp_path / "tiny", seed=0, max_position_embeddings=32768)
    env = HostEnv(tmp_path / "trial", world_zip)
    logs = tmp_path / "trial" / "agent"
    with EngineServer(LocalEngine(ckpt, served_model_name="tiny")) as server:
        agent, ctx = run_agent(
            env,
            logs,
            "Summarise the files.",
            endpoint=server.url,
            budgets={"max_steps": 3},
            sampling={"max_tokens": 12, "seed": 0},
        )
    rec = agent.record
    assert rec.context_window == 32768 and rec.model == "tiny"
    # random weights: a final answer, a cut turn or a bad tool call; never an unclassified end
    assert rec.status in ("complete", "length", "max_steps", "error")
    if rec.status == "error":
        assert rec.error_class == "unparsed_tool_call"
    traj = TitoTrajectory.model_validate_json((logs / "tito.json").read_text())
    st = traj.to_state()
    assert len(st.ids) == len(st.mask) == len(st.logprobs)
    assert sum(st.mask) == rec.tokens_out > 0
    assert all(lp <= 0.0 for lp, m in zip(st.logprobs, st.mask, strict=True) if m)
    Trajectory.model_validate(json.loads((logs / "trajectory.json").read_text()))
    assert ctx.n_output_tokens == rec.tokens_out
