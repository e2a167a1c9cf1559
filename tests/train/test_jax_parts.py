"""The parts of the JAX training path that need no JAX: GRPO advantages, datums, resume
rules, the synthetic letters set, the engine's LoRA merge, a world's own apps list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_grpo_advantages_prompt_mean_baseline():
    from apexrl.train.jaxrl.datums import grpo_advantages

    advs = grpo_advantages([1.0, 0.0, 0.0, 0.0, 1.0, 1.0], ["a", "a", "a", "a", "b", "b"])
    assert advs == [0.75, -0.25, -0.25, -0.25, 0.0, 0.0]
    normed = grpo_advantages([1.0, 0.0], ["a", "a"], norm_by_std=True)
    assert normed[0] > 0.7 and normed[1] < -0.7
    assert grpo_advantages([1.0], ["solo"]) == [0.0]


def test_datum_shifts_targets_and_masks_observations():
    from apexrl.train.jaxrl.datums import make_datum

    d = make_datum([1, 2, 3], [4, 5, 6, 7], [1, 0, 1, 1], [-0.1, 0.0, -0.3, -0.4], 0.5)
    assert d.input_ids == [1, 2, 3, 4, 5, 6]
    assert d.targets == [2, 3, 4, 5, 6, 7]
    # target 4 is predicted at input position 2 (the last prompt token)
    assert d.weights == [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    assert d.sampling_logprobs == [0.0, 0.0, -0.1, 0.0, -0.3, -0.4]
    assert d.advantages == [0.0, 0.0, 0.5, 0.0, 0.5, 0.5]
    with pytest.raises(ValueError, match="differ in length"):
        make_datum([1], [2, 3], [1], [0.0, 0.0], 1.0)


def test_resume_refuses_fresh_run_over_checkpoints(tmp_path):
    from apexrl.errors import UsageError
    from apexrl.train.jaxrl.grpo import JaxRun
    from apexrl.train.recipe import load_recipe

    loaded = load_recipe(
        REPO / "recipes" / "smoke-cpu.toml", [f'checkpoint.path="{tmp_path}/ckpts"']
    )
    ck = tmp_path / "ckpts"
    (ck / "global_step_3").mkdir(parents=True)
    (ck / "latest_ckpt_global_step.txt").write_text("3")
    with pytest.raises(UsageError, match="--resume: no checkpoint"):
        JaxRun(loaded, resume=True).check_resume()  # no state.json: incomplete, ignored
    (ck / "global_step_3" / "state.json").write_text('{"global_step": 3, "weight_version": 3}')
    with pytest.raises(UsageError, match="already holds checkpoints"):
        JaxRun(loaded).check_resume()
    assert JaxRun(loaded, resume=True).check_resume() == "resume from global_step_3"


def test_letters_task_set_converts_with_deterministic_rubrics(tmp_path):
    from apexrl.train.jaxrl.letters import LETTERS, REPLY_WORDS, write_letters_tasks

    tasks, worlds = write_letters_tasks(tmp_path)
    dirs = sorted(p for p in tasks.iterdir() if (p / "task.toml").is_file())
    assert len(dirs) == len(LETTERS)
    for d in dirs:
        crit = json.loads((d / "tests" / "verifiers.json").read_text())
        assert [c["check"]["kind"] for c in crit] == ["contains"]
        letter = crit[0]["check"]["value"]
        assert letter in (d / "instruction.md").read_text()
        assert any(letter in w for w in REPLY_WORDS)  # reachable
        assert not all(letter in w for w in REPLY_WORDS)  # not given away
    assert len(list(worlds.glob("*.zip"))) == 1


def test_world_json_apps_limit_the_servers(tmp_path):
    from apexrl.worlds.world import open_world

    root = tmp_path / "w"
    (root / "filesystem").mkdir(parents=True)
    w = open_world(root, world_id="x")
    assert w.apps == []  # no list anywhere: every server
    (root / "world.json").write_text(json.dumps({"apps": ["files", "Sheets", "bogus"]}))
    w = open_world(root, world_id="x")
    assert w.apps == ["files", "sheets"]
    (root / "world.json").write_text("{not json")
    assert open_world(root, world_id="x").apps == []


def _peft_adapter(folder: Path, model, r: int, alpha: float, seed: int = 1) -> dict:
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    q = model.model.layers[0].self_attn.q_proj.weight
    head = model.lm_head.weight
    emb = model.model.embed_tokens.weight
    t = {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": torch.randn(
            r, q.shape[1], generator=g
        ),
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": torch.randn(
            q.shape[0], r, generator=g
        ),
        "base_model.model.lm_head.lora_A.weight": torch.randn(r, head.shape[1], generator=g),
        "base_model.model.lm_head.lora_B.weight": torch.randn(head.shape[0], r, generator=g),
        # embeddings as SkyRL's JAX backend saves them: A (vocab, r), B (r, dim)
        "base_model.model.model.embed_tokens.lora_A.weight": torch.randn(
            emb.shape[0], r, generator=g
        ),
        "base_model.model.model.embed_tokens.lora_B.weight": torch.randn(
            r, emb.shape[1], generator=g
        ),
    }
    folder.mkdir(parents=True)
    save_file(t, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"r": r, "lora_alpha": alpha}))
    return t


def test_engine_merges_a_lora_adapter_and_renames_the_served_model(tmp_path):
    import tarfile

    import httpx
    import torch

    from apexrl.engine.cpu import EngineServer, LocalEngine
    from apexrl.train.jaxrl.letters import write_prior_model

    model_dir = write_prior_model(tmp_path / "m")
    eng = LocalEngine(model_dir, served_model_name="p@v0")
    base_q = eng.model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    base_e = eng.model.model.embed_tokens.weight.detach().clone()
    t = _peft_adapter(tmp_path / "ad", eng.model, r=4, alpha=8.0)
    tgz = tmp_path / "adapter.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(tmp_path / "ad", arcname="")
    with EngineServer(eng) as srv:
        eng.load_adapter(tgz, served_model_name="p@v1")
        pre = "base_model.model.model."
        want_q = base_q + 2.0 * (
            t[pre + "layers.0.self_attn.q_proj.lora_B.weight"]
            @ t[pre + "layers.0.self_attn.q_proj.lora_A.weight"]
        )
        assert torch.allclose(eng.model.model.layers[0].self_attn.q_proj.weight, want_q, atol=1e-5)
        want_e = base_e + 2.0 * (
            t[pre + "embed_tokens.lora_A.weight"] @ t[pre + "embed_tokens.lora_B.weight"]
        )
        assert torch.allclose(eng.model.model.embed_tokens.weight, want_e, atol=1e-5)
        body = {"prompt": [1, 2, 3], "max_tokens": 1, "temperature": 0}
        old = httpx.post(f"{srv.url}/v1/completions", json={**body, "model": "p@v0"})
        assert old.status_code == 404  # the old version is no longer served
        new = httpx.post(f"{srv.url}/v1/completions", json={**body, "model": "p@v1"})
        assert new.status_code == 200
        # a second adapter replaces the first (never stacked)
        eng.load_adapter(tmp_path / "ad", served_model_name="p@v2")
        assert torch.allclose(eng.model.model.layers[0].self_attn.q_proj.weight, want_q, atol=1e-5)


def test_adapter_for_another_architecture_is_refused(tmp_path):
    import torch
    from safetensors.torch import save_file

    from apexrl.engine.cpu import LocalEngine
    from apexrl.errors import UsageError
    from apexrl.train.jaxrl.letters import write_prior_model

    eng = LocalEngine(write_prior_model(tmp_path / "m"))
    ad = tmp_path / "ad"
    ad.mkdir()
    save_file(
        {
            "base_model.model.model.layers.9.mlp.up_proj.lora_A.weight": torch.zeros(2, 64),
            "base_model.model.model.layers.9.mlp.up_proj.lora_B.weight": torch.zeros(128, 2),
        },
        str(ad / "adapter_model.safetensors"),
    )
    (ad / "adapter_config.json").write_text(json.dumps({"r": 2, "lora_alpha": 2}))
    with pytest.raises(UsageError, match="does not have"):
        eng.load_adapter(ad)
    (ad / "adapter_config.json").unlink()
    with pytest.raises(UsageError, match="adapter_config.json"):
        eng.load_adapter(ad)


def test_cli_dry_run_of_the_cpu_recipe_prints_the_plan(runner, tmp_path):
    from apexrl.cli.app import app

    res = runner.invoke(
        app,
        [
            "train",
            "smoke-cpu",
            "--dry-run",
            "--json",
            "--set",
            f'checkpoint.path="{tmp_path}/r/ckpts"',
        ],
    )
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout.strip().splitlines()[-1])
    assert plan["backend"] == "jax" and plan["loss"] == "ppo"
    assert plan["run_dir"] == str(tmp_path / "r")
    assert not (tmp_path / "r").exists()  # a dry run writes nothing


def test_a_loss_the_jax_backend_lacks_is_a_usage_error(runner, tmp_path):
    from apexrl.cli.app import app

    res = runner.invoke(
        app, ["train", "smoke-cpu", "--dry-run", "--set", 'algorithm.policy_loss="dppo"']
    )
    assert res.exit_code == 2, res.output
    assert "importance_sampling, ppo, cispo" in res.stderr
