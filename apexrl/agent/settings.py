"""The agent's settings, defined once beside the agent that reads them: its budgets
(AgentBudgets / AgentLimits, built from the budget table apexrl.agent.budgets.BUDGETS)
and its sampling (Sampling, defaults from apexrl.tito.sampling). A trial's spec
(apexrl.trial.config.TrialSpec) carries them; the agent (apexrl.agent.loop) applies them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, create_model

from apexrl.agent.budgets import BUDGETS, eval_defaults
from apexrl.tito import sampling as defaults

__all__ = ["AgentBudgets", "AgentLimits", "Sampling", "eval_budgets"]


def _budget_model(name: str, doc: str, recipe_only: bool) -> type[BaseModel]:
    fields = {
        (b.recipe_key if recipe_only else b.name): (b.type, b.default)
        for b in BUDGETS
        if b.recipe or not recipe_only
    }
    return create_model(  # type: ignore[call-overload]
        name, __config__=ConfigDict(extra="forbid"), __doc__=doc, __module__=__name__, **fields
    )


# Both built from the one budget table, apexrl.agent.budgets.BUDGETS (a new budget is a
# line there): AgentBudgets holds all of them, AgentLimits those a recipe's [agent] sets,
# under their recipe keys (apexrl.agent.budgets.budgets_from_recipe maps them back).
AgentBudgets = _budget_model(
    "AgentBudgets", "Recipe defaults worth keeping (docs/facts.md section 5).", recipe_only=False
)
AgentLimits = _budget_model(
    "AgentLimits", "The budgets a recipe's [agent] table sets.", recipe_only=True
)


def eval_budgets() -> AgentBudgets:  # type: ignore[valid-type]
    """The recipe's eval defaults: 250 steps, no wrap-up nudge (training: 100, nudge on)."""
    return AgentBudgets(**eval_defaults())


class Sampling(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    # sent on every request, as the recipe does: -1 and 0 turn both off, so an engine
    # started without `--generation-config vllm` cannot apply a checkpoint's defaults
    # (Qwen's top_k 20) to the policy's samples
    top_k: int = defaults.TOP_K
    min_p: float = defaults.MIN_P
    max_tokens: int | None = None  # per turn; None: what the context has left
    seed: int | None = None
