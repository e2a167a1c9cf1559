"""`apexrl train export`: a LoRA checkpoint merged into its base as a plain HF folder.

The adapter here is a PEFT adapter written by hand in the layout SkyRL's JAX backend saves
(tests/train/test_sft_jax.py exports a real one); the run folder around it is the JAX
runs' layout (apexrl.train.jaxrl.checkpoints). The merged folder passes apexrl's
publishing checks and gives, through the local engine, the logprobs the engine gives for
the base with the adapter applied; vLLM's CPU build serves it (marker vllm)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app

LAYERS = {  # module -> (out, in) of the tiny Qwen3 (hidden 64, 4 heads x 32, 2 kv heads)
    "model.layers.0.self_attn.q_proj": (128, 64),
    "model.layers.1.mlp.down_proj": (64, 128),
}


def write_adapter(folder: Path, rank: int = 4, alpha: float = 8.0, scale: float = 0.3) -> None:
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(7)
    t = {}
    for mod, (out, inp) in LAYERS.items():
        t[f"base_model.model.{mod}.lora_A.weight"] = scale * torch.randn(rank, inp, generator=g)
        t[f"base_model.model.{mod}.lora_B.weight"] = scale * torch.randn(out, rank, generator=g)
    folder.mkdir(parents=True)
    save_file(t, str(folder / "adapter_model.safetensors"))
    cfg = {"r": rank, "lora_alpha": alpha, "peft_type": "LORA"}
    (folder / "adapter_config.json").write_text(json.dumps(cfg))


def jax_run(tmp: Path, base: Path, step: int = 3) -> Path:
    """A run folder in the JAX runs' layout whose latest checkpoint holds the adapter."""
    run = tmp / "run"
    ck = run / "ckpts" / f"global_step_{step}"
    write_adapter(tmp / "adapter")
    ck.mkdir(parents=True)
    with tarfile.open(ck / "adapter.tar.gz", "w:gz") as tar:
        tar.add(tmp / "adapter", arcname="")
    (ck / "state.json").write_text(json.dumps({"global_step": step, "weight_version": step}))
    (run / "ckpts" / "latest_ckpt_global_step.txt").write_text(str(step))
    (run / "ckpts" / "apexrl_manifest.json").write_text(json.dumps({"model": str(base)}))
    return run


@pytest.fixture
def base(tmp_path):
    from apexrl.engine.tiny import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path / "base", seed=0, max_position_embeddings=4096)


SEQ = [151644, 872, 198, 9707, 11, 1879, 0, 151645, 198, 151644, 77091, 198, 9707, 151645]


def logprobs(engine) -> list[float]:
    plp = engine.generate(SEQ, max_tokens=1, temperature=0.0, prompt_logprobs=0)["prompt_logprobs"]
    return [plp[i][str(t)]["logprob"] for i, t in enumerate(SEQ) if i]


def test_export_merges_the_latest_checkpoint_into_its_base(tmp_path, base):
    from apexrl.engine.cpu import LocalEngine
    from apexrl.publish.checkpoint import check_checkpoint

    run = jax_run(tmp_path, base)
    out = tmp_path / "merged"
    res = CliRunner().invoke(app, ["train", "export", str(run), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["global_step"] == 3
    rec = json.loads((out / "apexrl_export.json").read_text())
    assert rec["merged_weights"] == sorted(f"{m}.weight" for m in LAYERS)
    assert rec["base"] == str(base) and rec["lora_rank"] == 4
    info = check_checkpoint(out)  # what `apexrl publish model` requires: weights, tokenizer
    assert info.chat_template_source and info.n_tensors > 0
    assert not (out / "adapter_config.json").exists()  # plain weights, no adapter

    merged = logprobs(LocalEngine(out))
    eng = LocalEngine(base)
    plain = logprobs(eng)
    eng.load_adapter(run / "ckpts" / "global_step_3" / "adapter.tar.gz")
    adapted = logprobs(eng)
    assert max(abs(a - b) for a, b in zip(merged, adapted, strict=True)) < 1e-5
    assert max(abs(a - b) for a, b in zip(merged, plain, strict=True)) > 1e-2  # it did merge

    # the same from the checkpoint folder, and from the adapter with --base
    for src, extra in (
        (run / "ckpts" / "global_step_3", []),
        (tmp_path / "adapter", ["--base", str(base)]),
    ):
        o = tmp_path / f"m-{src.name}"
        res = CliRunner().invoke(app, ["train", "export", str(src), "-o", str(o), *extra])
        assert res.exit_code == 0, res.output
        again = logprobs(LocalEngine(o))
        assert max(abs(a - b) for a, b in zip(again, merged, strict=True)) < 1e-6


def test_export_refusals(tmp_path, base):
    run = jax_run(tmp_path, base)
    out = tmp_path / "merged"
    (out).mkdir()
    res = CliRunner().invoke(app, ["train", "export", str(run), "-o", str(out)])
    assert res.exit_code == 2 and "already exists" in res.output
    res = CliRunner().invoke(app, ["train", "export", str(tmp_path / "adapter"), "-o", "x"])
    assert res.exit_code == 2 and "--base" in res.output  # no manifest: the base is unknown
    res = CliRunner().invoke(app, ["train", "export", str(tmp_path), "-o", "x"])
    assert res.exit_code == 2 and "not a run folder" in res.output
    (run / "ckpts" / "global_step_3" / "state.json").unlink()  # incomplete: ignored
    res = CliRunner().invoke(app, ["train", "export", str(run), "-o", "x"])
    assert res.exit_code == 2 and "no complete checkpoint" in res.output
    # an adapter of another architecture
    other = tmp_path / "other"
    from apexrl.engine.tiny import make_tiny_checkpoint

    make_tiny_checkpoint(other, seed=0, hidden_size=32, head_dim=32)
    res = CliRunner().invoke(
        app, ["train", "export", str(tmp_path / "adapter"), "--base", str(other), "-o", "y"]
    )
    assert res.exit_code == 2 and "another model" in res.output
    assert not Path("x").exists() and not Path("y").exists()


@pytest.mark.vllm
@pytest.mark.timeout(1200)
def test_vllm_serves_the_merged_checkpoint(tmp_path, base):
    """vLLM's CPU build loads the merged folder through apexrl's launcher and its prompt
    logprobs agree with the local engine's for the same folder."""
    import httpx

    from apexrl.engine.cpu import LocalEngine
    from apexrl.engine.serve import start_engine
    from tests.engine.vllm_tier import READY_TIMEOUT_S, WINDOW, vllm_python

    run = jax_run(tmp_path, base)
    out = tmp_path / "merged"
    res = CliRunner().invoke(app, ["train", "export", str(run), "-o", str(out)])
    assert res.exit_code == 0, res.output
    want = logprobs(LocalEngine(out))
    log = tmp_path / "vllm.log"
    try:
        eng = start_engine(
            str(out),
            engine="vllm",
            vllm_python=vllm_python(),
            served_model_name="merged",
            max_model_len=WINDOW,
            log_path=log,
            ready_timeout_s=READY_TIMEOUT_S,
        )
    except Exception:
        print(log.read_text(errors="replace")[-4000:] if log.is_file() else "(no log)")
        raise
    try:
        body = {"model": "merged", "prompt": SEQ, "max_tokens": 1, "prompt_logprobs": 0}
        r = httpx.post(f"{eng.url}/v1/completions", json=body, timeout=300.0)
        r.raise_for_status()
        plp = r.json()["choices"][0]["prompt_logprobs"]
        got = [plp[i][str(t)]["logprob"] for i, t in enumerate(SEQ) if i]
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-2, (got, want)
    finally:
        eng.stop()
