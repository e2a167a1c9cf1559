"""A real warm start on CPU: `apexrl train sft` (SkyRL 0.4.0's JAX backend) on an eval run.

Marker `skyrl`: `make test-train` runs it in .venv-train with the jax extra. The run learned
from is made here: `apexrl eval run` of a scripted teacher (tests/train/sft_runs.py) on the
letters task set (real local trials, apexrl's agent recording TITO, apexrl's grader); the
teacher fails half the tasks, so rejection sampling matters. Then: the loss falls, the
taught tokens' logprob rises, the manifest names the trials learned from, --resume goes on
from the latest checkpoint and a different run over the folder is refused; the checkpoint
exported (`apexrl train export`) gives the trainer's logprobs through the local engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apexrl.cli.app import app
from tests.train.sft_runs import eval_run
from tests.train.test_sft_cli import write_recipe

pytestmark = [pytest.mark.skyrl, pytest.mark.timeout(2400)]  # JIT compiles on 2 busy cores


def sft(recipe: Path, *args: str):
    return CliRunner().invoke(app, ["train", "sft", "--recipe", str(recipe), *args])


def test_warm_start_learns_the_passed_trials_resumes_and_exports(tmp_path, monkeypatch):
    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    monkeypatch.setenv("APEXRL_LOCAL_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setenv("APEXRL_WORLD_CACHE", str(tmp_path / "cache"))
    teacher = eval_run(tmp_path, tmp_path / "teacher", {"q": "quiz", "z": "zero", "x": "tree"})
    root = tmp_path / "run"
    recipe = write_recipe(tmp_path, root, "synthetic:letters")

    res = sft(recipe, "--from", str(teacher), "--set", "sft.max_steps=1", "--json")
    assert res.exit_code == 0, res.output
    res = sft(recipe, "--from", str(teacher), "--set", "sft.max_steps=1")
    assert res.exit_code == 2 and "already holds checkpoints" in res.output  # fresh over a run
    res = sft(recipe, "--from", str(teacher), "--set", "sft.max_steps=3", "--resume", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert "resume from global_step_1" in res.output

    steps = [json.loads(x) for x in (root / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert all(s["sequences"] == 2 and s["trained_tokens"] == 4 for s in steps)
    assert steps[-1]["loss"] < steps[0]["loss"], steps  # the loss falls
    # the taught tokens (the passed replies) became likelier under the trained adapter
    assert summary["taught_logprob_after"] > summary["taught_logprob_before"] + 0.5, summary
    assert summary["loss_first"] == steps[0]["loss"]

    manifest = json.loads((root / "ckpts" / "apexrl_manifest.json").read_text())
    (src,) = manifest["sft_sources"]
    assert src["run_dir"] == str(teacher) and src["skipped"] == {"not passed": 2}
    assert sorted(t.split("-")[1] for t in src["trials"]) == ["q", "z"]
    assert (root / "ckpts" / "latest_ckpt_global_step.txt").read_text() == "3"
    assert sorted(p.name for p in (root / "ckpts").glob("global_step_*")) == [
        "global_step_2",
        "global_step_3",
    ]  # keep = 2

    # another run (other trials: every completed one) over this folder is refused
    res = sft(recipe, "--from", str(teacher), "--min-reward", "0", "--resume")
    assert res.exit_code == 2 and "holds another run" in res.output, res.output

    # export: the merged checkpoint gives the trainer's logprobs of the taught reply
    out = tmp_path / "merged"
    res = CliRunner().invoke(app, ["train", "export", str(root), "-o", str(out)])
    assert res.exit_code == 0, res.output
    rec = json.loads((out / "apexrl_export.json").read_text())
    assert rec["global_step"] == 3 and "lm_head.weight" in rec["merged_weights"]
    check_merged_logprobs(out, root, teacher)


def check_merged_logprobs(merged: Path, root: Path, teacher: Path) -> None:
    """The merged model (transformers) and the base with the adapter applied by the local
    engine give the same logprobs for a passed trial's stream; the base alone does not."""
    from apexrl.engine.cpu import LocalEngine
    from apexrl.train.jaxrl.grpo import prepare_model
    from apexrl.train.sft_data import read_runs

    base = prepare_model("synthetic:letters", root, seed=0)  # the run's own model
    _, examples = read_runs([str(teacher)], model=base)
    seq = examples[0].prompt_ids + examples[0].response_ids
    n = len(examples[0].response_ids)

    def reply_logprobs(engine) -> list[float]:
        plp = engine.generate(seq, max_tokens=1, temperature=0.0, prompt_logprobs=0)[
            "prompt_logprobs"
        ]
        return [plp[i][str(seq[i])]["logprob"] for i in range(len(seq) - n, len(seq))]

    merged_lps = reply_logprobs(LocalEngine(merged))
    eng = LocalEngine(base)
    base_lps = reply_logprobs(eng)
    eng.load_adapter(root / "ckpts" / "global_step_3" / "adapter.tar.gz")
    adapted_lps = reply_logprobs(eng)
    assert max(abs(a - b) for a, b in zip(merged_lps, adapted_lps, strict=True)) < 1e-4
    assert sum(merged_lps) > sum(base_lps) + 0.5


GPU_RECIPE = """
name = "sft-gpu"
[model]
path = "{model}"
[training]
strategy = "fsdp"
micro_batch_per_gpu = 1
[cluster]
gpus_per_node = 1
training_nodes = 1
[sft]
lr = 1e-5
max_steps = 3
batch_size = 2
[checkpoint]
path = "{root}/ckpts"
"""


def test_gpu_path_renders_skyrls_sft_config_and_skyrl_accepts_it(tmp_path, monkeypatch):
    """training.backend = "skyrl": the kept trials as SkyRL's pretokenized dataset and the
    SFTConfig from the recipe, checked by SkyRL 0.4.0 itself (its config classes,
    validate_sft_cfg, the bridge to its trainer config, its dataset loader)."""
    import pyarrow.parquet as pq

    from apexrl.engine.tiny import make_tiny_checkpoint

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    teacher = eval_run(tmp_path, tmp_path / "teacher", {"q": "quiz", "z": "zero"}, limit=2)
    model = make_tiny_checkpoint(tmp_path / "model", seed=0, max_position_embeddings=4096)
    root = tmp_path / "run"
    recipe = tmp_path / "gpu.toml"
    recipe.write_text(GPU_RECIPE.format(model=model, root=root))

    res = sft(recipe, "--from", str(teacher), "--dry-run")
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert "SkyRL 0.4.0 accepts the SFT config" in res.output
    o = plan["skyrl"]
    assert o["model.path"] == str(model) and o["num_steps"] == 3 and "num_epochs" not in o
    assert o["batch_size"] == 2 and o["optimizer_config.lr"] == 1e-5 and o["strategy"] == "fsdp"
    assert o["pretokenized_dataset_paths"] == [str(root / "data" / "sft-pretokenized.parquet")]
    assert plan["command"][:3] == ["python", "-m", "skyrl.train.main_sft"]
    assert not root.exists()  # a dry run keeps nothing

    res = sft(recipe, "--from", str(teacher))
    assert res.exit_code == 0, res.output
    rows = pq.read_table(root / "data" / "sft-pretokenized.parquet").to_pylist()
    assert len(rows) == plan["trajectories"] == 1  # q passed of q and k
    for row in rows:
        assert len(row["input_ids"]) == len(row["loss_mask"])
        assert sum(row["loss_mask"]) == 2 and row["loss_mask"][-2:] == [1, 1]  # quiz + stop
    assert json.loads((root / "sft_job.json").read_text())["skyrl"] == o

    # a layout SkyRL refuses fails with SkyRL's own message
    res = sft(
        recipe,
        "--from",
        str(teacher),
        "--dry-run",
        "--set",
        'training.strategy="megatron"',
        "--set",
        "training.tensor_parallel=2",
    )
    assert res.exit_code == 1, res.output
    assert "total_world_size must be divisible by TP * PP * CP" in res.output
