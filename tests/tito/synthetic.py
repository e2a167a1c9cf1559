"""Synthetic multi-turn agent trajectories recorded through TITO (tests, benchmarks).

Each turn the "model" emits `<think>` reasoning, some text and one or two Hermes
tool calls, ending with the stop token; tool results come back as observations.
The sampled ids are the tokenizer's canonical encoding of that text, so with a
prefix-preserving template the stream equals a full render.
"""

from __future__ import annotations

import json
import random

from apexrl.tito.session import TitoSession
from apexrl.tito.suite import TOOLS
from apexrl.tito.tokenizer import Tokenizer
from apexrl.tito.trajectory import TitoTrajectory

WORDS = [
    "revenue",
    "margin",
    "lease",
    "clause",
    "memo",
    "board",
    "deal",
    "audit",
    "invoice",
    "quarter",
    "forecast",
    "tenant",
    "counsel",
    "merger",
    "equity",
    "debt",
    "covenant",
    "schedule",
    "exhibit",
    "filing",
    "notice",
    "renewal",
    "EBITDA",
    "analysis",
    "spreadsheet",
    "summary",
    "draft",
    "client",
    "partner",
    "review",
    "risk",
    "valuation",
    "multiple",
    "cash",
    "flow",
    "growth",
    "segment",
    "region",
    "market",
    "share",
    "cost",
    "synergy",
    "integration",
    "timeline",
    "données",
    "résumé",
    "收购",
    "价格",
    "合同",
    "✅",
    "📈",
    "—",
    "€",
    "%",
]


def _words(rng: random.Random, n: int) -> str:
    out = []
    for i in range(n):
        w = rng.choice(WORDS)
        out.append(w)
        if i and i % 17 == 0:
            out.append("\n")
    return " ".join(out).replace(" \n ", "\n")


def synthetic_trajectory(
    tok: Tokenizer,
    chat_template: str,
    *,
    seed: int,
    target_tokens: int = 20_000,
    template_name: str | None = None,
    obs_words: int = 600,
    think_words: int = 80,
) -> TitoTrajectory:
    rng = random.Random(seed)
    sess = TitoSession(tok, chat_template=chat_template, template_name=template_name)
    sess.start(
        [
            {"role": "system", "content": "You are an analyst. Use the tools."},
            {"role": "user", "content": "Task: " + _words(rng, 60)},
        ],
        tools=TOOLS,
    )
    im_end = tok.token_to_id("<|im_end|>")
    turn = 0
    while len(sess.state) < target_tokens:
        n_calls = rng.choice((1, 1, 2))
        calls = []
        for k in range(n_calls):
            args = {"query": _words(rng, 6), "limit": rng.randint(1, 20)}
            calls.append(
                '<tool_call>\n{"name": "search", "arguments": '
                + json.dumps(args, ensure_ascii=False)
                + "}\n</tool_call>"
            )
            del k
        text = (
            "<think>\n"
            + _words(rng, rng.randint(think_words // 2, think_words))
            + "\n</think>\n\n"
            + _words(rng, rng.randint(5, 30))
            + "\n"
            + "\n".join(calls)
        )
        ids = [*tok.encode(text), im_end]
        lps = [-rng.random() for _ in ids]
        parsed = sess.add_completion(ids, lps, finish_reason="stop")
        results = [
            {
                "role": "tool",
                "tool_call_id": c.id,
                "content": _words(rng, rng.randint(obs_words // 2, obs_words)),
            }
            for c in parsed.tool_calls
        ]
        sess.add_observations(results)
        turn += 1
    final = "<think>\nDone.\n</think>\n\n" + _words(rng, 20)
    ids = [*tok.encode(final), im_end]
    sess.add_completion(ids, [-0.5] * len(ids), finish_reason="stop")
    return sess.to_trajectory(f"synthetic-{seed}")
