"""TITO consistency checks behind `apexrl tito verify`.

template  the chat-template prefix property over built-in conversations, plus the
          fixed-base incremental stream against one full render
replay    recorded trajectories: token stream vs a full render (and a decode/encode
          round trip of the sampled turns when they differ)
live      multi-turn conversations through a running engine: each turn's prompt +
          response is a prefix of the next prompt; engine prompt logprobs of the
          final sequence vs the sampled logprobs
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from apexrl.tito import sampling
from apexrl.tito.observation import ObservationTokenizer, TemplateNotPrefixPreserving
from apexrl.tito.records import CONTEXT_TOKENS, Cause, Divergence, TitoFinding
from apexrl.tito.state import TokenState
from apexrl.tito.suite import Case
from apexrl.tito.tokenizer import Tokenizer
from apexrl.tito.trajectory import TitoTrajectory

# --- divergence analysis -------------------------------------------------------------


def first_mismatch(a: Sequence[int], b: Sequence[int]) -> int | None:
    """None when `a` is a token prefix of `b`; else the first index where they differ
    (len(b) when `b` is a proper prefix of `a`)."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return None if len(a) <= len(b) else n
    lo, hi = 0, n  # binary search on prefix equality: O(n) compares, few slices
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    for i in range(lo, hi):
        if a[i] != b[i]:
            return i
    return n


def _ctx(tok: Tokenizer, ids: Sequence[int], i: int, before: int = CONTEXT_TOKENS) -> str:
    lo = max(0, i - before)
    return tok.decode(list(ids[lo:i])) + "⟦" + tok.decode(list(ids[i : i + CONTEXT_TOKENS])) + "⟧"


def _nows(s: str) -> str:
    return re.sub(r"\s+", "", s)


def _in_tool_call(prefix_text: str) -> bool:
    return prefix_text.rfind("<tool_call>") > prefix_text.rfind("</tool_call>")


def _tool_block(text: str, pos: int) -> Any:
    start = text.rfind("<tool_call>", 0, pos + 1)
    end = text.find("</tool_call>", pos)
    if start < 0 or end < 0:
        return None
    body = text[start + len("<tool_call>") : end].strip()
    try:
        return json.loads(body)
    except ValueError:
        return None


def classify(
    tok: Tokenizer,
    a: Sequence[int],
    b: Sequence[int],
    i: int,
    *,
    stop_ids: set[int],
    a_end: int | None = None,
    b_end: int | None = None,
) -> Cause:
    """Why stream `a` and stream `b` differ at token `i` (a_end/b_end bound the region)."""
    a_end = len(a) if a_end is None else a_end
    b_end = len(b) if b_end is None else b_end
    ra, rb = list(a[i:a_end]), list(b[i:b_end])
    ta = tok.decode(ra[:256])
    tb = tok.decode(rb[:256])
    prev = a[i - 1] if i > 0 else None
    # same text, different ids: decode -> encode does not give back the sampled ids
    if ra and rb and ta[:64] == tb[:64] and tok.decode(ra) == tok.decode(rb):
        return "retokenization"
    # stop-token overlap: a newline after the stop token, or a duplicated stop token
    if prev in stop_ids or (ra and ra[0] in stop_ids) or (rb and rb[0] in stop_ids):
        if ra[:1] and rb[1:2] == ra[:1] and rb[0] in stop_ids:
            return "stop_token_overlap"
        if rb[:1] and ra[1:2] == rb[:1] and ra[0] in stop_ids:
            return "stop_token_overlap"
        if prev in stop_ids and (
            ta.strip() == "" or tb.strip() == "" or ta.lstrip() == tb.lstrip()
        ):
            return "stop_token_overlap"
    # reasoning pruned: a think block on one side only
    tags = ("<think>", "</think>")
    if ta.lstrip().startswith(tags) != tb.lstrip().startswith(tags):
        return "reasoning_pruned"
    for tag in tags:
        if (tag in ta[:400]) != (tag in tb[:400]):
            return "reasoning_pruned"
    # tool arguments re-serialized
    pre_a = tok.decode(list(a[max(0, i - 512) : i]))
    if _in_tool_call(pre_a):
        full_a = pre_a + tok.decode(ra[:2048])
        full_b = pre_a + tok.decode(rb[:2048])
        ja, jb = _tool_block(full_a, len(pre_a)), _tool_block(full_b, len(pre_a))
        if ja is not None and ja == jb:
            return "tool_argument_reserialization"
    # whitespace only
    na, nb = _nows(ta), _nows(tb)
    k = min(len(na), len(nb))
    # (windows are token-bounded: a few shifted tokens change their lengths a little)
    if na[:k] == nb[:k] and abs(len(na) - len(nb)) <= 64 and (k > 0 or not (na or nb)):
        return "whitespace"
    return "other"


def diverge(
    tok: Tokenizer, a: Sequence[int], b: Sequence[int], i: int, stop_ids: set[int], step=None
) -> Divergence:
    return Divergence(
        index=i,
        cause=classify(tok, a, b, i, stop_ids=stop_ids),
        expected=_ctx(tok, a, i),
        actual=_ctx(tok, b, i),
        step=step,
    )


# --- template mode -------------------------------------------------------------------


def _render(tok: Tokenizer, src: str, msgs, tools, kwargs, gen: bool) -> list[int]:
    text = tok.apply_chat_template(
        msgs, tools=tools, add_generation_prompt=gen, chat_template=src, **kwargs
    )
    return tok.encode(text)


def check_case(tok: Tokenizer, src: str, case: Case) -> TitoFinding:
    msgs, tools, kw = case.messages, case.tools, case.kwargs
    obs = ObservationTokenizer(tok, chat_template=src, template_kwargs=kw)
    stop_ids = obs.stop_ids
    assistants = [k for k, m in enumerate(msgs) if m.get("role") == "assistant"]
    chain: list[tuple[str, list[int]]] = []
    for k in assistants:
        chain.append((f"prompt before message {k}", _render(tok, src, msgs[:k], tools, kw, True)))
        chain.append((f"after message {k}", _render(tok, src, msgs[: k + 1], tools, kw, False)))
    if not assistants or assistants[-1] != len(msgs) - 1:
        chain.append(("full conversation", _render(tok, src, msgs, tools, kw, True)))
    f = TitoFinding(mode="template", case=case.name, ok=True, status="pass")
    f.n_tokens = len(chain[-1][1])
    f.n_turns = len(assistants)
    for (na, a), (nb, b) in zip(chain, chain[1:], strict=False):
        i = first_mismatch(a, b)
        if i is not None:
            d = diverge(tok, a, b, i, stop_ids, step=f"{na} -> {nb}")
            return _fail(f, [d], f"render '{na}' is not a token prefix of render '{nb}'")
    # Incremental TITO stream (generated ids + fixed-base observations) vs one full render.
    st = TokenState()
    renders = dict(chain)
    try:
        for n, k in enumerate(assistants):
            p = renders[f"prompt before message {k}"]
            if n == 0:
                st.set_prompt(p)
            elif len(st) < len(p):
                group = msgs[assistants[n - 1] + 1 : k]
                st.append_observation(obs.tokenize(group, last_token=st.last_token))
            after = renders[f"after message {k}"]
            gen = _generated(after[len(p) :], stop_ids)
            st.append_sampled(gen, [0.0] * len(gen))
        if not assistants:
            st.set_prompt(chain[-1][1])
        elif assistants[-1] != len(msgs) - 1:
            group = msgs[assistants[-1] + 1 :]
            st.append_observation(obs.tokenize(group, last_token=st.last_token))
    except TemplateNotPrefixPreserving as e:
        return _fail(f, [], str(e), status="error")
    full = chain[-1][1]
    i = first_mismatch(st.ids, full)
    if i is not None or not _tail_is_space(tok, full[len(st.ids) :]):
        i = len(st.ids) if i is None else i
        d = diverge(tok, st.ids, full, i, stop_ids, step="incremental stream -> full render")
        return _fail(f, [d], "the fixed-base incremental stream differs from the full render")
    return f


def _generated(ids: list[int], stop_ids: set[int]) -> list[int]:
    """What the model emitted for a rendered assistant turn: up to its stop token."""
    for j in range(len(ids) - 1, -1, -1):
        if ids[j] in stop_ids:
            return ids[: j + 1]
    return ids


def _tail_is_space(tok: Tokenizer, ids: Sequence[int]) -> bool:
    return not ids or tok.decode(list(ids)).strip() == ""


def _fail(
    f: TitoFinding, divs: list[Divergence], message: str, status: str = "mismatch"
) -> TitoFinding:
    f.ok = False
    f.status = status  # type: ignore[assignment]
    f.divergences = divs
    f.first_divergence = divs[0] if divs else None
    f.causes = sorted({d.cause for d in divs})
    f.message = message
    return f


def verify_template(tok: Tokenizer, src: str, cases: Iterable[Case]) -> list[TitoFinding]:
    return [check_case(tok, src, c) for c in cases]


# --- replay mode ---------------------------------------------------------------------


def load_trajectories(
    path: str, *, name: str | None = None
) -> Iterable[tuple[str, TitoTrajectory | Exception]]:
    """Yield (where, trajectory) from JSONL of TitoTrajectory or ATIF objects, or one
    ATIF/apexrl JSON document. Bad records yield (where, exception). `name` is what
    `where` calls the file (stdin's temp copy is "stdin")."""
    import orjson

    with open(path, "rb") as fh:
        data = fh.read()
    path = name or path
    stripped = data.lstrip()
    docs: list[tuple[str, Any]] = []
    if stripped.startswith(b"{") and b"\n{" not in stripped.strip():
        try:
            docs = [(path, orjson.loads(data))]
        except orjson.JSONDecodeError as e:
            from apexrl.errors import BadRecordError

            raise BadRecordError(
                f"{path}:{e.lineno}",
                f"not JSON (column {e.colno}): {e.msg}",
                hint="pass JSONL of apexrl trajectories (one object per line) or one ATIF JSON",
            ) from None
    else:
        for n, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                docs.append((f"{path}:{n}", orjson.loads(line)))
            except orjson.JSONDecodeError as e:
                docs.append((f"{path}:{n}", ValueError(f"not JSON: {e}")))
    for where, obj in docs:
        if isinstance(obj, Exception):
            yield where, obj
            continue
        try:
            if isinstance(obj, dict) and str(obj.get("schema_version", "")).startswith("ATIF"):
                yield where, TitoTrajectory.from_atif(obj)
            else:
                yield where, TitoTrajectory.model_validate(obj)
        except Exception as e:  # pydantic ValidationError or a bad ATIF
            yield where, e


def replay_one(
    tok: Tokenizer, src: str, traj: TitoTrajectory, *, full_ids: list[int] | None = None
) -> TitoFinding:
    stop_ids = _stop_ids(tok)
    stream = traj.ids
    f = TitoFinding(mode="replay", case=traj.trajectory_id, ok=True, status="pass")
    f.n_tokens = len(stream)
    f.n_turns = sum(1 for t in traj.turns if t.kind == "sampled")
    try:
        traj.to_state()
    except ValueError as e:
        return _fail(f, [], f"token state invariant broken: {e}", status="error")
    breaks = (traj.extra or {}).get("prefix_breaks")
    if full_ids is None:
        full_ids = tok.encode(render_trajectory(tok, src, traj))
    if stream == full_ids or (
        stream == full_ids[: len(stream)] and _tail_is_space(tok, full_ids[len(stream) :])
    ):
        if breaks:
            return _fail(f, [], f"engine prompts stop extending the stream at steps {breaks}")
        return f
    divs = _drift_regions(tok, stream, full_ids, stop_ids)
    # Sampled turns that do not survive decode -> encode.
    pos = len(traj.prompt_ids)
    for t in traj.turns:
        if t.kind == "sampled" and t.token_ids:
            rt = tok.encode(tok.decode(t.token_ids))
            if rt != t.token_ids:
                for d in divs:
                    if pos <= d.index < pos + len(t.token_ids) and d.cause == "other":
                        d.cause = "retokenization"
        pos += len(t.token_ids)
    if not divs:
        return f
    f.drift_tokens = sum(d.length for d in divs)
    f.drift_rate = f.drift_tokens / max(1, len(stream))
    msg = f"{len(divs)} drift region(s) between the token stream and a full render"
    if breaks:
        msg += f"; engine prompts stop extending the stream at steps {breaks}"
    return _fail(f, divs[:20], msg)


def _drift_regions(tok, stream, full, stop_ids) -> list[Divergence]:
    sm = difflib.SequenceMatcher(None, stream, full, autojunk=False)
    out: list[Divergence] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        if op == "insert" and i1 == len(stream) and _tail_is_space(tok, full[j1:j2]):
            continue  # the template's newline after the final stop token
        cause = _classify_shifted(tok, stream, full, i1, i2, j1, j2, stop_ids)
        out.append(
            Divergence(
                index=i1,
                cause=cause,
                expected=_ctx(tok, stream, i1),
                actual=_ctx(tok, full, j1),
                length=max(i2 - i1, 1),
            )
        )
    return out


def _classify_shifted(tok, a, b, i1, i2, j1, j2, stop_ids) -> Cause:
    # Align the two regions at a common index by building local sequences.
    ctx = list(a[max(0, i1 - 64) : i1])
    la = ctx + list(a[i1 : i2 + 64])
    lb = ctx + list(b[j1 : j2 + 64])
    return classify(tok, la, lb, len(ctx), stop_ids=stop_ids)


def render_trajectory(tok: Tokenizer, src: str, traj: TitoTrajectory) -> str:
    msgs = traj.messages
    gen = bool(msgs) and msgs[-1].get("role") != "assistant"
    return tok.apply_chat_template(
        msgs,
        tools=traj.tools,
        add_generation_prompt=gen,
        chat_template=src,
        **traj.template_kwargs,
    )


def _stop_ids(tok: Tokenizer) -> set[int]:
    from apexrl.tito.observation import stop_token_ids

    return stop_token_ids(tok)


# --- live mode -----------------------------------------------------------------------

LIVE_PROMPTS = (
    "Read report.txt and tell me the revenue.",
    "Search the mail for the termination notice and summarise it.",
    "Compare memo_a.md with memo_b.md.",
    "List the spreadsheets and open the largest.",
)


def verify_live(
    tok: Tokenizer,
    src: str,
    client,
    *,
    template_name: str | None = None,
    conversations: int = 2,
    turns: int = 3,
    max_tokens: int = 24,
    temperature: float = sampling.TEMPERATURE,
    seed: int = 0,
    logprob_tol: float = 0.05,
    template_kwargs: dict | None = None,
) -> list[TitoFinding]:
    from apexrl.tito.session import TitoSession
    from apexrl.tito.suite import TOOLS

    out: list[TitoFinding] = []
    for c in range(conversations):
        sess = TitoSession(
            tok, chat_template=src, template_name=template_name, template_kwargs=template_kwargs
        )
        sess.start(
            [
                {"role": "system", "content": "You are an analyst. Use the tools."},
                {"role": "user", "content": LIVE_PROMPTS[c % len(LIVE_PROMPTS)]},
            ],
            tools=TOOLS,
        )
        f = TitoFinding(
            mode="live", case=f"conversation-{c}", ok=True, status="pass", n_turns=turns
        )
        divs: list[Divergence] = []
        prev: list[int] | None = None
        stop = sorted(sess.stop_ids)
        for t in range(turns):
            prompt = list(sess.state.ids)
            if prev is not None:
                i = first_mismatch(prev, prompt)
                if i is not None:
                    divs.append(diverge(tok, prev, prompt, i, sess.stop_ids, step=f"turn {t}"))
            comp = client.complete(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed + 1000 * c + t,
                stop_token_ids=stop,
                logprobs=0,
            )
            if comp.prompt_token_ids is not None and list(comp.prompt_token_ids) != prompt:
                i = first_mismatch(prompt, list(comp.prompt_token_ids)) or 0
                divs.append(
                    diverge(
                        tok,
                        prompt,
                        list(comp.prompt_token_ids),
                        i,
                        sess.stop_ids,
                        step=f"turn {t} echo",
                    )
                )
            if comp.logprobs is None or len(comp.logprobs) != len(comp.token_ids):
                return [
                    *out,
                    _fail(f, [], "engine returned no logprobs aligned with token_ids", "error"),
                ]
            parsed = sess.add_completion(
                comp.token_ids, comp.logprobs, finish_reason=comp.finish_reason
            )
            prev = prompt + list(comp.token_ids)
            if t < turns - 1:
                calls = parsed.tool_calls or []
                results = [
                    {"role": "tool", "tool_call_id": tc.id, "content": f"result of {tc.name}"}
                    for tc in calls
                ] or [{"role": "tool", "content": f"observation {t}: no tool call was parsed"}]
                sess.add_observations(results)
        # Engine prompt logprobs of the final sequence vs the sampled logprobs.
        final = list(sess.state.ids)
        comp = client.complete(final, max_tokens=1, temperature=0.0, logprobs=0, prompt_logprobs=0)
        plp = comp.prompt_logprobs
        f.n_tokens = len(final)
        if plp is None or len(plp) != len(final):
            out.append(
                _fail(f, divs, "engine returned no prompt logprobs for the final sequence", "error")
            )
            continue
        deltas = [
            abs(plp[i] - sess.state.logprobs[i])
            for i in sess.state.sampled_positions()
            if plp[i] is not None
            and math.isfinite(plp[i])
            and math.isfinite(sess.state.logprobs[i])
        ]
        if deltas:
            f.mean_abs_dlogprob = sum(deltas) / len(deltas)
            f.max_abs_dlogprob = max(deltas)
        if divs:
            out.append(
                _fail(f, divs, "a turn's prompt + response is not a prefix of the next prompt")
            )
        elif f.mean_abs_dlogprob is not None and f.mean_abs_dlogprob > logprob_tol:
            out.append(
                _fail(
                    f,
                    [],
                    f"mean |Δlogprob| {f.mean_abs_dlogprob:.4g} exceeds {logprob_tol} "
                    "(engine prompt logprobs vs sampled logprobs)",
                )
            )
        else:
            out.append(f)
    return out


def check_allow(allow: Iterable[str]) -> None:
    """--allow names drift causes (records.Cause); a UsageError names the first that is not."""
    from typing import get_args

    from apexrl.errors import UsageError

    known = set(get_args(Cause))
    bad = [a for a in allow if a not in known]
    if bad:
        raise UsageError(
            f"--allow {bad[0]!r} is not a drift cause", hint="one of: " + ", ".join(sorted(known))
        )


def fix_advice(findings: list[TitoFinding], tname: str, src: str) -> str | None:
    """What to pass when the model's own template breaks TITO (None when nothing but
    unreadable records failed: they say nothing about the template)."""
    from apexrl.tito.parsing import tool_call_format
    from apexrl.tito.template import prefix_fix

    if all(f.ok or f.unreadable_input for f in findings):
        return None
    fix = prefix_fix(tname, src)
    fmt = tool_call_format(src) or "unknown"
    if fix:
        return (
            f"the chat template ({tname}; tool calls: {fmt}) breaks the prefix property; "
            f"pass --chat-template {fix} (same tool-call format, history kept verbatim)"
        )
    if tname == "tokenizer":
        return (
            f"the chat template (tool calls: {fmt}) breaks the prefix property and no built-in "
            "template fits; pass --chat-template FILE with a template that renders history verbatim"
        )
    return None


def add_advice(findings: list[TitoFinding], advice: str | None) -> None:
    """Every template failure (not an unreadable record) carries the advice."""
    if not advice:
        return
    for f in findings:
        if not f.ok and not f.unreadable_input:
            f.message = f"{f.message} ({advice})" if f.message else advice


def apply_allow(findings: list[TitoFinding], allow: Iterable[str]) -> None:
    allowed = set(allow)
    for f in findings:
        if not f.ok and f.status == "mismatch" and f.causes and set(f.causes) <= allowed:
            f.ok = True
            f.message = (f.message + f" (allowed: {', '.join(sorted(allowed))})").strip()


def summarize(findings: list[TitoFinding]) -> dict[str, Any]:
    causes = Counter(c for f in findings for c in f.causes)
    return {
        "n": len(findings),
        "ok": sum(f.ok for f in findings),
        "mismatch": sum(not f.ok for f in findings),
        "causes": dict(causes),
    }


def verify_replay(
    tok: Tokenizer,
    src: str,
    items: Iterable[tuple[str, TitoTrajectory | Exception]],
    *,
    batch: int = 32,
) -> Iterable[TitoFinding]:
    """Replay many trajectories; renders are encoded in batches (the tokenizer's
    Rust thread pool) so throughput tracks raw `tokenizers` encode."""
    pending: list[tuple[str, TitoTrajectory]] = []

    def flush() -> Iterable[TitoFinding]:
        texts = [render_trajectory(tok, src, t) for _, t in pending]
        for (_, t), ids in zip(pending, tok.encode_batch(texts), strict=True):
            yield replay_one(tok, src, t, full_ids=ids)
        pending.clear()

    for where, item in items:
        if isinstance(item, Exception):
            yield from flush()
            yield TitoFinding.unreadable("replay", where, item)
            continue
        pending.append((where, item))
        if len(pending) >= batch:
            yield from flush()
    yield from flush()
