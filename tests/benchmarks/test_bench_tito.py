"""Benchmark: `tito verify --mode replay` throughput vs raw `tokenizers` encode.

200 synthetic multi-turn agent trajectories of ~20k tokens each (real Qwen3
tokenizer, qwen3-verbatim template) are written as JSONL, then replayed the way
the CLI does (load + validate records, render each with the chat template, encode,
compare with the token stream). The peer is raw `tokenizers` encode of the same
rendered text in the same run (encode_batch, like the replay). Measures only; writes
bench/results.json key "tito_replay". Target: replay >= 0.5x raw encode throughput.
"""

from __future__ import annotations

from apexrl.tito.template import resolve_template
from apexrl.tito.tokenizer import load_tokenizer
from apexrl.tito.verify import load_trajectories, render_trajectory, verify_replay
from tests.benchmarks.results import RUNS, interleaved, load_average, record, runs, stats
from tests.tito.synthetic import synthetic_trajectory

N_TRAJ = 200
TOKENS = 20_000


def test_bench_tito_replay(tmp_path):
    tok = load_tokenizer("qwen3")
    name, src = resolve_template("qwen3-verbatim", tok.chat_template)
    path = tmp_path / "trajectories.jsonl"
    trajs = [
        synthetic_trajectory(tok, src, seed=i, target_tokens=TOKENS, template_name=name)
        for i in range(N_TRAJ)
    ]
    with path.open("w") as fh:
        for t in trajs:
            fh.write(t.model_dump_json() + "\n")
    n_tokens = sum(len(t.ids) for t in trajs)
    texts = [render_trajectory(tok, src, t) for t in trajs]
    del trajs

    findings: list = []

    def replay() -> None:
        findings[:] = list(verify_replay(tok, src, load_trajectories(str(path))))

    def raw_encode() -> None:
        for k in range(0, len(texts), 32):
            tok.tk.encode_batch(texts[k : k + 32], add_special_tokens=False)

    def raw_encode_single() -> None:
        for t in texts:
            tok.tk.encode(t, add_special_tokens=False)

    load_at_start = load_average()
    rounds = interleaved(RUNS, {"raw": raw_encode, "replay": replay})
    single = runs(1, raw_encode_single)  # slow; one run
    raw_s, replay_s = stats(rounds["raw"])["median_s"], stats(rounds["replay"])["median_s"]
    raw_single_s = single[0]
    assert len(findings) == N_TRAJ and all(f.ok for f in findings)

    record(
        "tito_replay",
        {
            "command": "pytest tests/benchmarks/test_bench_tito.py",
            "trajectories": N_TRAJ,
            "tokens": n_tokens,
            "mean_tokens_per_trajectory": round(n_tokens / N_TRAJ),
            "runs": RUNS,
            "replay": stats(rounds["replay"]),
            "raw_encode": stats(rounds["raw"]),
            "replay_s": round(replay_s, 3),
            "raw_encode_s": round(raw_s, 3),
            "raw_encode_single_thread_s": round(raw_single_s, 3),
            "replay_tokens_per_s": round(n_tokens / replay_s),
            "raw_encode_tokens_per_s": round(n_tokens / raw_s),
            "replay_over_raw_encode": round(raw_s / replay_s, 3),
            "replay_over_raw_encode_single_thread": round(raw_single_s / replay_s, 3),
            "peers": {
                "raw_encode": "tokenizers encode_batch (batches of 32) of the same rendered text",
                "raw_encode_single_thread": "tokenizers encode, one text at a time",
            },
            "targets": {"replay_over_raw_encode": 0.5},
        },
        load_at_start=load_at_start,
    )
