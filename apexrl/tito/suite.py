"""Built-in conversations for `tito verify --mode template`.

Assistant messages are given the way a TITO agent stores them after parsing the
model's output: `reasoning_content` ("" for an empty think block, absent when the
model produced none), `content`, and OpenAI-style `tool_calls` whose `arguments`
is the JSON text the model wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

TOOLS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the world's filesystem.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "file path"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search documents.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer"},
                },
                "required": ["query"],
            },
        },
    },
]


def call(i: int, name: str, args: dict) -> dict:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }


def tool(i: int, content: str) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": content}


def asst(content: str = "", reasoning: str | None = None, calls: list[dict] | None = None) -> dict:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls:
        m["tool_calls"] = calls
    return m


SYSTEM = {"role": "system", "content": "You are an analyst. Use the tools to answer."}


@dataclass
class Case:
    name: str
    messages: list[dict]
    tools: list[dict] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def builtin_cases() -> list[Case]:
    return [
        Case(
            "single_tool_call",
            [
                SYSTEM,
                {"role": "user", "content": "What is the revenue in report.txt?"},
                asst(
                    "", "I should read the report.", [call(0, "read_file", {"path": "report.txt"})]
                ),
                tool(0, "Revenue: $12.4M (FY2024)"),
                asst("The revenue is $12.4M.", "The file says 12.4M."),
            ],
            TOOLS,
        ),
        Case(
            "parallel_tool_calls",
            [
                SYSTEM,
                {"role": "user", "content": "Compare the two memos."},
                asst(
                    "I will read both.",
                    "Two files to read.",
                    [
                        call(0, "read_file", {"path": "memo_a.md"}),
                        call(1, "read_file", {"path": "memo_b.md"}),
                    ],
                ),
                tool(0, "Memo A: approve the deal."),
                tool(1, "Memo B: reject the deal."),
                asst("They disagree: A approves, B rejects.", "A vs B."),
            ],
            TOOLS,
        ),
        Case(
            "long_multi_turn_chain",
            [
                SYSTEM,
                {"role": "user", "content": "Find the lease termination clause."},
                asst(
                    "", "Search first.", [call(0, "search", {"query": "termination", "limit": 3})]
                ),
                tool(0, "lease.docx: section 14.2"),
                asst("", "Open it.", [call(1, "read_file", {"path": "lease.docx"})]),
                tool(1, "14.2 Either party may terminate with 90 days notice."),
                asst("Section 14.2: 90 days notice.", "Found it."),
                {"role": "user", "content": "And the renewal term?"},
                asst("", "Search renewal.", [call(2, "search", {"query": "renewal"})]),
                tool(2, "lease.docx: section 3.1 renews for 5 years."),
                asst("It renews for 5 years (3.1).", "Done."),
                {"role": "user", "content": "Thanks. Summarise both."},
                asst("90 days notice to terminate; 5-year renewal.", "Summary."),
            ],
            TOOLS,
        ),
        Case(
            "thinking_off",
            [
                SYSTEM,
                {"role": "user", "content": "List the files."},
                asst("", "", [call(0, "search", {"query": "*"})]),
                tool(0, "a.xlsx\nb.pdf"),
                asst("Two files: a.xlsx and b.pdf.", ""),
            ],
            TOOLS,
            {"enable_thinking": False},
        ),
        Case(
            "thinking_on_no_tools",
            [
                {"role": "user", "content": "What is 2+2?"},
                asst("4", "Simple arithmetic."),
                {"role": "user", "content": "And 3+3?"},
                asst("6", "Again simple."),
            ],
        ),
        Case(
            "empty_content",
            [
                SYSTEM,
                {"role": "user", "content": "Check the inbox."},
                asst("", "Look at mail.", [call(0, "search", {"query": "inbox"})]),
                tool(0, ""),
                asst("", "Nothing there; say so briefly."),
            ],
            TOOLS,
        ),
        Case(
            "unicode",
            [
                SYSTEM,
                {"role": "user", "content": "Résumé der Übernahme — 收购摘要 📈?"},
                asst(
                    "",
                    "Lire le fichier « fusion ».",
                    [call(0, "read_file", {"path": "données/合并.txt"})],
                ),
                tool(0, "Prix: 12,5 M€ — 价格：1250万欧元 ✅"),
                asst("Le prix est de 12,5 M€ (1250万欧元) ✅", "Réponse trouvée."),
            ],
            TOOLS,
        ),
        Case(
            "tool_result_image_as_text",
            [
                SYSTEM,
                {"role": "user", "content": "What does page 2 of deck.pdf show?"},
                asst("", "Render the page.", [call(0, "read_file", {"path": "deck.pdf#page=2"})]),
                tool(
                    0, "[image omitted: deck.pdf page 2, 1280x720]\nText on page: Q3 EBITDA bridge"
                ),
                asst("Page 2 shows the Q3 EBITDA bridge.", "Only text is available."),
            ],
            TOOLS,
        ),
    ]
