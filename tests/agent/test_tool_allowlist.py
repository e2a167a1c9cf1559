"""The tool allowlist (TrialSpec.tools, `apexrl eval run --tool`, a recipe's [agent].tools):
the agent is offered only the named tools of the world's gateway, a call to any other is
answered as a tool that does not exist, and a name the world does not list fails the trial
as infrastructure (never a score). A real gateway, a scripted engine, the Qwen3 tokenizer."""

from __future__ import annotations

from apexrl.eval.infra import infra_kind
from apexrl.tito.tokenizer import load_tokenizer
from tests.agent.conftest import run_agent
from tests.agent.hostenv import HostEnv
from tests.scripted_engine import ScriptedEngine, tool_call_text

ALLOW = ["filesystem_read_text_file", "filesystem_search_files"]


def _decoded_prompt(body: dict) -> str:
    return load_tokenizer("qwen3").decode(body["prompt"])


def test_only_the_allowed_tools_are_offered_and_callable(tmp_path, world_zip):
    script = [
        tool_call_text("filesystem_list_files", {"path": "/"}),  # offered to nobody here
        tool_call_text("filesystem_search_files", {"pattern": "*", "path": "/"}),
        "Done.",
    ]
    with ScriptedEngine(script) as eng:
        agent, _ = run_agent(
            HostEnv(tmp_path / "a", world_zip), tmp_path / "a" / "agent", "Go.",
            endpoint=eng.url, tools=ALLOW,
        )  # fmt: skip
        narrow = list(eng.requests)
    rec = agent.record
    assert rec.status == "complete" and rec.error_class is None, rec.error
    assert [c.status for c in rec.tool_call_records] == ["mcp_error", "ok"]
    prompt = _decoded_prompt(narrow[0])
    assert all(f'"name": "{n}"' in prompt for n in ALLOW)
    assert '"name": "filesystem_list_files"' not in prompt
    # the refusal names what is offered, so the policy can recover
    second = _decoded_prompt(narrow[1])
    assert "there is no tool named 'filesystem_list_files'" in second
    assert "Available tools: " + ", ".join(sorted(ALLOW)) in second

    # without the allowlist every tool the world lists is offered: a longer prompt
    with ScriptedEngine(["Done."]) as eng:
        run_agent(HostEnv(tmp_path / "b", world_zip), tmp_path / "b" / "agent", "Go.",
                  endpoint=eng.url)  # fmt: skip
        full = list(eng.requests)
    assert '"name": "filesystem_list_files"' in _decoded_prompt(full[0])
    assert len(narrow[0]["prompt"]) < len(full[0]["prompt"])


def test_a_tool_the_world_does_not_list_fails_the_trial_as_infrastructure(tmp_path, world_zip):
    with ScriptedEngine(["Done."]) as eng:
        agent, _ = run_agent(
            HostEnv(tmp_path, world_zip), tmp_path / "agent", "Go.",
            endpoint=eng.url, tools=["filesystem_read_text_file", "no_such_tool"],
        )  # fmt: skip
        asked = list(eng.requests)
    rec = agent.record
    assert rec.error_class == "tools_not_offered" and "no_such_tool" in rec.error
    assert not asked  # the model was never asked
    assert infra_kind("error", rec.error_class) == "sandbox"


def test_the_allowlist_reaches_the_agent_from_a_trial_and_a_recipe(tmp_path):
    from apexrl.train.recipe import AgentSection
    from apexrl.trial.config import TrialConfig
    from apexrl.trial.run import harbor_config

    cfg = TrialConfig(endpoint="http://127.0.0.1:9/v1", model="m", logs_dir=tmp_path / "t")
    task = tmp_path / "task"
    assert "tools" not in harbor_config(task, cfg).agent.kwargs  # unset: every tool
    narrow = cfg.model_copy(update={"tools": ALLOW})
    assert harbor_config(task, narrow).agent.kwargs["tools"] == ALLOW
    assert AgentSection(tools=ALLOW).tools == ALLOW
