"""A LoRA policy trained with SkyRL 0.4.0's JAX backend (`skyrl.backends.jax`) on CPU.

`JaxPolicy(model_dir, settings)` loads a Hugging Face Qwen3 checkpoint into the
backend, creates one LoRA adapter (the policy) with an AdamW optimizer, and exposes
the backend's Tinker-style calls on apexrl datums:

- `forward_backward(datums)`: the loss (`importance_sampling`, `ppo`, `cispo` or
  `cross_entropy`) and its gradients, accumulated in the backend; returns the mean
  loss and per-datum target logprobs under the current weights.
- `optim_step()`: one AdamW step with the accumulated gradients (grad norm back).
- `logprobs(datums)`: a forward pass only (the trained targets' logprobs; 0 at the
  others with `gather_logits`, the default).
- `save_adapter(path)`: the adapter as a PEFT `adapter.tar.gz` (what an engine loads).
- `save_state(dir)` / `load_state(dir)`: adapter + optimizer state (resume).

Needs the `jax` extra (`pip install 'apexrl[jax]'`): skyrl==0.4.0, jax, flax, optax.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from apexrl.errors import UsageError
from apexrl.train.jaxrl.datums import Datum

MODEL_ID = "policy"
LOSSES = ("importance_sampling", "ppo", "cispo", "cross_entropy")


class JaxSettings(BaseModel):
    """The backend and optimizer settings of a JAX run (the recipe's [jax] section plus
    training/algorithm fields)."""

    model_config = ConfigDict(extra="forbid")
    lora_rank: int = 8
    lora_alpha: float = 16.0
    train_attn: bool = True
    train_mlp: bool = True
    train_unembed: bool = False  # needs untied embeddings
    seed: int = 0
    loss: str = "ppo"
    clip_low: float = 0.8  # ratio bounds for ppo/cispo
    clip_high: float = 1.2
    lr: float = 1e-3
    adam_betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    micro_batch: int = 8  # sequences per forward/backward (gradients accumulate)
    # the output layer at the trained positions only (apexrl.train.jaxrl.gather); the
    # untrained positions' logprobs are then 0
    gather_logits: bool = True


def adapter_settings(recipe: Any) -> dict[str, Any]:
    """The JaxSettings fields RL and SFT both take from a recipe: the [jax] adapter and
    micro-batch, and [training]'s Adam betas."""
    j = recipe.jax
    betas = tuple(recipe.training.adam_betas or (0.9, 0.999))
    return {
        "lora_rank": j.lora_rank,
        "lora_alpha": j.lora_alpha,
        "train_attn": j.train_attn,
        "train_mlp": j.train_mlp,
        "train_unembed": j.train_unembed,
        "adam_betas": (float(betas[0]), float(betas[1])),
        "micro_batch": j.micro_batch,
    }


def require_jax() -> None:
    try:
        import flax  # noqa: F401
        import jax  # noqa: F401
        import optax  # noqa: F401
        import skyrl.backends.jax  # noqa: F401
    except ImportError as e:
        raise UsageError(
            f"the JAX training backend is not installed ({e.name or e})",
            hint="pip install 'apexrl[jax]' (or `make jax-env`: SkyRL 0.4.0 + jax/flax/optax)",
        ) from None


def refuse_unembed_on_tied(model_dir: str | Path, train_unembed: bool) -> None:
    """An output-layer adapter needs an output layer of its own: a model that ties its
    embeddings has none (SkyRL's backend would fail deep inside with a ValueError)."""
    if not train_unembed:
        return
    cfg = Path(model_dir) / "config.json"
    try:
        tied = json.loads(cfg.read_text()).get("tie_word_embeddings", False)
    except (OSError, ValueError):
        return  # the backend reports an unreadable model itself
    if tied:
        raise UsageError(
            f"jax.train_unembed = true needs untied embeddings, and {model_dir} ties them "
            "(config.json tie_word_embeddings = true)",
            hint="set jax.train_unembed=false, or train a model made with "
            "`apexrl engine make-tiny --untied`",
        )


class JaxPolicy:
    def __init__(self, model_dir: str | Path, settings: JaxSettings) -> None:
        if settings.loss not in LOSSES:
            raise UsageError(
                f"policy loss {settings.loss!r} is not one the JAX backend has",
                hint=f"set algorithm.policy_loss to one of {', '.join(LOSSES)}",
            )
        refuse_unembed_on_tied(model_dir, settings.train_unembed)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        require_jax()
        from skyrl.backends.jax import JaxBackend, JaxBackendConfig
        from skyrl.tinker import types as T

        self.T = T
        self.settings = settings
        if settings.gather_logits:
            from apexrl.train.jaxrl.gather import install

            install()
        self.model_dir = Path(model_dir)
        self.backend = JaxBackend(
            str(self.model_dir),
            JaxBackendConfig(
                max_lora_adapters=2,
                max_lora_rank=max(settings.lora_rank, 1),
                train_micro_batch_size=settings.micro_batch,
                sample_max_num_sequences=1,
            ),
        )
        self.lora = T.LoraConfig(
            rank=settings.lora_rank,
            alpha=settings.lora_alpha,
            seed=settings.seed,
            train_attn=settings.train_attn,
            train_mlp=settings.train_mlp,
            train_unembed=settings.train_unembed,
        )
        self.backend.create_model(MODEL_ID, self.lora)
        self._n = 0

    # --- batches -----------------------------------------------------------------------
    def _targets(self, d: Datum) -> list[int]:
        if not self.settings.gather_logits:
            return d.targets
        from apexrl.train.jaxrl.gather import encode_targets

        return encode_targets(d.targets, d.weights)

    def _batch(self, datums: list[Datum], loss: str) -> Any:
        T = self.T
        self._n += 1
        n = len(datums)
        cfg = {
            "clip_low_threshold": self.settings.clip_low,
            "clip_high_threshold": self.settings.clip_high,
        }
        return T.PreparedModelPassBatch(
            all_model_inputs=[
                T.ModelInput(chunks=[T.EncodedTextChunk(tokens=d.input_ids)]) for d in datums
            ],
            all_targets=[self._targets(d) for d in datums],
            all_token_weights=[d.weights for d in datums],
            all_sampling_logprobs=[d.sampling_logprobs for d in datums],
            all_advantages=[d.advantages for d in datums],
            all_values=[[] for _ in datums],
            all_returns=[[] for _ in datums],
            all_model_ids=[MODEL_ID] * n,
            all_loss_fns=[loss] * n,
            all_loss_fn_configs=[cfg] * n,
            request_batch_slices=[(f"req-{self._n}", MODEL_ID, 0, n)],
        )

    def _run(
        self, datums: list[Datum], loss: str, backward: bool
    ) -> tuple[float, list[list[float]]]:
        if not datums:
            return 0.0, []
        batch = self._batch(datums, loss)
        res = (self.backend.forward_backward if backward else self.backend.forward)(batch)
        out = res[batch.request_batch_slices[0][0]]
        err = getattr(out, "error", None)
        if err:
            raise RuntimeError(f"JAX backend: {err}")
        lps: list[list[float]] = []
        seq_losses: list[float] = []
        for d, o in zip(datums, out.loss_fn_outputs, strict=True):
            lps.append(list(o["logprobs"]["data"]))
            tl = o["elementwise_loss"]["data"]
            denom = max(sum(d.weights), 1e-9)
            seq_losses.append(sum(tl) / denom)
        return sum(seq_losses) / len(seq_losses), lps

    def forward_backward(self, datums: list[Datum]) -> tuple[float, list[list[float]]]:
        return self._run(datums, self.settings.loss, backward=True)

    def logprobs(self, datums: list[Datum]) -> list[list[float]]:
        return self._run(datums, "cross_entropy", backward=False)[1]

    def optim_step(self, lr: float | None = None) -> dict[str, float]:
        """One Adam step at `lr` (default: the settings' rate)."""
        T = self.T
        s = self.settings
        lr = s.lr if lr is None else lr
        out = self.backend.optim_step(
            MODEL_ID,
            T.OptimStepInput(
                adam_params=T.AdamParams(
                    learning_rate=lr,
                    beta1=s.adam_betas[0],
                    beta2=s.adam_betas[1],
                    eps=s.eps,
                    weight_decay=s.weight_decay,
                )
            ),
        )
        m = out.metrics or {}
        return {
            "grad_norm": float(m.get("skyrl.ai/grad_norm", float("nan"))),
            "lr": float(m.get("skyrl.ai/learning_rate", lr)),
        }

    # --- weights -----------------------------------------------------------------------
    def adapter_arrays(self) -> dict[str, Any]:
        """The adapter's LoRA weights (numpy), keyed by parameter path: to compare steps."""
        import jax
        import numpy as np
        from flax import nnx
        from skyrl.tx.utils.models import extract_adapter_state

        b = self.backend
        idx = b.models[MODEL_ID].adapter_index
        state = extract_adapter_state(idx, b.lora_params, self.lora.rank)
        flat = nnx.to_flat_state(state)
        return {
            ".".join(map(str, path)): np.asarray(
                jax.device_get(v[...] if hasattr(v, "__getitem__") else v)
            )
            for path, v in flat
        }

    def save_adapter(self, path: Path) -> Path:
        from cloudpathlib import AnyPath

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.backend.save_sampler_checkpoint(AnyPath(str(path)), MODEL_ID)
        return path

    def save_state(self, folder: Path) -> Path:
        from cloudpathlib import AnyPath

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.backend.save_checkpoint(AnyPath(str(folder)), MODEL_ID)
        return folder

    def load_state(self, folder: Path) -> None:
        from cloudpathlib import AnyPath

        self.backend.load_checkpoint(AnyPath(str(folder)), MODEL_ID, load_optimizer=True)
