"""The agent loop: MCP tools over token-in/token-out, with budgets and classified failures.

One `AgentLoop` is one rollout. It renders the prompt once, then only appends
tokens: sampled ids (mask 1, logprobs) from `/v1/completions` and observation ids
(mask 0) from fixed-base tokenization of tool results. No text goes to the engine.

Budgets (apexrl.agent.settings.AgentBudgets): max steps, agent timeout, per-tool and
per-LLM timeouts, the context window; tool results are cut to a head (2/3) and a
tail (1/3) with a marker; an unparsed tool call is answered with a repair request
at most `max_tool_call_repairs` times (outcome policy `recipe`: counted over the
trajectory, and the next unparsed reply is taken as the final answer; `strict`: in a
row, then the trial ends as an error). Once the context left falls below
`nudge_ratio`, the model is told to wrap up: `nudge = "recipe"` appends the note to
the last tool result of every step from then on (the recipe's training behaviour),
`"once"` sends one user message once, `"off"` never (the recipe's eval). At max_steps
the policy `recipe` keeps the last reply's text as the answer, to be graded.

Every ending is classified in `AgentRunRecord.status` / `error_class`:
  complete         a final answer (a turn without tool calls)
  agent_timeout    the agent's wall-clock budget ran out
  context_length   the context window is full (or the engine said so)
  length           a turn hit the per-turn token cap (sampling.max_tokens)
  max_steps        the step budget ran out
  error            llm_bad_request / llm_timeout / llm_rate_limit / llm_transient /
                   llm_auth (after the client's retries), fatal_mcp_error (after one
                   reconnect), unparsed_tool_call (after the repairs), internal
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from apexrl.agent.mcp_tools import ToolBox, ToolOutcome
from apexrl.agent.records import AgentRunRecord, StepRecord, ToolCallRecord
from apexrl.agent.runtime import tune_gc_once
from apexrl.agent.settings import AgentBudgets, Sampling
from apexrl.errors import AuthError
from apexrl.tito.client import EngineClient, EngineError
from apexrl.tito.parsing import ToolCall
from apexrl.tito.session import TitoSession

DEFAULT_SYSTEM_PROMPT = (
    "You are an expert professional working inside a company's workspace. Use the tools "
    "to read and change its files, documents, spreadsheets, slides, PDFs, mail, chat and "
    "calendar. Call tools as needed; when the task is done, reply with your final answer "
    "and no tool call."
)

NUDGE_TEXT = (
    "Note: only about {pct}% of your context window is left ({left} tokens). Wrap up now: "
    "finish with what you have and give your final answer in your next message."
)

REPAIR_TEXT = (
    "Your last tool call could not be parsed ({errors}). Write each call as "
    '<tool_call>\n{{"name": "<tool name>", "arguments": {{...}}}}\n</tool_call> '
    "with valid JSON, or reply without a tool call to give your final answer."
)
# The same request for models whose chat template teaches XML tool calls (qwen3_xml).
REPAIR_TEXT_XML = (
    "Your last tool call could not be parsed ({errors}). Write each call as "
    "<tool_call>\n<function=TOOL_NAME>\n<parameter=ARGUMENT>\nvalue\n</parameter>\n"
    "</function>\n</tool_call>, or reply without a tool call to give your final answer."
)


def truncate_result(text: str, max_chars: int) -> tuple[str, bool]:
    """Keep the head (2/3) and the tail (1/3) of a long tool result, with a marker."""
    if max_chars <= 0 or len(text) <= max_chars:
        return text, False
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    marker = (
        f"\n\n[... {omitted} characters omitted: the result was {len(text)} characters ...]\n\n"
    )
    return text[:head] + marker + text[len(text) - tail :], True


def make_redactor(secrets: list[str]) -> Callable[[str], str]:
    secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def redact(text: str) -> str:
        for s in secrets:
            if s in text:
                text = text.replace(s, "[REDACTED]")
        return text

    return redact


class AgentLoop:
    def __init__(
        self,
        *,
        session: TitoSession,
        client: EngineClient,
        tools: ToolBox,
        budgets: AgentBudgets,
        sampling: Sampling,
        context_window: int,
        redact: Callable[[str], str] = lambda s: s,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        reconnect_timeout_s: float = 30.0,
    ) -> None:
        self.session = session
        self.client = client
        self.tools = tools
        self.budgets = budgets
        self.sampling = sampling
        self.ctx = context_window
        self.redact = redact
        self.system_prompt = system_prompt
        self.reconnect_timeout_s = reconnect_timeout_s
        self.record = AgentRunRecord(model=session.model, context_window=context_window)
        self._nudged = False
        from apexrl.agent.outcomes import outcome_policy

        self.policy = outcome_policy(budgets.outcome_policy)

    # --- the loop ---------------------------------------------------------------------
    async def run(self, instruction: str) -> AgentRunRecord:
        tune_gc_once()  # APEXRL_ROLLOUT_GC (apexrl.agent.runtime): once per process
        t0 = time.monotonic()
        rec = self.record
        try:
            async with asyncio.timeout(self.budgets.agent_timeout_s) as scope:
                try:
                    await self._loop(instruction)
                except TimeoutError:
                    if not scope.expired():
                        raise
        except TimeoutError:
            self._end("agent_timeout", "agent_timeout", f"{self.budgets.agent_timeout_s:g}s")
        except EngineError as e:
            if e.kind == "context_window_exceeded":
                self._end("context_length", "context_window_exceeded", str(e))
            else:
                self._end("error", f"llm_{e.kind}", str(e))
        except AuthError as e:
            self._end("error", "llm_auth", str(e))
        except Exception as e:  # a bug or an unexpected failure: classified, never raised
            self._end("error", "internal", f"{type(e).__name__}: {e}")
        finally:
            rec.duration_s = time.monotonic() - t0
            rec.stream_tokens = len(self.session.state)
            rec.reconnects = self.tools.reconnects
        return rec

    def _end(self, status: str, error_class: str | None, error: str | None = None) -> None:
        self.record.status = status  # type: ignore[assignment]
        self.record.error_class = error_class
        self.record.error = self.redact(error)[:2000] if error else None

    async def _loop(self, instruction: str) -> None:
        b, rec, sess = self.budgets, self.record, self.session
        messages = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": self.redact(instruction)})
        # encoding the prompt (tools included) runs in a worker thread, like every
        # tokenization below: hundreds of trials may share this event loop
        await sess.astart(messages, tools=self.tools.tools or None)
        stops = sorted(sess.stop_ids)
        repairs_in_a_row = 0
        last_content = ""
        for step in range(b.max_steps):
            left = self.ctx - len(sess.state)
            if left < 1:
                self._end("context_length", "context_window_full")
                return
            max_tokens = (
                left if self.sampling.max_tokens is None else min(self.sampling.max_tokens, left)
            )
            prompt_len = len(sess.state)
            t = time.monotonic()
            c = await self.client.acomplete(
                sess.state.ids,
                max_tokens=max_tokens,
                temperature=self.sampling.temperature,
                top_p=self.sampling.top_p,
                extra={"top_k": self.sampling.top_k, "min_p": self.sampling.min_p},
                seed=None if self.sampling.seed is None else self.sampling.seed + step,
                stop_token_ids=stops,
                logprobs=0,
                # vLLM echoes the whole prompt (prompt_token_ids): dropped unparsed, it
                # costs the event loop nothing (parsed: ~5 ms a step at 100k tokens)
                keep_prompt_echo=False,
            )
            llm_s = time.monotonic() - t
            rec.llm_s += llm_s
            # keep only what the step needs, nothing of the response stays alive while
            # tools run
            sampled, finish, window_full = c.token_ids, c.finish_reason, c.window_full
            lps = c.logprobs if c.logprobs is not None else [0.0] * len(sampled)
            del c
            parsed = sess.add_completion(sampled, lps, finish_reason=finish)
            srec = StepRecord(
                step=step,
                prompt_tokens=prompt_len,
                completion_tokens=len(sampled),
                finish_reason=finish,
                llm_s=llm_s,
                n_tool_calls=len(parsed.tool_calls),
                parse_errors=[f"{e.kind}: {e.message}" for e in parsed.errors],
            )
            rec.step_records.append(srec)
            rec.steps = step + 1
            rec.tokens_in += prompt_len
            rec.tokens_out += len(sampled)
            del sampled, lps

            if finish == "length":
                if len(sess.state) >= self.ctx or window_full:  # vLLM trimmed max_tokens
                    self._end("context_length", "context_window_full")
                else:
                    self._end("length", "max_tokens_per_turn", f"turn cut at {max_tokens} tokens")
                return

            last_content = parsed.content or ""
            if parsed.errors:
                repairs_in_a_row += 1
                used = rec.repairs if self.policy.repairs_per_trajectory else repairs_in_a_row - 1
                if used >= b.max_tool_call_repairs:
                    if self.policy.repairs_then_final:  # the recipe: this reply is the answer
                        rec.final_answer = self.redact(last_content.strip())
                        rec.repairs_exhausted = True
                        self._end("complete", None)
                        return
                    self._end("error", "unparsed_tool_call", "; ".join(srec.parse_errors))
                    return
                rec.repairs += 1
                srec.repair = True
                tpl = REPAIR_TEXT_XML if sess.tool_format == "qwen3_xml" else REPAIR_TEXT
                text = tpl.format(errors="; ".join(srec.parse_errors)[:500])
                if not await self._observe(srec, [{"role": "user", "content": text}]):
                    return
                continue
            repairs_in_a_row = 0

            if not parsed.tool_calls:
                rec.final_answer = self.redact(parsed.content.strip())
                self._end("complete", None)
                return

            t = time.monotonic()
            results = []
            for call in parsed.tool_calls:
                outcome, trec = await self._call_tool(step, call)
                rec.tool_call_records.append(trec)
                rec.tool_calls += 1
                rec.tool_outcomes[outcome.status] = rec.tool_outcomes.get(outcome.status, 0) + 1
                if outcome.status == "fatal_mcp_error":
                    srec.tools_s = time.monotonic() - t
                    rec.tools_s += srec.tools_s
                    self._end("error", "fatal_mcp_error", outcome.error or outcome.text)
                    return
                text, cut = truncate_result(self.redact(outcome.text), b.tool_result_max_chars)
                trec.truncated = cut
                results.append(
                    {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}
                )
            srec.tools_s = time.monotonic() - t
            rec.tools_s += srec.tools_s
            if not await self._observe(srec, results):
                return
        if self.policy.grade_at_max_steps:  # graded: the last reply's text is the answer
            rec.final_answer = self.redact(last_content.strip())
        self._end("max_steps", "max_steps", f"{b.max_steps} steps")

    async def _observe(self, srec: StepRecord, msgs: list[dict]) -> bool:
        """Append observation tokens, with the wrap-up nudge when the context runs low
        (budgets.nudge: recipe = appended to the last result of every such step,
        once = one user message, off = never)."""
        sess = self.session
        t = time.monotonic()
        mode = self.budgets.nudge
        # tokenized once, the encode in a worker thread (the tokenizer releases the GIL;
        # the event loop goes on with other trials); again only when the nudge changes
        # the messages
        ids = await sess.atokenize_observations(msgs)
        if mode != "off":
            left_after = self.ctx - len(sess.state) - len(ids)
            low = left_after < self.budgets.nudge_ratio * self.ctx
            pct = max(0, round(100 * left_after / self.ctx))
            note = NUDGE_TEXT.format(pct=pct, left=max(0, left_after))
            if low and mode == "recipe":
                last = dict(msgs[-1])
                last["content"] = f"{last.get('content') or ''}\n\n{note}"
                msgs = [*msgs[:-1], last]
                ids = await sess.atokenize_observations(msgs)
                srec.nudge = True
                if self.record.nudge_step is None:
                    self.record.nudge_step = srec.step
            elif low and mode == "once" and not self._nudged:
                self._nudged = True
                srec.nudge = True
                self.record.nudge_step = srec.step
                msgs = [*msgs, {"role": "user", "content": note}]
                ids = await sess.atokenize_observations(msgs)
        ids = sess.add_observations(msgs, ids=ids)
        srec.observation_tokens = len(ids)
        srec.tokenize_s = time.monotonic() - t
        if len(sess.state) >= self.ctx:
            self._end("context_length", "context_window_full")
            return False
        return True

    async def _call_tool(self, step: int, call: ToolCall) -> tuple[ToolOutcome, ToolCallRecord]:
        timeout = self.budgets.tool_timeout_s
        outcome = await self.tools.call(call.name, call.arguments, timeout_s=timeout)
        reconnected = False
        if outcome.status == "fatal_mcp_error":
            reconnected = True
            try:
                await self.tools.reconnect(ready_timeout_s=self.reconnect_timeout_s)
            except Exception as e:  # the gateway stays down
                outcome.error = f"{outcome.error}; reconnect failed: {e}"
            else:
                outcome = await self.tools.call(call.name, call.arguments, timeout_s=timeout)
        rec = ToolCallRecord(
            step=step,
            call_id=call.id,
            name=call.name,
            status=outcome.status,
            duration_s=outcome.duration_s,
            chars=len(outcome.text),
            reconnected=reconnected,
            error=self.redact(outcome.error)[:500] if outcome.error else None,
        )
        return outcome, rec
