"""Generator output -> GRPO advantages -> the JAX backend's datums.

A datum is one trajectory as SkyRL's Tinker-style backends take it: the model input
(prompt + response without its last token), the shifted targets (the next token at
each input position), per-target loss weights (the response's loss mask; 0 on the
prompt and on observation tokens), the behaviour policy's logprobs (the engine's,
recorded by the agent) and per-token advantages. Pure Python: no JAX needed here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Datum:
    input_ids: list[int]
    targets: list[int]
    weights: list[float]
    sampling_logprobs: list[float]
    advantages: list[float]
    advantage: float  # the trajectory's scalar advantage
    n_prompt: int  # prompt tokens (targets from index n_prompt - 1 are response tokens)

    @property
    def n_trained(self) -> int:
        return sum(1 for w in self.weights if w)


def grpo_advantages(
    rewards: list[float], groups: list[str], *, norm_by_std: bool = False, eps: float = 1e-6
) -> list[float]:
    """GRPO: each reward minus its group's mean (the prompt-mean baseline), divided by
    the group's standard deviation when `norm_by_std`. A group of one gets 0."""
    members: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out = [0.0] * len(rewards)
    for idx in members.values():
        if len(idx) < 2:
            continue
        vals = [rewards[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5
        for i in idx:
            a = rewards[i] - mean
            out[i] = a / (std + eps) if norm_by_std else a
    return out


def make_datum(
    prompt_ids: list[int],
    response_ids: list[int],
    loss_mask: list[int],
    logprobs: list[float],
    advantage: float,
) -> Datum:
    """One trajectory as a datum (see the module doc for the alignment)."""
    if not (len(response_ids) == len(loss_mask) == len(logprobs)):
        raise ValueError(
            f"response ids, loss mask and logprobs differ in length "
            f"({len(response_ids)}, {len(loss_mask)}, {len(logprobs)})"
        )
    if not prompt_ids or not response_ids:
        raise ValueError("a datum needs a prompt and a response")
    seq = list(prompt_ids) + list(response_ids)
    n = len(seq) - 1
    p = len(prompt_ids)
    weights = [0.0] * n
    lps = [0.0] * n
    advs = [0.0] * n
    for j, (m, lp) in enumerate(zip(loss_mask, logprobs, strict=True)):
        k = p - 1 + j  # the input position whose next token is response token j
        if m:
            weights[k] = 1.0
            lps[k] = float(lp)
            advs[k] = float(advantage)
    return Datum(
        input_ids=seq[:-1],
        targets=seq[1:],
        weights=weights,
        sampling_logprobs=lps,
        advantages=advs,
        advantage=float(advantage),
        n_prompt=p,
    )


def datums_from_output(
    out: dict, groups: list[str], *, norm_by_std: bool = False
) -> tuple[list[Datum], list[float]]:
    """(datums, advantages) for a SkyRL GeneratorOutput (apexrl's TrialGenerator)."""
    advs = grpo_advantages(list(out["rewards"]), groups, norm_by_std=norm_by_std)
    datums = [
        make_datum(p, r, m, lp, a)
        for p, r, m, lp, a in zip(
            out["prompt_token_ids"],
            out["response_ids"],
            out["loss_masks"],
            out["rollout_logprobs"],
            advs,
            strict=True,
        )
    ]
    return datums, advs


def response_logprob_sum(datum: Datum, logprobs: list[float]) -> float:
    """Sum of a trained trajectory's response-token logprobs (weight > 0) from per-target
    logprobs aligned with `datum.targets`."""
    return sum(lp for lp, w in zip(logprobs, datum.weights, strict=False) if w)
