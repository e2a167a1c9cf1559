"""[sft] warmup_steps: the rate rises linearly over the first steps (the JAX loop passes it
to each Adam step; the GPU path renders SkyRL's num_warmup_steps)."""

from __future__ import annotations

import pytest

from apexrl.errors import UsageError
from apexrl.train.jaxrl.sft import warmup_lr
from apexrl.train.recipe import load_recipe
from apexrl.train.sft_skyrl import sft_overrides

RECIPE = "recipes/sft/acting-sft-cpu.toml"


def test_the_rate_rises_linearly_then_holds():
    rates = [warmup_lr(1e-2, 4, step) for step in range(1, 7)]
    assert rates == pytest.approx([2.5e-3, 5e-3, 7.5e-3, 1e-2, 1e-2, 1e-2])
    assert [warmup_lr(1e-2, 0, s) for s in (1, 2)] == [1e-2, 1e-2]  # 0: no warm-up


def test_skyrl_config_gets_num_warmup_steps_only_when_set():
    with_warmup = sft_overrides(load_recipe(RECIPE, ["sft.warmup_steps=10"]), "d.parquet")
    assert with_warmup["optimizer_config.num_warmup_steps"] == 10
    plain = sft_overrides(load_recipe(RECIPE), "d.parquet")
    assert "optimizer_config.num_warmup_steps" not in plain


def test_a_negative_warmup_is_refused():
    with pytest.raises(UsageError):
        load_recipe(RECIPE, ["sft.warmup_steps=-1"])
