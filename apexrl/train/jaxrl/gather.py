"""The output layer at the trained positions only (SkyRL 0.4.0's JAX backend).

The backend computes a logprob at every position of a batch: the output layer
(hidden x vocabulary, 151,669 rows for Qwen3) runs ~3,000 times per batch of the acting
miniature while ~200 positions carry a loss weight. The losses (cross-entropy, PPO,
CISPO, importance sampling) use a position's logprob only where its weight is set, so
the others need not be computed.

The backend's loss sees the targets, not the weights, so the trainer marks them in the
targets: `encode_targets` adds TRAINED to a trained position's id and UNTRAINED to the
others'. `compute_logprobs` (installed over the backend's with `install`) decodes them,
gathers the hidden states of the trained positions (at most a fixed share of the
micro-batch: a static shape for the JIT), runs the output layer on those only and
scatters their logprobs back; the untrained positions get 0. Targets that carry no mark
(any other caller of the backend) and a micro-batch with more trained positions than the
share take the backend's own computation, so the result is never wrong, only slower.
"""

from __future__ import annotations

TRAINED = 1 << 24  # above any vocabulary id
UNTRAINED = 2 << 24
SHARE = 8  # at most 1 in SHARE positions of a micro-batch gathered (else the full path)

_installed = False


def encode_targets(targets: list[int], weights: list[float]) -> list[int]:
    return [t + (TRAINED if w else UNTRAINED) for t, w in zip(targets, weights, strict=True)]


def install() -> None:
    """Put the gathered computation over the backend's (idempotent)."""
    global _installed
    if _installed:
        return
    from skyrl.tx.utils.logits_processor import LogitsProcessorMixin

    full = LogitsProcessorMixin.compute_logprobs

    def compute_logprobs(self, hidden_states, target_ids, adapter_indices=None):
        import jax
        import jax.numpy as jnp

        B, T, H = hidden_states.shape
        marked = target_ids >= TRAINED
        trained = marked & (target_ids < UNTRAINED)
        ids = target_ids % TRAINED  # marks off; unmarked ids unchanged
        n = B * T
        k = max(n // SHARE, 1)
        flat_sel = trained.reshape(-1)

        def everywhere(_):
            lp = full(self, hidden_states, ids, adapter_indices)
            # marked batches: the untrained positions' values are 0 on both paths
            return jnp.where(marked & ~trained, 0.0, lp).astype(jnp.float32)

        def gathered(_):
            (idx,) = jnp.nonzero(flat_sel, size=k, fill_value=0)
            valid = jnp.arange(k) < flat_sel.sum()
            h = hidden_states.reshape(n, H)[idx]
            ad = (
                jnp.zeros(n, dtype=jnp.int32)
                if adapter_indices is None
                else jnp.repeat(adapter_indices, T)
            )[idx]
            logits = self.get_lm_head()(h, ad)
            lp = self.logits_to_logprobs(logits, ids.reshape(-1)[idx])
            lp = jnp.where(valid, lp, 0.0).astype(jnp.float32)
            return jnp.zeros(n, jnp.float32).at[idx].add(lp).reshape(B, T)

        use_gather = marked.any() & (flat_sel.sum() <= k)
        return jax.lax.cond(use_gather, gathered, everywhere, None)

    LogitsProcessorMixin.compute_logprobs = compute_logprobs
    _installed = True
