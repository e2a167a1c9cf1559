"""The agent's budgets, one line each: type, default, and where they can be set.

This table is the one place a budget is defined. From it come the pydantic models
(apexrl.agent.settings.AgentLimits / AgentBudgets), the recipe's [agent] keys
(apexrl.train.recipe.AgentSection takes the `recipe` ones, named `recipe_key`), eval's defaults
(`eval_default`) and the `apexrl eval run` options (`flag`). It imports nothing heavy:
the CLI builds its options from it while `apexrl --help` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

_UNSET: Any = object()


@dataclass(frozen=True)
class Budget:
    name: str
    type: Any
    default: Any
    help: str
    flag: str | None = None  # the `apexrl eval run` option; None: recipe/library only
    recipe: bool = True  # a recipe's [agent] table may set it
    eval_default: Any = _UNSET  # `apexrl eval run`'s default when it differs (the recipe's eval)
    # the key in a recipe's [agent] table when it differs from `name`
    recipe_name: str | None = None

    @property
    def recipe_key(self) -> str:
        return self.recipe_name or self.name

    @property
    def eval_value(self) -> Any:
        return self.default if self.eval_default is _UNSET else self.eval_default


NUDGE = Literal["off", "once", "recipe"]

BUDGETS: tuple[Budget, ...] = (
    # a recipe's [agent].max_turns (SkyRL's generator.max_turns; [training].max_steps counts
    # optimizer steps); eval rollouts: [agent].eval_max_turns, default eval_default
    Budget(
        "max_steps",
        int,
        100,
        "Agent steps per trial.",
        "--max-steps",
        eval_default=250,
        recipe_name="max_turns",
    ),
    # eval: the recipe's eval settings (override_timeout_sec 3500, LLM call timeout 2000)
    Budget(
        "agent_timeout_s",
        float,
        3600.0,
        "Seconds per trial.",
        "--agent-timeout",
        eval_default=3500.0,
    ),
    Budget("tool_timeout_s", float, 600.0, "Seconds per tool call.", "--tool-timeout"),
    Budget(
        "llm_timeout_s",
        float,
        1800.0,
        "Seconds per engine call.",
        "--llm-timeout",
        eval_default=2000.0,
    ),
    Budget("tool_result_max_chars", int, 42_000, "Characters of one tool result kept."),
    # bytes of one tool reply read from the gateway: a larger reply is refused while it
    # streams in (the model is told), so the driver's memory per trial stays bounded
    Budget("tool_reply_max_bytes", int, 16 * 1024 * 1024, "Bytes of one tool reply read."),
    Budget("max_tool_call_repairs", int, 2, "Malformed tool calls repaired per step."),
    # tell the model to wrap up below this share of the context left
    Budget("nudge_ratio", float, 0.2, "Wrap-up nudge below this.", "--nudge-ratio"),
    # None: from the model config (training: the recipe's batch.max_seq_len)
    Budget(
        "context_window",
        int | None,
        None,
        "Tokens (default: model).",
        "--context-window",
        recipe=False,
    ),
    # off | once (one user message, never repeated) | recipe (appended to the last tool
    # result on every step below nudge_ratio; the recipe's training behaviour)
    Budget(
        "nudge",
        NUDGE,
        "recipe",
        "Wrap-up nudge: off (the recipe's eval), once, recipe.",
        "--nudge",
        eval_default="off",
    ),
    # apexrl.agent.outcomes: recipe (the training default) | strict
    Budget("outcome_policy", Literal["recipe", "strict"], "recipe", "Outcome policy."),
)


# recipe keys that were renamed: old [agent] key -> new one (still read, with a warning)
RENAMED_RECIPE_KEYS = {"max_steps": "max_turns", "eval_max_steps": "eval_max_turns"}


def budget(name: str) -> Budget:
    return next(b for b in BUDGETS if b.name == name)


def budgets_from_recipe(agent: Any) -> dict[str, Any]:
    """The budgets a recipe's [agent] table set, by budget name."""
    return {b.name: getattr(agent, b.recipe_key) for b in BUDGETS if b.recipe}


def eval_defaults() -> dict[str, Any]:
    """`apexrl eval run`'s budgets: the recipe's eval (250 steps, no wrap-up nudge,
    3500 s per trial, 2000 s per engine call)."""
    return {b.name: b.eval_value for b in BUDGETS}
