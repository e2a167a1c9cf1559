"""Fixtures for publish tests: tiny checkpoints, an eval run dir with planted secrets,
a packed task dataset, and a running Hub stand-in with the client pointed at it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from tests.hub_standin import HubStandIn

WRITE_TOKEN = "hf_standinwritetoken0123456789abcdefXYZ"
READ_TOKEN = "hf_standinreadtoken0123456789abcdefXYZW"

# Planted secrets: one per credential pattern, and env values of the secrets list.
PLANTED = {
    "aws_key": "AKIAIOSFODNN7EXAMPLE",
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "hf": "hf_abcdefghijklmnopqrstuvwxyz0123456789",
    "openai": "sk-proj-Zq8u2VnR4tY7wP0aLk3mB9cX6dF1gH5j",
    "github": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "bearer": "Bearer eyJhbGciOiJIUzI1NiJ9abcdefghijklmnop",
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx1y2\nabc\n-----END RSA PRIVATE KEY-----"
    ),
    "env_judge": "judge-secret-value-9f8e7d6c",  # OPENAI-free shape: only the env list catches it
    "env_fmp": "fmp-world-key-55aa66bb",
}
SECRET_MARKERS = [
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "hf_abcdefghijklmnopqrstuvwxyz0123456789",
    "Zq8u2VnR4tY7wP0aLk3mB9cX6dF1gH5j",
    "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "eyJhbGciOiJIUzI1NiJ9abcdefghijklmnop",
    "MIIEowIBAAKCAQEAx1y2",
    "judge-secret-value-9f8e7d6c",
    "fmp-world-key-55aa66bb",
    WRITE_TOKEN,
]


@pytest.fixture
def hub_env(monkeypatch, tmp_path):
    """A running stand-in; HF_* env points at it; secrets of the env list set."""
    with HubStandIn(tokens={WRITE_TOKEN: "write", READ_TOKEN: "read"}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf_cache"))
        monkeypatch.setenv("HF_TOKEN", WRITE_TOKEN)
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", PLANTED["env_judge"])
        monkeypatch.setenv("FMP_API_KEY", PLANTED["env_fmp"])
        import apexrl.publish.hub as h

        monkeypatch.setattr(h, "BACKOFF_S", 0.01)
        yield hub


# --- checkpoints ---------------------------------------------------------------------------

CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 64,
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "max_position_embeddings": 128,
    "torch_dtype": "float32",
    "tie_word_embeddings": True,
}
TENSORS = {
    "model.embed_tokens.weight": (64, 8),
    "model.norm.weight": (8,),
    "model.layers.0.self_attn.q_proj.weight": (8, 8),
    "model.layers.0.mlp.up_proj.weight": (16, 8),
}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(arr.shape),
            "data_offsets": [off, off + len(b)],
        }
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def make_checkpoint(root: Path, *, shards: int = 2, seed: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names = list(TENSORS)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: rng.standard_normal(TENSORS[n]).astype(np.float32) for n in names[s::shards]}
        write_safetensors(root / fname, part)
        weight_map.update(dict.fromkeys(part, fname))
    total = sum(int(np.prod(s)) * 4 for s in TENSORS.values())
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
    )
    (root / "config.json").write_text(json.dumps(CONFIG, indent=2))
    (root / "generation_config.json").write_text(json.dumps({"temperature": 0.6, "top_p": 0.95}))
    (root / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
    (root / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": "<|im_end|>", "note": f"hub token {PLANTED['hf']}"})
    )
    (root / "chat_template.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    (root / "recipe.toml").write_text(
        f"[trainer]\nlr = 1e-6\n# judge key leaked here: {PLANTED['env_judge']}\n"
    )
    (root / "optimizer.pt").write_bytes(b"\0" * 100)  # trainer state: never published
    return root


@pytest.fixture
def ckpt(tmp_path) -> Path:
    return make_checkpoint(tmp_path / "ckpt")


# --- eval run dir ---------------------------------------------------------------------------


def make_run_dir(root: Path) -> Path:
    """RUN_DIR as `apexrl eval run` writes it, with secrets planted in trajectories,
    tool outputs and logs."""
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (task, domain) in enumerate([("task_a", "law"), ("task_b", "investment-banking")]):
        for attempt in range(2):
            tid = f"{task}.a{attempt}"
            passed = (i + attempt) % 2 == 0
            rows.append(
                {
                    "schema_version": "1",
                    "trial_id": tid,
                    "task_id": task,
                    "domain": domain,
                    "world_id": "world_a",
                    "attempt": attempt,
                    "status": "complete",
                    "error_class": None,
                    "reward": 1.0 if passed else 0.5,
                    "criteria_met": 2 if passed else 1,
                    "criteria_total": 2,
                    "turns": 2,
                    "tokens_in": 100,
                    "tokens_out": 20,
                    "tool_calls": 1,
                    "tool_call_success_rate": 1.0,
                    "started_at": "2026-01-01T00:00:00Z",
                    "duration_s": 1.5,
                }
            )
            tdir = root / "trajectories" / tid
            tdir.mkdir(parents=True)
            messages = [
                {"role": "system", "content": "You are an analyst."},
                {"role": "user", "content": f"Solve {task}. My AWS key is {PLANTED['aws_key']}"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "files_read",
                                "arguments": '{"path": "creds.txt"}',
                            },
                        }
                    ],
                },
                {
                    "role": "tool",
                    "tool_call_id": "c1",
                    "content": (
                        f"aws_secret_access_key = {PLANTED['aws_secret']}\n"
                        f"github: {PLANTED['github']}\n{PLANTED['pem']}\n"
                        f"Authorization: {PLANTED['bearer']}"
                    ),
                },
                {"role": "assistant", "content": f"Done. (key {PLANTED['openai']})"},
            ]
            atif = {
                "schema_version": "ATIF-v1.4",
                "session_id": tid,
                "agent": {"name": "apexrl", "version": "0"},
                "steps": [{"step_id": 1, "source": "user", "message": messages[1]["content"]}],
                "extra": {"tito": {"messages": messages, "n_prompt_messages": 2}},
            }
            (tdir / "trajectory.json").write_text(json.dumps(atif))
            # the agent's TITO trajectory (pretty JSON), copied as tokens.jsonl
            tito = {
                "trajectory_id": tid,
                "messages": messages,
                "prompt_ids": [1, 2, 3],
                "turns": [
                    {"kind": "sampled", "token_ids": [4, 5], "logprobs": [-0.1, -0.2]},
                    {"kind": "observation", "token_ids": [6]},
                ],
            }
            (tdir / "tokens.jsonl").write_text(json.dumps(tito, indent=2))
            logs = root / "logs" / tid
            (logs / "verifier").mkdir(parents=True)
            (logs / "agent").mkdir()
            (logs / "verifier" / "grading.json").write_text(
                json.dumps(
                    {
                        "reward": 1.0 if passed else 0.0,
                        "verdicts": [
                            {
                                "verifier_id": "v1",
                                "criteria": "States 42",
                                "met": True,
                                "source": "deterministic",
                            },
                            {
                                "verifier_id": "v2",
                                "criteria": "Explains",
                                "met": passed,
                                "source": "judge",
                                "rationale": f"judge called with {PLANTED['env_judge']}",
                            },
                        ],
                    }
                )
            )
            (logs / "agent" / "agent.log").write_text(
                f"starting\nenv FMP_API_KEY={PLANTED['env_fmp']}\nhf token {PLANTED['hf']}\n"
            )
    pq.write_table(pa.Table.from_pylist(rows), root / "results.parquet")
    (root / "run.json").write_text(
        json.dumps(
            {
                "schema_version": "1",
                "apexrl_version": "0.1.0",
                "created_at": "2026-01-01T00:00:00Z",
                "model": {"name": "acme/tiny-agent", "path": None},
                "engine": {"kind": "local", "endpoint": f"http://user:{PLANTED['env_judge']}@h/v1"},
                "dataset": {"source": "acme/apex-tasks", "digest": "sha256:00", "n_tasks": 2},
                "attempts": 2,
                "sampling": {"temperature": 1.0, "top_p": 1.0},
            }
        )
    )

    def ci(v):
        return {"value": v, "ci_low": max(0.0, v - 0.1), "ci_high": min(1.0, v + 0.1)}

    group = {"n_tasks": 1, "n_trials": 2, "pass_at_1": ci(0.5), "mean_score": ci(0.75)}
    (root / "summary.json").write_text(
        json.dumps(
            {
                "schema_version": "1",
                "n_tasks": 2,
                "n_trials": 4,
                "attempts_max": 2,
                "attempts_min": 2,
                "pass_at_1": ci(0.5),
                "mean_score": ci(0.75),
                "per_domain": {"law": group, "investment-banking": group},
            }
        )
    )
    return root


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return make_run_dir(tmp_path / "run")


@pytest.fixture
def packed_dataset(runner, mini_apex, tmp_path) -> Path:
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    first = sorted(p for p in tasks.iterdir() if p.is_dir())[0]
    (first / "instruction.md").write_text(
        (first / "instruction.md").read_text() + f"\nUse this key: {PLANTED['github']}\n"
    )
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(tasks), "-o", str(ds)]).exit_code == 0
    return ds
