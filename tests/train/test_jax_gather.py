"""The output layer at the trained positions only (apexrl.train.jaxrl.gather) changes
nothing a loss sees: the same loss, gradient norm and trained-token logprobs as SkyRL's
own computation at every position, on the gathered path and on the fallback (more trained
positions than the gathered share). Marker `skyrl`: runs in .venv-train."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.skyrl, pytest.mark.timeout(1200)]


def test_gathered_logprobs_equal_the_full_computation(tmp_path):
    from apexrl.engine.tiny import make_tiny_checkpoint
    from apexrl.train.jaxrl.datums import make_datum
    from apexrl.train.jaxrl.gather import TRAINED, UNTRAINED, encode_targets
    from apexrl.train.jaxrl.trainer import JaxPolicy, JaxSettings

    assert encode_targets([5, 7], [1.0, 0.0]) == [5 + TRAINED, 7 + UNTRAINED]
    base = make_tiny_checkpoint(
        tmp_path / "base", seed=0, hidden_size=32, head_dim=32, tie_word_embeddings=False
    )
    prompt = [151644, 872, 198, *range(1000, 1100), 151645, 198, 151644, 77091, 198]
    # few trained positions (the gathered path) and a mostly-trained one (the fallback)
    few = make_datum(prompt, [9707, 11, 1879, 151645], [1, 0, 1, 1], [0.0] * 4, 0.0)
    many = make_datum([1, 2], list(range(3000, 3040)), [1] * 40, [0.0] * 40, 0.0)
    results = {}
    for gather in (False, True):
        settings = JaxSettings(
            lora_rank=4,
            lora_alpha=8.0,
            train_unembed=True,
            loss="cross_entropy",
            lr=1e-2,
            micro_batch=2,
            gather_logits=gather,
        )
        policy = JaxPolicy(base, settings)
        out = []
        for batch in ([few], [many], [few, few]):
            loss, lps = policy.forward_backward(batch)
            out.append((loss, policy.optim_step()["grad_norm"], lps))
        results[gather] = out
    for batch, (l0, g0, lp0), (l1, g1, lp1) in zip(
        ([few], [many], [few, few]), results[False], results[True], strict=True
    ):
        assert l1 == pytest.approx(l0, rel=1e-5) and g1 == pytest.approx(g0, rel=1e-4)
        for d, a, b in zip(batch, lp0, lp1, strict=True):
            trained = [(x, y) for x, y, w in zip(a, b, d.weights, strict=True) if w]
            assert len(trained) == d.n_trained
            assert all(y == pytest.approx(x, abs=1e-4) for x, y in trained)
    # the gathered path computed the trained positions only: the others read 0
    _, _, lps = results[True][0]
    assert [lp == 0.0 for lp in lps[0]] == [not w for w in few.weights]
