"""`apexrl.agent:ApexAgent`, the Harbor agent: a world's MCP tools over TITO.

Harbor constructs it with the trial's logs dir and the agent kwargs:
  endpoint       engine base URL (OpenAI-compatible /v1/completions); else $APEXRL_ENDPOINT
  model          served model name (default: Harbor's model name, else the engine's first)
  tokenizer      tokenizer dir / tokenizer.json / "qwen3" / HF id (default: the model)
  chat_template  file or built-in name (default: the tokenizer's)
  budgets        dict of apexrl.agent.settings.AgentBudgets
  sampling       dict of apexrl.agent.settings.Sampling
  system_prompt  the system prompt text (default: apexrl.agent.loop.DEFAULT_SYSTEM_PROMPT)
  extra_prompt   text appended to the task instruction (the recipe's tool guidance)
  engine_retries, retry_base_delay_s, gateway_ready_timeout_s,
  reconnect_timeout_s (optional)

run(): finds the world's MCP gateway (`environment.gateway_url`, else the task's
MCP server config), waits until its tools answer, runs `AgentLoop`, then writes
into its logs dir: trajectory.json (ATIF with token ids and logprobs), tito.json
(messages + token stream + mask), apexrl_agent.json (status, timings, tool
outcomes), answer.txt; fills Harbor's AgentContext; and writes the final answer
to /logs/agent/answer.txt in the environment, where the verifier reads it.
Known secrets (apexrl.secrets) are redacted from tool results before the model
sees them and from everything written.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from apexrl.agent.loop import DEFAULT_SYSTEM_PROMPT, AgentLoop, make_redactor
from apexrl.agent.mcp_tools import GatewayNotReady, ToolBox, ToolsNotOffered
from apexrl.agent.offload import write_off_loop
from apexrl.agent.prompts import with_extra_prompt
from apexrl.agent.records import (
    AGENT_RECORD_FILE,
    ANSWER_NAME,
    ATIF_FILE,
    TITO_FILE,
    AgentRunRecord,
)
from apexrl.agent.settings import AgentBudgets, Sampling
from apexrl.engine.probe import probe_endpoint
from apexrl.errors import ApexError, UsageError

ENV_ANSWER_PATH = "/logs/agent/answer.txt"
DEFAULT_CONTEXT_WINDOW = 32768


def gateway_url_of(environment: Any, mcp_servers: list | None) -> str | None:
    url = getattr(environment, "gateway_url", None)
    if url:
        return str(url)
    for s in mcp_servers or []:
        if getattr(s, "url", None) and getattr(s, "transport", "") in (
            "streamable-http",
            "streamable_http",
            "http",
            "sse",
        ):
            return s.url
    return None


class ApexAgent(BaseAgent):
    capabilities = AgentCapabilities(atif=True, mcp_servers=True)

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        logger=None,
        mcp_servers=None,
        skills_dir: str | None = None,
        *,
        endpoint: str | None = None,
        model: str | None = None,
        tokenizer: str | None = None,
        chat_template: str | None = None,
        budgets: dict | AgentBudgets | None = None,
        sampling: dict | Sampling | None = None,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        extra_prompt: str | None = None,
        tools: list[str] | None = None,
        engine_retries: int = 2,
        retry_base_delay_s: float = 1.0,
        gateway_ready_timeout_s: float = 120.0,
        reconnect_timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir, model_name, logger, mcp_servers, skills_dir, **kwargs)
        self.endpoint = endpoint or os.environ.get("APEXRL_ENDPOINT")
        self.model = model or model_name
        self.tokenizer_spec = tokenizer
        self.chat_template_spec = chat_template
        self.budgets = (
            budgets if isinstance(budgets, AgentBudgets) else AgentBudgets(**(budgets or {}))
        )
        self.sampling = sampling if isinstance(sampling, Sampling) else Sampling(**(sampling or {}))
        self.system_prompt = system_prompt
        self.extra_prompt = extra_prompt
        self.allowed_tools = list(tools) if tools is not None else None
        self.engine_retries = int(engine_retries)
        self.retry_base_delay_s = float(retry_base_delay_s)
        self.gateway_ready_timeout_s = float(gateway_ready_timeout_s)
        self.reconnect_timeout_s = float(reconnect_timeout_s)
        self.record: AgentRunRecord | None = None

    @staticmethod
    def name() -> str:
        return "apexrl"

    def version(self) -> str | None:
        from apexrl import __version__

        return __version__

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        from apexrl.secrets import secret_values
        from apexrl.tito.client import EngineClient, RetryPolicy
        from apexrl.tito.session import TitoSession
        from apexrl.tito.template import resolve_template
        from apexrl.tito.tokenizer import load_tokenizer

        t0 = time.monotonic()
        redact = make_redactor(secret_values())
        rec = AgentRunRecord(model=self.model)
        self.record = rec
        loop: AgentLoop | None = None
        tools: ToolBox | None = None
        client = None
        try:
            if not self.endpoint:
                rec.error_class, rec.error = "no_endpoint", "no engine endpoint (pass endpoint=)"
                return
            url = gateway_url_of(environment, self.mcp_servers)
            if not url:
                rec.error_class = "no_gateway"
                rec.error = "the environment exposes no MCP gateway (gateway_url) and the task none"
                return
            client = EngineClient(
                self.endpoint,
                model=self.model,
                timeout_s=self.budgets.llm_timeout_s,
                retry=RetryPolicy(
                    max_retries=self.engine_retries,
                    base_delay_s=self.retry_base_delay_s,
                    max_delay_s=max(self.retry_base_delay_s * 8, 1.0),
                    rate_limit_delay_s=self.retry_base_delay_s * 30,
                ),
            )
            try:
                info = await asyncio.to_thread(
                    probe_endpoint, self.endpoint, model=self.model, timeout_s=30
                )
                served, mml = info.model, info.max_model_len
            except UsageError as e:  # the engine does not serve this model: not retried
                rec.status, rec.error_class, rec.error = "error", "llm_bad_request", str(e)
                return
            except ApexError:  # unreachable now: the first completion retries and classifies
                served, mml = None, None
            self.model = client.model = served or self.model
            rec.model = self.model
            spec = self.tokenizer_spec or self.model
            if not spec:
                rec.error_class, rec.error = "no_tokenizer", "pass tokenizer= (or model=)"
                return
            tok = load_tokenizer(spec)
            tname, template = resolve_template(self.chat_template_spec, tok.chat_template)
            ctx = self.budgets.context_window or mml or DEFAULT_CONTEXT_WINDOW
            if mml:  # the server's window wins: vLLM trims max_tokens silently past it
                ctx = min(ctx, mml)
            client.max_context = ctx
            tools = ToolBox(
                url, max_reply_bytes=self.budgets.tool_reply_max_bytes, allow=self.allowed_tools
            )
            g0 = time.monotonic()
            try:
                await tools.connect(ready_timeout_s=self.gateway_ready_timeout_s)
            except GatewayNotReady as e:
                rec.error_class, rec.error = "gateway_not_ready", redact(str(e))
                return
            except ToolsNotOffered as e:
                rec.error_class, rec.error = "tools_not_offered", redact(str(e))
                return
            rec.gateway_ready_s = time.monotonic() - g0
            session = TitoSession(
                tok, chat_template=template, template_name=tname, model=self.model
            )
            loop = AgentLoop(
                session=session,
                client=client,
                tools=tools,
                budgets=self.budgets,
                sampling=self.sampling,
                context_window=ctx,
                redact=redact,
                system_prompt=self.system_prompt,
                reconnect_timeout_s=self.reconnect_timeout_s,
            )
            loop.record.gateway_ready_s = rec.gateway_ready_s
            await loop.run(with_extra_prompt(instruction, self.extra_prompt))
        except asyncio.CancelledError:
            # Harbor cancels run() at the task's agent timeout (or on abort): keep what ran
            cur = loop.record if loop is not None else rec
            cur.status, cur.error_class = "agent_timeout", "cancelled"
            raise
        except Exception as e:  # setup failures (tokenizer, template): classified, not raised
            rec.error_class = rec.error_class or "setup"
            rec.error = redact(f"{type(e).__name__}: {e}")[:2000]
        finally:
            if loop is not None:
                rec = self.record = loop.record
            else:
                rec.duration_s = time.monotonic() - t0
            if tools is not None:
                await tools.close()
            if client is not None:
                await client.aclose()
            # serializing a long trajectory (tito.json, ATIF with every step's prompt ids)
            # takes long enough to stall other trials sharing this event loop: the
            # process's one record-writer thread does it (apexrl.agent.offload)
            await write_off_loop(self._write_outputs, rec, loop, redact)
            self._fill_context(context, rec, loop)
            await self._upload_answer(environment, rec.final_answer or "")

    # --- outputs ------------------------------------------------------------------------
    def _write_outputs(self, rec: AgentRunRecord, loop: AgentLoop | None, redact) -> None:
        from apexrl.artifacts.atomic import write_text_atomic

        d = Path(self.logs_dir)
        d.mkdir(parents=True, exist_ok=True)
        if loop is not None and loop.session.state.ids:
            tid = str(self.session_id or d.name)
            extra = {
                "status": rec.status,
                "error_class": rec.error_class,
                "mask": loop.session.state.mask.tolist(),
            }
            # the same bytes as to_trajectory(...).model_dump_json(), from the arrays
            tito_json = loop.session.trajectory_json(tid, **extra).decode()
            write_text_atomic(d / TITO_FILE, redact(tito_json))
            del tito_json
            traj = loop.session.to_trajectory(tid, **extra)
            atif = traj.to_atif(agent_name=self.name(), agent_version=self.version() or "0")
            agent_steps = [s for s in atif["steps"] if s.get("source") == "agent"]
            for srec, step in zip(rec.step_records, agent_steps, strict=False):
                calls = [c.model_dump() for c in rec.tool_call_records if c.step == srec.step]
                step.setdefault("extra", {})["apexrl"] = {
                    **srec.model_dump(exclude={"step"}),
                    "tool_calls": calls,
                }
            atif.setdefault("extra", {})["apexrl"] = rec.model_dump(
                exclude={"step_records", "tool_call_records"}
            )
            write_text_atomic(d / ATIF_FILE, redact(json.dumps(atif, ensure_ascii=False)))
        write_text_atomic(d / AGENT_RECORD_FILE, redact(rec.model_dump_json(indent=2)))
        write_text_atomic(d / ANSWER_NAME, redact(rec.final_answer or ""))

    def _fill_context(self, context: AgentContext, rec: AgentRunRecord, loop) -> None:
        context.n_input_tokens = rec.tokens_in
        context.n_output_tokens = rec.tokens_out
        context.n_cache_tokens = 0
        if loop is not None and loop.session.turn_refs:
            prompts, comps, lps = [], [], []
            st = loop.session.state
            ids = st.ids.tolist()  # one list: the per-turn prompts share its int objects
            for t in loop.session.turn_refs:
                if t.kind == "sampled":
                    prompts.append(ids[: t.start])
                    comps.append(ids[t.start : t.end])
                    lps.append(st.logprobs[t.start : t.end].tolist())
            context.rollout_details = [
                {"prompt_token_ids": prompts, "completion_token_ids": comps, "logprobs": lps}
            ]
        context.metadata = {
            **recipe_tito_fields(loop, rec),
            "apexrl": rec.model_dump(
                mode="json", exclude={"step_records", "tool_call_records", "final_answer"}
            )
            | {
                "trial_status": rec.trial_status,
                "tool_call_success_rate": rec.tool_call_success_rate,
            },
        }

    async def _upload_answer(self, environment: BaseEnvironment, answer: str) -> None:
        """Put the final answer where the verifier reads it (best effort, bounded)."""
        import contextlib

        with tempfile.TemporaryDirectory(prefix="apexrl-answer-") as tmp:
            p = Path(tmp) / ANSWER_NAME
            p.write_text(answer, encoding="utf-8")
            try:
                async with asyncio.timeout(60):
                    with contextlib.suppress(Exception):
                        await environment.exec("mkdir -p /logs/agent", timeout_sec=30)
                    await environment.upload_file(p, ENV_ANSWER_PATH)
            except Exception as e:  # the trial classifies a missing answer at grading
                self.logger.warning("could not write %s: %s", ENV_ANSWER_PATH, e)


# The keys the recipe's generator (TITOHarborGenerator) reads from Harbor's
# agent_result.metadata: the whole token stream, 1 for sampled tokens, their logprobs
# (0.0 elsewhere); the response starts at the first sampled token. Without them every
# trial is retried, then masked.
RECIPE_TITO_KEYS = ("tito_tokens", "tito_loss_mask", "tito_logprobs")


def recipe_tito_fields(loop, rec: AgentRunRecord) -> dict:
    """The recipe's TITO metadata (and its n_episodes / stop_reason) from the token state."""
    if loop is None or not len(loop.session.state):
        return {}
    st = loop.session.state
    out = {
        "tito_tokens": st.ids.tolist(),
        "tito_loss_mask": [int(m) for m in st.mask],
        "tito_logprobs": [
            float(x) if m else 0.0 for x, m in zip(st.logprobs, st.mask, strict=True)
        ],
        "n_episodes": rec.steps,
    }
    if rec.status == "length":  # a turn cut at its per-turn cap: the recipe rewards 0
        out["stop_reason"] = "length"
    return out
