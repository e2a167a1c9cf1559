"""Trajectory records: messages plus the token stream (ids, mask, logprobs) per turn.

A `TitoTrajectory` is what the agent writes for every rollout (one JSON object per
line in trajectories.jsonl). It exports to Harbor's ATIF (`to_atif`), putting each
agent step's prompt ids, completion ids and logprobs into `metrics`, and reads
back ATIF files that carry token ids (`from_atif`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from apexrl.tito.state import TokenState

TITO_SCHEMA_VERSION = "1"


class TitoTurn(BaseModel):
    """One segment of the token stream after the prompt."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["sampled", "observation"]
    token_ids: list[int]
    logprobs: list[float] | None = None  # sampled turns only, aligned with token_ids
    message_index: int | None = None  # index in `messages` of the message this turn produced
    n_messages: int = 1  # observations may carry several tool messages
    finish_reason: str | None = None

    @model_validator(mode="after")
    def _aligned(self) -> TitoTurn:
        if self.kind == "sampled":
            if self.logprobs is None or len(self.logprobs) != len(self.token_ids):
                raise ValueError(
                    f"sampled turn has {len(self.token_ids)} ids but "
                    f"{0 if self.logprobs is None else len(self.logprobs)} logprobs"
                )
        elif self.logprobs is not None:
            raise ValueError("observation turns carry no logprobs")
        return self


class TitoTrajectory(BaseModel):
    """A rollout as messages and as the exact token stream the engine saw."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = TITO_SCHEMA_VERSION
    trajectory_id: str
    model: str | None = None
    tokenizer: str | None = None
    chat_template: str | None = None  # name or path of the template used
    template_kwargs: dict[str, Any] = Field(default_factory=dict)
    tools: list[dict] | None = None
    messages: list[dict]
    prompt_ids: list[int]
    n_prompt_messages: int = 1  # messages[:n] rendered into prompt_ids
    turns: list[TitoTurn] = Field(default_factory=list)
    extra: dict[str, Any] | None = None

    # --- the token stream -------------------------------------------------------------
    def to_state(self) -> TokenState:
        st = TokenState()
        st.set_prompt(self.prompt_ids)
        for t in self.turns:
            if t.kind == "sampled":
                st.append_sampled(t.token_ids, t.logprobs)
            else:
                st.append_observation(t.token_ids)
        return st

    @property
    def ids(self) -> list[int]:
        out = list(self.prompt_ids)
        for t in self.turns:
            out.extend(t.token_ids)
        return out

    # --- ATIF ---------------------------------------------------------------------------
    def to_atif(self, *, agent_name: str = "apexrl", agent_version: str = "0") -> dict:
        """Harbor ATIF trajectory (validated with harbor's pydantic models)."""
        from harbor.models.trajectories import (
            Agent,
            Metrics,
            Observation,
            ObservationResult,
            Step,
            ToolCall,
            Trajectory,
        )

        steps: list[Step] = []
        msgs = self.messages
        for m in msgs[: self.n_prompt_messages]:
            src = "system" if m.get("role") == "system" else "user"
            steps.append(Step(step_id=len(steps) + 1, source=src, message=_text(m.get("content"))))
        stream = list(self.prompt_ids)
        i = 0
        turns = self.turns
        while i < len(turns):
            t = turns[i]
            if t.kind == "observation":  # observation with no agent step before it
                stream.extend(t.token_ids)
                i += 1
                continue
            m = msgs[t.message_index] if t.message_index is not None else {}
            calls = [
                ToolCall(
                    tool_call_id=c.get("id") or f"call_{k}",
                    function_name=c["function"]["name"],
                    arguments=_args(c["function"].get("arguments")),
                )
                for k, c in enumerate(m.get("tool_calls") or [])
            ]
            obs = None
            obs_extra: dict[str, Any] = {}
            prompt = list(stream)
            stream.extend(t.token_ids)
            if i + 1 < len(turns) and turns[i + 1].kind == "observation":
                o = turns[i + 1]
                start = o.message_index or 0
                results = [
                    ObservationResult(
                        source_call_id=r.get("tool_call_id"), content=_text(r.get("content"))
                    )
                    for r in msgs[start : start + o.n_messages]
                ]
                obs = Observation(results=results) if results else None
                obs_extra = {"observation_token_ids": o.token_ids}
                stream.extend(o.token_ids)
                i += 1
            steps.append(
                Step(
                    step_id=len(steps) + 1,
                    source="agent",
                    model_name=self.model,
                    message=_text(m.get("content")),
                    reasoning_content=m.get("reasoning_content"),
                    tool_calls=calls or None,
                    observation=obs,
                    metrics=Metrics(
                        prompt_tokens=len(prompt),
                        completion_tokens=len(t.token_ids),
                        prompt_token_ids=prompt,
                        completion_token_ids=t.token_ids,
                        logprobs=t.logprobs,
                    ),
                    extra={"finish_reason": t.finish_reason, **obs_extra},
                )
            )
            i += 1
        traj = Trajectory(
            session_id=self.trajectory_id,
            trajectory_id=self.trajectory_id,
            agent=Agent(
                name=agent_name,
                version=agent_version,
                model_name=self.model,
                tool_definitions=self.tools,
            ),
            steps=steps,
            extra={
                "tito": {
                    "tokenizer": self.tokenizer,
                    "chat_template": self.chat_template,
                    "template_kwargs": self.template_kwargs,
                    "messages": self.messages,
                    "n_prompt_messages": self.n_prompt_messages,
                }
            },
        )
        return traj.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_atif(cls, data: dict) -> TitoTrajectory:
        """Rebuild the token stream from an ATIF trajectory whose agent steps carry
        `metrics.prompt_token_ids` and `completion_token_ids`. Observation ids are
        what the next prompt adds after the previous prompt + completion; when the
        next prompt does not extend them, `extra.prefix_breaks` lists the steps."""
        tito = (data.get("extra") or {}).get("tito") or {}
        agent_steps = [s for s in data.get("steps", []) if s.get("source") == "agent"]
        agent_steps = [s for s in agent_steps if (s.get("metrics") or {}).get("prompt_token_ids")]
        if not agent_steps:
            raise ValueError("ATIF trajectory has no agent step with metrics.prompt_token_ids")
        messages = tito.get("messages") or _messages_from_atif(data)
        prompt = list(agent_steps[0]["metrics"]["prompt_token_ids"])
        turns: list[TitoTurn] = []
        stream = list(prompt)
        breaks: list[int] = []
        for k, s in enumerate(agent_steps):
            mt = s["metrics"]
            p = mt["prompt_token_ids"]
            if k > 0:
                if p[: len(stream)] != stream:
                    breaks.append(s.get("step_id", k))
                    break
                obs = p[len(stream) :]
                if obs:
                    turns.append(TitoTurn(kind="observation", token_ids=obs))
                    stream.extend(obs)
            comp = list(mt.get("completion_token_ids") or [])
            lps = mt.get("logprobs")
            if lps is None or len(lps) != len(comp):
                lps = [0.0] * len(comp)
            turns.append(
                TitoTurn(
                    kind="sampled",
                    token_ids=comp,
                    logprobs=lps,
                    finish_reason=(s.get("extra") or {}).get("finish_reason"),
                )
            )
            stream.extend(comp)
            tail = (s.get("extra") or {}).get("observation_token_ids")
            if k == len(agent_steps) - 1 and tail:
                turns.append(TitoTurn(kind="observation", token_ids=list(tail)))
        agent = data.get("agent") or {}
        return cls(
            trajectory_id=str(data.get("trajectory_id") or data.get("session_id") or "atif"),
            model=agent.get("model_name"),
            tokenizer=tito.get("tokenizer"),
            chat_template=tito.get("chat_template"),
            template_kwargs=tito.get("template_kwargs") or {},
            tools=agent.get("tool_definitions"),
            messages=messages,
            prompt_ids=prompt,
            n_prompt_messages=tito.get("n_prompt_messages") or 1,
            turns=turns,
            extra={"source": "atif", "prefix_breaks": breaks} if breaks else {"source": "atif"},
        )


def last_token_record(path) -> dict | None:
    """The final token record in a file the agent (or a sandbox) wrote: one JSON object, or
    JSONL whose last trajectory line is the final record. Read without following links
    (RefusedPath for a link or a non-regular file); None when the file is missing or holds
    no record. Validating it is the caller's (TitoTrajectory.model_validate)."""
    from apexrl.artifacts.nofollow import read_regular

    try:
        text = read_regular(path).decode("utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    lines = [text] if text.startswith("{") and "\n{" not in text else text.splitlines()
    for line in reversed(lines):
        line = line.strip()
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "prompt_ids" in data and "turns" in data:
            return data
    return None


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _args(arguments: Any) -> dict:
    if isinstance(arguments, dict):
        return arguments
    try:
        val = json.loads(arguments or "{}")
    except ValueError:
        return {"_raw": arguments}
    return val if isinstance(val, dict) else {"_value": val}


def _messages_from_atif(data: dict) -> list[dict]:
    msgs: list[dict] = []
    for s in data.get("steps", []):
        src = s.get("source")
        if src in ("system", "user"):
            msgs.append({"role": src, "content": _text(s.get("message"))})
            continue
        m: dict[str, Any] = {"role": "assistant", "content": _text(s.get("message"))}
        if s.get("reasoning_content") is not None:
            m["reasoning_content"] = s["reasoning_content"]
        if s.get("tool_calls"):
            m["tool_calls"] = [
                {
                    "id": c["tool_call_id"],
                    "type": "function",
                    "function": {
                        "name": c["function_name"],
                        "arguments": json.dumps(c.get("arguments") or {}, ensure_ascii=False),
                    },
                }
                for c in s["tool_calls"]
            ]
        msgs.append(m)
        for r in (s.get("observation") or {}).get("results") or []:
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": r.get("source_call_id"),
                    "content": _text(r.get("content")),
                }
            )
    return msgs
