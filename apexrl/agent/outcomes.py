"""How each ending of a trial counts: ONE table per named outcome policy.

`recipe` reproduces the public ApexAgents-SkyRL recipe (docs/facts.md section 5) and is the
training default; `strict` is apexrl's earlier behaviour (every budget ending trains
with reward 0, repairs run out into an error).

| ending (status / class)      | recipe            | strict            |
|------------------------------|-------------------|-------------------|
| complete                     | verifier, trained | verifier, trained |
| max_steps (length/max_steps) | verifier, trained | 0, trained        |
| repairs used up              | verifier, trained | 0, masked (error) |
| length (per-turn cap)        | 0, trained        | 0, trained        |
| context_length               | 0, trained        | 0, trained        |
| agent_timeout                | 0, masked         | 0, trained        |
| error                        | 0, masked         | 0, masked         |
| no_verifier_result           | 0, masked         | 0, masked         |

(reward, then whether the loss mask is kept: "trained"; "verifier" = the verifier's
reward; under recipe the next reply after the last repair is graded as the answer.)

Group rule (a GRPO group = the n samples of one prompt), recipe only: a group with
>= 2 agent timeouts, or with any errored member (error, no_verifier_result), is masked
whole (reward 0, every token masked); a group with one timeout masks that one alone.

"Trained on" means the loss mask is kept; a masked trajectory adds no gradient. The
agent applies the first column pair's agent-side rows (grade at max_steps, repairs
counted per trajectory with the next reply taken as the final answer); the trial
machinery turns a graded max_steps ending into a `complete` result (error class
`max_steps` kept); the SkyRL generator applies reward/mask/stop reason and the group rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OutcomePolicyName = Literal["recipe", "strict"]
POLICIES: tuple[str, ...] = ("recipe", "strict")


@dataclass(frozen=True)
class Rule:
    keep_reward: bool  # the verifier's reward counts (else 0)
    train: bool  # the loss mask is kept (else all 0)
    stop_reason: str


@dataclass(frozen=True)
class OutcomePolicy:
    name: str
    rules: dict[str, Rule]  # by trial status
    grade_at_max_steps: bool  # a max_steps ending is graded like a final answer
    repairs_then_final: bool  # after the last repair, the next reply is the final answer
    repairs_per_trajectory: bool  # repairs counted over the trajectory (else in a row)
    group_timeout_threshold: int | None  # mask the group at this many timeouts (None: never)
    group_mask_on_error: bool  # mask the group when any member errored

    def rule(self, status: str) -> Rule:
        return self.rules.get(status, self.rules["error"])


_COMMON = {
    "complete": Rule(True, True, "stop"),
    "length": Rule(False, True, "length"),
    "context_length": Rule(False, True, "context_length"),
    "error": Rule(False, False, "error"),
    "no_verifier_result": Rule(False, False, "no_verifier_result"),
}

OUTCOME_POLICIES: dict[str, OutcomePolicy] = {
    "recipe": OutcomePolicy(
        name="recipe",
        rules={**_COMMON, "agent_timeout": Rule(False, False, "agent_timeout")},
        grade_at_max_steps=True,
        repairs_then_final=True,
        repairs_per_trajectory=True,
        group_timeout_threshold=2,
        group_mask_on_error=True,
    ),
    "strict": OutcomePolicy(
        name="strict",
        rules={**_COMMON, "agent_timeout": Rule(False, True, "agent_timeout")},
        grade_at_max_steps=False,
        repairs_then_final=False,
        repairs_per_trajectory=False,
        group_timeout_threshold=None,
        group_mask_on_error=False,
    ),
}

ERRORED = frozenset({"error", "no_verifier_result"})


def outcome_policy(name: str) -> OutcomePolicy:
    try:
        return OUTCOME_POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown outcome policy {name!r} (one of {', '.join(POLICIES)})"
        ) from None


def group_masked(policy: OutcomePolicy, statuses: list[str]) -> bool:
    """Whether the whole group of these member statuses is masked."""
    if policy.group_mask_on_error and any(s in ERRORED for s in statuses):
        return True
    t = policy.group_timeout_threshold
    return t is not None and sum(s == "agent_timeout" for s in statuses) >= t
