"""`apexrl engine make-tiny --untied`: separate input and output embeddings (the acting
miniature trains a LoRA adapter of the output layer; tied ones leave it none)."""

from __future__ import annotations

import json

from apexrl.cli.app import app


def test_make_tiny_untied_writes_separate_embeddings(runner, tmp_path):
    from safetensors import safe_open

    for name, extra in (("tied", []), ("untied", ["--untied"])):
        out = tmp_path / name
        args = ["engine", "make-tiny", str(out), "--layers", "1", "--window", "256", *extra]
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        cfg = json.loads((out / "config.json").read_text())
        assert cfg["tie_word_embeddings"] is (name == "tied")
        with safe_open(str(out / "model.safetensors"), "pt") as f:
            names = set(f.keys())
        assert ("lm_head.weight" in names) is (name == "untied")


def test_make_tiny_shape_options_reach_the_config(runner, tmp_path):
    out = tmp_path / "wide"
    shape = ["--hidden-size", "96", "--heads", "4", "--kv-heads", "2", "--head-dim", "48"]
    args = ["engine", "make-tiny", str(out), "--layers", "1", "--window", "256", *shape]
    args += ["--intermediate-size", "160"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    cfg = json.loads((out / "config.json").read_text())
    got = {k: cfg[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads")}
    assert got == {"hidden_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2}
    assert (cfg["head_dim"], cfg["intermediate_size"]) == (48, 160)


def test_make_tiny_refuses_kv_heads_that_do_not_divide_heads(runner, tmp_path):
    r = runner.invoke(
        app, ["engine", "make-tiny", str(tmp_path / "x"), "--heads", "4", "--kv-heads", "3"]
    )
    assert r.exit_code == 2 and "--kv-heads 3 does not divide --heads 4" in r.output
    assert not (tmp_path / "x").exists()


def test_make_tiny_embed_std_scales_the_embeddings_only(runner, tmp_path):
    from safetensors import safe_open

    def weights(name, *extra):
        out = tmp_path / name
        args = ["engine", "make-tiny", str(out), "--layers", "1", "--window", "256", *extra]
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        with safe_open(str(out / "model.safetensors"), "pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (not iterable)

    plain, wide = weights("plain"), weights("wide", "--embed-std", "0.1")
    emb = "model.embed_tokens.weight"
    assert abs(plain[emb].std().item() - 0.02) < 0.002
    assert abs(wide[emb].std().item() - 0.1) < 0.002
    assert all((plain[k] == wide[k]).all() for k in plain if k != emb)
    again = weights("again", "--embed-std", "0.1")
    assert (again[emb] == wide[emb]).all()  # the same seed gives the same weights


def test_make_tiny_llama_has_no_query_key_norm_and_generates(runner, tmp_path):
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    out = tmp_path / "llama"
    args = ["engine", "make-tiny", str(out), "--arch", "llama", "--layers", "1", "--window", "256"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["architectures"], cfg["model_type"]) == (["LlamaForCausalLM"], "llama")
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert "model.layers.0.self_attn.q_proj.weight" in names
    assert not any("q_norm" in n or "k_norm" in n for n in names)
    qwen = tmp_path / "qwen"
    assert runner.invoke(app, [*args[:2], str(qwen), *args[5:]]).exit_code == 0
    with safe_open(str(qwen / "model.safetensors"), "pt") as f:
        assert "model.layers.0.self_attn.q_norm.weight" in set(f.keys())
    model = AutoModelForCausalLM.from_pretrained(str(out)).eval()
    with torch.no_grad():
        ids = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False)
    assert ids.shape == (1, 6)


def test_make_tiny_refuses_an_unknown_arch(runner, tmp_path):
    r = runner.invoke(app, ["engine", "make-tiny", str(tmp_path / "x"), "--arch", "gpt2"])
    assert r.exit_code == 2 and "--arch gpt2" in r.output and "llama" in r.output
    assert not (tmp_path / "x").exists()
