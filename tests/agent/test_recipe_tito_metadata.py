"""Trial records the recipe's generator consumes: Harbor's agent_result.metadata carries
`tito_tokens`, `tito_loss_mask` and `tito_logprobs` (the field list of the recipe's
tito_harbor_generator.py). The generator's input is built from them here as that
generator builds it: the response starts at the first sampled token."""

from __future__ import annotations

from apexrl.agent.harbor_agent import RECIPE_TITO_KEYS
from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv
from tests.scripted_engine import FIXED_LOGPROB, ScriptedEngine, tool_call_text


def generator_input(metadata: dict) -> dict:
    tokens, mask, logprobs = (metadata[k] for k in RECIPE_TITO_KEYS)
    first = next(i for i, m in enumerate(mask) if m == 1)
    return {
        "prompt_ids": tokens[:first],
        "response_ids": tokens[first:],
        "loss_mask": mask[first:],
        "rollout_logprobs": logprobs[first:],
    }


def test_metadata_carries_the_recipes_tito_fields(tmp_path, world_zip):
    script = [tool_call_text("filesystem_list_files", {"path": "/"}), "The answer is 42."]
    env = HostEnv(tmp_path, world_zip)
    with ScriptedEngine(script) as eng:
        _, ctx = run_agent(env, tmp_path / "agent", "What is the answer?", endpoint=eng.url)
        requests = list(eng.requests)
    meta = ctx.metadata
    assert all(isinstance(meta.get(k), list) for k in RECIPE_TITO_KEYS)
    tokens, mask, logprobs = (meta[k] for k in RECIPE_TITO_KEYS)
    assert len(tokens) == len(mask) == len(logprobs)
    assert meta["n_episodes"] == 2 and "stop_reason" not in meta
    g = generator_input(meta)
    assert g["prompt_ids"] == requests[0]["prompt"]  # what the engine saw first
    assert requests[1]["prompt"] == tokens[: len(requests[1]["prompt"])]  # one stream
    assert len(g["response_ids"]) == len(g["loss_mask"]) == len(g["rollout_logprobs"])
    sampled = [lp for lp, m in zip(g["rollout_logprobs"], g["loss_mask"], strict=True) if m]
    observed = [lp for lp, m in zip(g["rollout_logprobs"], g["loss_mask"], strict=True) if not m]
    assert sampled and all(lp == FIXED_LOGPROB for lp in sampled)
    assert observed and all(lp == 0.0 for lp in observed)  # the tool result's tokens
    assert ctx.rollout_details and "apexrl" in meta  # apexrl's own records stay
