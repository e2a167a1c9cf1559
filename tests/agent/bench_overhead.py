"""Agent-side cost per step, engine answering instantly (scripted) and a real in-thread
world gateway: TITO observation tokenization vs re-rendering + re-encoding the whole
conversation each step (what a text round-trip agent pays), and tool-call latency.

    .venv/bin/python -m tests.agent.bench_overhead [STEPS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from apexrl.tito.tokenizer import load_tokenizer
from apexrl.tito.trajectory import TitoTrajectory
from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv
from tests.scripted_engine import ScriptedEngine, tool_call_text


def main(steps: int = 40) -> None:
    from apexrl.tasks.example import write_example

    tmp = Path(tempfile.mkdtemp(prefix="apexrl-bench-"))
    write_example(tmp / "ex")
    world = sorted((tmp / "ex" / "world_files_zipped").glob("*.zip"))[0]
    script = [tool_call_text("filesystem_get_directory_tree", {}) for _ in range(steps)] + ["Done."]
    env = HostEnv(tmp / "trial", world)
    with ScriptedEngine(script, max_model_len=1_000_000) as eng:
        t0 = time.monotonic()
        agent, _ = run_agent(env, tmp / "trial" / "agent", "Explore.", endpoint=eng.url)
        wall = time.monotonic() - t0
    rec = agent.record
    assert rec.status == "complete", rec
    tok_s = [s.tokenize_s for s in rec.step_records[:-1]]
    tool_s = [c.duration_s for c in rec.tool_call_records]
    llm_s = [s.llm_s for s in rec.step_records]
    # peer: render the whole conversation with the template and encode it, every step
    tok = load_tokenizer("qwen3")
    traj = TitoTrajectory.model_validate_json((tmp / "trial" / "agent" / "tito.json").read_text())
    full = []
    msgs = traj.messages
    for k in range(traj.n_prompt_messages, len(msgs), 2):
        t = time.perf_counter()
        tok.encode(
            tok.apply_chat_template(msgs[: k + 2], tools=traj.tools, add_generation_prompt=True)
        )
        full.append(time.perf_counter() - t)
    med_tito, med_full = statistics.median(tok_s), statistics.median(full)
    print(f"steps={rec.steps} stream_tokens={rec.stream_tokens} wall_s={wall:.2f}")
    print(f"gateway_ready_s={rec.gateway_ready_s:.3f}")
    print(f"median per-step observation tokenize (TITO fixed base) = {med_tito * 1e3:.2f} ms")
    print(f"median per-step full re-render+encode (text peer)     = {med_full * 1e3:.2f} ms")
    print(
        f"ratio peer/TITO = {med_full / med_tito:.1f}x; last step: TITO {tok_s[-1] * 1e3:.2f} ms "
        f"vs full {full[-1] * 1e3:.2f} ms"
    )
    print(f"median tool call (MCP over HTTP) = {statistics.median(tool_s) * 1e3:.2f} ms")
    print(f"median engine round trip (scripted, instant) = {statistics.median(llm_s) * 1e3:.2f} ms")
    print(f"agent loop per step (run() / steps) = {rec.duration_s / rec.steps * 1e3:.1f} ms")
    print(f"whole agent run incl. env start/stop and writing = {wall:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
