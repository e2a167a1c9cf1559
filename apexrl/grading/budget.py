"""The judge's budget: what one judge prompt may hold, and how evidence is fitted into it.

As archipelago's grader does: the judge's context window (the configured one, else the
model's as LiteLLM knows it, else 128,000 tokens) bounds every prompt. When the items
to show take more than half of it, the judge first picks the items that matter for the
criterion (a selection call); then, when they still do not fit in 90% of the window
beside the rest of the prompt, each item gets an equal share and an item over its share
keeps its head and tail with a marker saying how many lines of the middle were left
out. The judge is never sent a prompt over that 90% (the rest is left for its reply).
Tokens are counted with LiteLLM's counter for the judge model.
"""

from __future__ import annotations

import os

DEFAULT_CONTEXT_TOKENS = 128_000  # a judge LiteLLM knows no window for
PROMPT_SHARE = 0.90  # of the window, for the whole prompt (system + user)
SELECT_SHARE = 0.50  # evidence past this share of the window: the judge selects items first
HEAD_SHARE = 0.60  # of a cut item's characters, kept from its start (the rest from its end)


CONTEXT_ENV = "APEXRL_JUDGE_CONTEXT_TOKENS"


def context_tokens(model: str, configured: int | None = None) -> int:
    """The judge's window: `configured` (JudgeSettings.context_tokens), else
    $APEXRL_JUDGE_CONTEXT_TOKENS, else LiteLLM's max_input_tokens for the model, else
    DEFAULT_CONTEXT_TOKENS."""
    if configured:
        return int(configured)
    env = os.environ.get(CONTEXT_ENV, "").strip()
    if env:
        try:
            if int(env) > 0:
                return int(env)
        except ValueError:
            pass
        raise ValueError(f"{CONTEXT_ENV}={env!r}: give the judge's context window in tokens")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    import litellm

    try:
        info = litellm.get_model_info(model)
        limit = info.get("max_input_tokens") or info.get("max_tokens")
        if limit and limit > 0:
            return int(limit)
    except Exception:  # a model LiteLLM has no entry for (a local engine's name)
        pass
    return DEFAULT_CONTEXT_TOKENS


def prompt_limit(window: int) -> int:
    return int(window * PROMPT_SHARE)


def count_tokens(text: str, model: str) -> int:
    """Tokens of `text` for the judge model (LiteLLM's counter; one per character where
    it cannot count, an overestimate that keeps the bound)."""
    if not text:
        return 0
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    try:
        return int(litellm.token_counter(model=model, text=text))
    except Exception:
        return len(text)


def middle_cut(text: str, max_tokens: int, model: str) -> str:
    """`text` within `max_tokens`: whole when it fits, else its head and tail on line
    boundaries with a marker naming the lines left out (plain head, or "", when even
    the marker does not fit)."""
    have = count_tokens(text, model)
    if have <= max_tokens:
        return text
    if max_tokens <= 0:
        return ""
    chars = int(len(text) * max_tokens / have * 0.95)
    head_n, tail_n = int(chars * HEAD_SHARE), chars - int(chars * HEAD_SHARE)
    while head_n + tail_n > 0:
        cut = _join(text, head_n, tail_n)
        if count_tokens(cut, model) <= max_tokens:
            return cut
        head_n, tail_n = int(head_n * 0.9), int(tail_n * 0.9)
    out = text[:chars]
    while out and count_tokens(out, model) > max_tokens:
        out = out[: int(len(out) * 0.9)]
    return out


def _join(text: str, head_n: int, tail_n: int) -> str:
    end = text.rfind("\n", 0, head_n)
    end = head_n if end <= 0 else end
    start = len(text) - tail_n
    if start <= end:
        return text[:end]
    nl = text.find("\n", start)
    start = nl + 1 if nl != -1 else start
    left_out = text.count("\n", end, start)
    marker = (
        f"\n\n[... {left_out} lines in the middle of this item are not shown: the judge's "
        "context budget holds its start and its end only ...]\n\n"
    )
    return text[:end] + marker + text[start:]


def fit_bodies(bodies: list[str], available: int, model: str) -> list[str]:
    """Each body whole when all fit in `available` tokens; else an equal share each, a
    body over its share cut in the middle."""
    sizes = [count_tokens(b, model) for b in bodies]
    if sum(sizes) <= available:
        return list(bodies)
    with_text = sum(1 for n in sizes if n)
    share = max(available, 0) // max(with_text, 1)
    return [
        b if n <= share else middle_cut(b, share, model)
        for b, n in zip(bodies, sizes, strict=False)
    ]
