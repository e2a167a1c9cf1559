"""The deterministic case set of `world verify`, derived from a world's own files.

Every case is a tool call in the flat argument form (what the recipe shows a model);
the peer's envelopes are added on dispatch. Cases of one server run in this order on
both runtimes, so writes leave both copies in the same state when both agree. The set
covers, per server, the reads of every file type the world holds, listings and
searches, writes (the files they leave are compared by content), errors (missing
file, bad tab, bad arguments) and edge cases (formulas, dates, unicode names, empty
files, truncation, images). Ids (mail, chat, events) come from the world's data.
"""

from __future__ import annotations

import json
import mailbox
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class Case(BaseModel):
    server: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    writes: bool = False  # compare the files it leaves


def _files(root: Path, *exts: str) -> list[str]:
    """World paths ('/a/b.xlsx') of files under filesystem/ with these extensions,
    sorted, hidden folders left out."""
    fs = root / "filesystem"
    out = []
    for p in sorted(fs.rglob("*")):
        rel = p.relative_to(fs)
        hidden = any(s.startswith(".") for s in rel.parts)
        wanted = not exts or p.suffix.lower() in exts
        if p.is_file() and not p.is_symlink() and not hidden and wanted:
            out.append("/" + rel.as_posix())
    return out


def _dirs(root: Path) -> list[str]:
    fs = root / "filesystem"
    return ["/" + p.relative_to(fs).as_posix() for p in sorted(fs.iterdir()) if p.is_dir()]


def filesystem(root: Path) -> list[Case]:
    c = [Case(server="filesystem", tool="list_files", args={"path": "/"})]
    c += [Case(server="filesystem", tool="list_files", args={"path": d}) for d in _dirs(root)[:2]]
    c.append(Case(server="filesystem", tool="list_files", args={"path": "/no_such_folder"}))
    for pattern in ("*.xlsx", "*.pdf", "*.zzz"):
        c.append(Case(server="filesystem", tool="search_files", args={"pattern": pattern}))
    c.append(
        Case(server="filesystem", tool="search_files", args={"pattern": "*", "max_results": 3})
    )
    for f in _files(root, ".txt", ".md", ".csv", ".json")[:3]:
        c.append(Case(server="filesystem", tool="read_text_file", args={"file_path": f}))
    c.append(Case(server="filesystem", tool="read_text_file", args={"file_path": "/missing.txt"}))
    for f in _files(root, ".pdf")[:1]:
        c.append(Case(server="filesystem", tool="read_text_file", args={"file_path": f}))
    for f in _files(root, ".png", ".jpg", ".jpeg")[:1]:
        c.append(Case(server="filesystem", tool="read_image_file", args={"file_path": f}))
    for f in _files(root)[:2]:
        c.append(Case(server="filesystem", tool="get_file_metadata", args={"file_path": f}))
    c.append(Case(server="filesystem", tool="get_directory_tree", args={"path": "/"}))
    c.append(
        Case(
            server="filesystem",
            tool="get_directory_tree",
            args={"path": "/", "max_depth": 1, "show_size": True},
        )
    )
    return c


def excel(root: Path) -> list[Case]:
    s = "excel"
    c: list[Case] = []
    books = _files(root, ".xlsx")
    for f in books[:2]:
        c.append(Case(server=s, tool="list_tabs_in_spreadsheet", args={"file_path": f}))
        c.append(Case(server=s, tool="read_tab", args={"file_path": f, "tab_index": 0}))
    if books:
        f = books[0]
        c += [
            Case(
                server=s,
                tool="read_tab",
                args={"file_path": f, "tab_index": 0, "cell_range": "A1:C3"},
            ),
            Case(
                server=s, tool="read_tab", args={"file_path": f, "tab_index": 0, "cell_range": "B2"}
            ),
            Case(
                server=s,
                tool="read_tab",
                args={"file_path": f, "tab_index": 0, "include_formulas": True},
            ),
            Case(server=s, tool="read_tab", args={"file_path": f, "tab_index": 99}),
        ]
    c.append(Case(server=s, tool="read_tab", args={"file_path": "/missing.xlsx", "tab_index": 0}))
    for f in _files(root, ".csv")[:1]:
        c.append(Case(server=s, tool="read_csv", args={"file_path": f}))
        c.append(Case(server=s, tool="read_csv", args={"file_path": f, "row_limit": 2}))
    new = "/parity_book.xlsx"
    c += [
        Case(
            server=s,
            tool="create_spreadsheet",
            args={
                "directory": "/",
                "file_name": "parity_book.xlsx",
                "sheets": [
                    {
                        "name": "Data",
                        "headers": ["Item", "Q1", "Q2"],
                        "rows": [["Alpha", 10, 20], ["Beta", 5.5, 7], ["Café", 1, 2]],
                    }
                ],
            },
            writes=True,
        ),
        Case(server=s, tool="read_tab", args={"file_path": new, "tab_index": 0}),
        Case(
            server=s,
            tool="add_content_text",
            args={"file_path": new, "tab_index": 0, "cell": "D2", "value": "=B2+C2"},
            writes=True,
        ),
        Case(
            server=s, tool="read_tab", args={"file_path": new, "tab_index": 0, "cell_range": "D2"}
        ),
        Case(
            server=s,
            tool="add_tab",
            args={
                "file_path": new,
                "tab_name": "Notes",
                "sheet_data": {"headers": ["k"], "rows": [["v"]]},
            },
            writes=True,
        ),
        Case(server=s, tool="list_tabs_in_spreadsheet", args={"file_path": new}),
        Case(
            server=s,
            tool="delete_content_cell",
            args={"file_path": new, "tab_index": 0, "cell": "A4"},
            writes=True,
        ),
        Case(server=s, tool="delete_tab", args={"file_path": new, "tab_index": 1}, writes=True),
        Case(
            server=s,
            tool="edit_spreadsheet",
            args={
                "file_path": new,
                "operations": [
                    {"type": "set_cell", "sheet": "Data", "cell": "A5", "value": "Gamma"}
                ],
            },
            writes=True,
        ),
        Case(
            server=s,
            tool="filter_tab",
            args={
                "file_path": new,
                "tab_index": 0,
                "filters": [{"column": "Q1", "operator": "greater_than", "value": 6}],
            },
        ),
        Case(
            server=s,
            tool="create_chart",
            args={"file_path": new, "sheet": "Data", "data_range": "A1:C3", "chart_type": "bar"},
            writes=True,
        ),
        Case(server=s, tool="delete_spreadsheet", args={"file_path": new}, writes=True),
        Case(server=s, tool="delete_spreadsheet", args={"file_path": new}),
    ]
    return c


def word(root: Path) -> list[Case]:
    s = "word"
    c: list[Case] = []
    for f in _files(root, ".docx")[:2]:
        c.append(Case(server=s, tool="get_document_overview", args={"file_path": f}))
        c.append(Case(server=s, tool="read_document_content", args={"file_path": f}))
    c.append(Case(server=s, tool="read_document_content", args={"file_path": "/missing.docx"}))
    new = "/parity_memo.docx"
    c += [
        Case(
            server=s,
            tool="create_document",
            args={
                "directory": "/",
                "file_name": "parity_memo.docx",
                "content": [
                    {"type": "heading", "text": "Parity memo", "level": 1},
                    {"type": "paragraph", "text": "First paragraph – with unicode ü."},
                    {"type": "bullet_list", "items": ["one", "two"]},
                ],
            },
            writes=True,
        ),
        Case(server=s, tool="get_document_overview", args={"file_path": new}),
        Case(server=s, tool="read_document_content", args={"file_path": new}),
        Case(
            server=s,
            tool="add_content_text",
            args={
                "file_path": new,
                "identifier": "body.p.1",
                "text": "Added after.",
                "position": "after",
            },
            writes=True,
        ),
        Case(
            server=s,
            tool="edit_content_text",
            args={"file_path": new, "identifier": "body.p.1", "new_text": "Edited paragraph."},
            writes=True,
        ),
        Case(
            server=s,
            tool="delete_content_text",
            args={"file_path": new, "identifier": "body.p.2"},
            writes=True,
        ),
        Case(server=s, tool="read_document_content", args={"file_path": new}),
        Case(server=s, tool="delete_document", args={"file_path": new}, writes=True),
    ]
    # errors: a relative path, another type, a page past the end, a bad identifier
    docs = _files(root, ".docx")
    c.append(Case(server=s, tool="get_document_overview", args={"file_path": "memo.docx"}))
    c.append(Case(server=s, tool="read_document_content", args={"file_path": "/memo.pdf"}))
    for f in docs[:1]:
        c.append(
            Case(server=s, tool="read_document_content", args={"file_path": f, "page_index": 5})
        )
        c.append(
            Case(
                server=s,
                tool="edit_content_text",
                args={"file_path": f, "identifier": "p.1", "new_text": "x"},
            )
        )
    # a unicode name, a table, formatting; a document long enough to page (truncation)
    uni = "/Ünïcode – mémo.docx"
    long = "/parity_long.docx"
    c += [
        Case(
            server=s,
            tool="create_document",
            args={
                "directory": "/",
                "file_name": uni[1:],
                "content": [
                    {"type": "heading", "text": "Überblick", "level": 2},
                    {"type": "paragraph", "text": "Fett und kursiv", "bold": True, "italic": True},
                    {"type": "table", "rows": [["Name", "Wert"], ["α", "1,5"]]},
                    {"type": "numbered_list", "items": ["eins", "zwei"]},
                ],
            },
            writes=True,
        ),
        Case(server=s, tool="read_document_content", args={"file_path": uni}),
        Case(
            server=s,
            tool="apply_formatting",
            args={"file_path": uni, "identifier": "body.p.1", "underline": True},
            writes=True,
        ),
        Case(server=s, tool="get_document_overview", args={"file_path": uni}),
        Case(
            server=s,
            tool="create_document",
            args={
                "directory": "/",
                "file_name": long[1:],
                "content": [
                    {"type": "paragraph", "text": f"Paragraph {i}: " + "lorem ipsum " * 30}
                    for i in range(150)
                ],
            },
            writes=True,
        ),
        Case(server=s, tool="get_document_overview", args={"file_path": long}),
        Case(server=s, tool="read_document_content", args={"file_path": long, "page_index": 1}),
        Case(server=s, tool="page_margins", args={"file_path": long, "action": "read"}),
        Case(
            server=s,
            tool="header_footer",
            args={"file_path": long, "action": "read", "area": "footer"},
        ),
    ]
    return c


def powerpoint(root: Path) -> list[Case]:
    s = "powerpoint"
    c: list[Case] = []
    for f in _files(root, ".pptx")[:2]:
        c.append(Case(server=s, tool="read_completedeck", args={"file_path": f}))
        c.append(Case(server=s, tool="read_slides", args={"file_path": f}))
        c.append(
            Case(server=s, tool="read_individualslide", args={"file_path": f, "slide_index": 0})
        )
        c.append(
            Case(server=s, tool="read_individualslide", args={"file_path": f, "slide_index": 99})
        )
    c.append(Case(server=s, tool="read_completedeck", args={"file_path": "/missing.pptx"}))
    new = "/parity_deck.pptx"
    c += [
        Case(
            server=s,
            tool="create_deck",
            args={
                "directory": "/",
                "file_name": "parity_deck.pptx",
                "slides": [
                    {"layout": "title", "title": "Parity", "subtitle": "apexrl and archipelago"},
                    {
                        "layout": "title_and_content",
                        "title": "Points",
                        "bullets": {"items": ["a", "b"]},
                    },
                ],
            },
            writes=True,
        ),
        Case(server=s, tool="read_completedeck", args={"file_path": new}),
        Case(
            server=s,
            tool="add_slide",
            args={"file_path": new, "index": 2, "layout": "title_only", "title": "Added"},
            writes=True,
        ),
        Case(server=s, tool="read_individualslide", args={"file_path": new, "slide_index": 2}),
        Case(
            server=s,
            tool="insert_table",
            args={
                "file_path": new,
                "slide_index": 1,
                "rows": [["k", "v"], ["a", "1"]],
                "header": True,
            },
            writes=True,
        ),
        Case(server=s, tool="delete_deck", args={"file_path": new}, writes=True),
    ]
    # every slide of the first deck, a window of its markdown, and errors
    decks = _files(root, ".pptx")
    for f in decks[:1]:
        c += [
            Case(server=s, tool="read_individualslide", args={"file_path": f, "slide_index": i})
            for i in (1, 2, 3)
        ]
        c.append(
            Case(server=s, tool="read_slides", args={"file_path": f, "start": 100, "end": 400})
        )
        c.append(
            Case(server=s, tool="read_slides", args={"file_path": f, "start": 0, "end": 20000})
        )
    c.append(Case(server=s, tool="read_completedeck", args={"file_path": "deck.pptx"}))
    # a unicode name, a table on a content slide, two columns, notes
    uni = "/Ünïcode – präsentation.pptx"
    c += [
        Case(
            server=s,
            tool="create_deck",
            args={
                "directory": "/",
                "file_name": uni[1:],
                "slides": [
                    {"layout": "title", "title": "Überblick", "subtitle": "α → ω"},
                    {
                        "layout": "title_and_content",
                        "title": "Zahlen",
                        "table": {"rows": [["Name", "Wert"], ["α", "1,5"]]},
                        "notes": "Sprechernotiz",
                    },
                    {
                        "layout": "two_content",
                        "title": "Vergleich",
                        "columns": {"left": {"items": ["links"]}, "right": {"items": ["rechts"]}},
                    },
                ],
            },
            writes=True,
        ),
        Case(server=s, tool="read_slides", args={"file_path": uni}),
        Case(server=s, tool="read_individualslide", args={"file_path": uni, "slide_index": 1}),
        Case(
            server=s,
            tool="edit_slides",
            args={
                "file_path": uni,
                "operations": [{"type": "update_slide_title", "index": 2, "title": "Neu"}],
            },
            writes=True,
        ),
        Case(server=s, tool="read_completedeck", args={"file_path": uni}),
        Case(server=s, tool="delete_deck", args={"file_path": uni}, writes=True),
        Case(server=s, tool="delete_deck", args={"file_path": uni}),
    ]
    return c


def pdfs(root: Path) -> list[Case]:
    s = "pdfs"
    c: list[Case] = []
    for f in _files(root, ".pdf")[:2]:
        c += [
            Case(server=s, tool="read_pdf_pages", args={"file_path": f}),
            Case(server=s, tool="read_pdf_pages", args={"file_path": f, "pages": [1]}),
            Case(server=s, tool="search_pdf", args={"file_path": f, "query": "the"}),
            Case(server=s, tool="read_page_as_image", args={"file_path": f, "page_number": 1}),
        ]
    c.append(Case(server=s, tool="read_pdf_pages", args={"file_path": "/missing.pdf"}))
    c.append(
        Case(
            server=s,
            tool="create_pdf",
            args={
                "directory": "/",
                "file_name": "parity.pdf",
                "content": [
                    {"type": "heading", "text": "Parity"},
                    {"type": "paragraph", "text": "Body."},
                ],
            },
            writes=True,
        )
    )
    c.append(Case(server=s, tool="read_pdf_pages", args={"file_path": "/parity.pdf"}))
    return c


def _mail_ids(root: Path) -> list[str]:
    ids = []
    for box in sorted((root / ".apps_data" / "mail").glob("*.mbox")):
        for msg in mailbox.mbox(str(box), create=False):
            if msg.get("Message-ID"):
                ids.append(str(msg["Message-ID"]).strip())
    return ids


def mail(root: Path) -> list[Case]:
    s = "mail"
    ids = _mail_ids(root)
    c = [
        Case(server=s, tool="list_mails", args={}),
        Case(server=s, tool="list_mails", args={"limit": 2, "offset": 1}),
    ]
    c += [Case(server=s, tool="read_mail", args={"mail_id": i}) for i in ids[:2]]
    c.append(Case(server=s, tool="read_mail", args={"mail_id": "<missing@example.com>"}))
    c.append(Case(server=s, tool="search_mail", args={"subject": "Re"}))
    c.append(Case(server=s, tool="search_mail", args={"after_date": "2020-01-01", "limit": 3}))
    c.append(
        Case(
            server=s,
            tool="send_mail",
            args={
                "from_email": "parity@example.com",
                "to_email": ["someone@example.com"],
                "subject": "Parity check",
                "body": "Hello.",
            },
            writes=True,
        )
    )
    if ids:
        c.append(
            Case(
                server=s,
                tool="reply_mail",
                args={"original_mail_id": ids[0], "body": "Thanks."},
                writes=True,
            )
        )
        c.append(
            Case(
                server=s,
                tool="forward_mail",
                args={"original_mail_id": ids[0], "to_email": ["fwd@example.com"], "body": "FYI"},
                writes=True,
            )
        )
        c.append(
            Case(
                server=s,
                tool="reply_all_mail",
                args={"original_mail_id": ids[0], "body": "Thanks, all."},
                writes=True,
            )
        )
        # the thread the replies made (their X-Thread-ID)
        c.append(Case(server=s, tool="search_mail", args={"thread_id": ids[0]}))
    c.append(
        Case(
            server=s,
            tool="reply_mail",
            args={"original_mail_id": "<missing@example.com>", "body": "x"},
        )
    )
    return c


def _chat(root: Path) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    base = root / ".apps_data" / "chat"
    groups = (
        sorted(p.name for p in (base / "Groups").iterdir() if p.is_dir())
        if (base / "Groups").is_dir()
        else []
    )
    users = (
        sorted(p.name for p in (base / "Users").iterdir() if p.is_dir())
        if (base / "Users").is_dir()
        else []
    )
    posts = []
    for g in groups:
        try:
            data = json.loads((base / "Groups" / g / "messages.json").read_text("utf-8"))
        except (OSError, ValueError):
            continue
        for m in data.get("messages", []) if isinstance(data, dict) else []:
            if isinstance(m, dict) and m.get("message_id"):
                posts.append((g, str(m["message_id"])))
    return groups, users, posts


def chat(root: Path) -> list[Case]:
    s = "chat"
    groups, users, posts = _chat(root)
    c = [Case(server=s, tool="list_channels", args={}), Case(server=s, tool="get_users", args={})]
    c += [Case(server=s, tool="get_channel_history", args={"channel_id": g}) for g in groups[:2]]
    c.append(Case(server=s, tool="get_channel_history", args={"channel_id": "no_such_space"}))
    c += [Case(server=s, tool="get_user_profile", args={"user_id": u}) for u in users[:1]]
    if posts:
        g, p = posts[0]
        c.append(Case(server=s, tool="get_thread_replies", args={"channel_id": g, "post_id": p}))
        c.append(
            Case(
                server=s,
                tool="add_reaction",
                args={"channel_id": g, "post_id": p, "emoji_name": "thumbsup"},
                writes=True,
            )
        )
    if groups:
        c.append(
            Case(
                server=s,
                tool="post_message",
                args={"channel_id": groups[0], "message": "Parity note"},
                writes=True,
            )
        )
    if posts:
        g, p = posts[0]
        c.append(
            Case(
                server=s,
                tool="reply_to_thread",
                args={"channel_id": g, "post_id": p, "message": "Parity reply"},
                writes=True,
            )
        )
        c.append(
            Case(server=s, tool="delete_post", args={"channel_id": g, "post_id": p}, writes=True)
        )
        c.append(
            Case(server=s, tool="get_thread_replies", args={"channel_id": g, "post_id": "nope"})
        )
    return c


def _event_ids(root: Path) -> list[str]:
    ids = []
    for f in sorted((root / ".apps_data" / "calendar").glob("*.ics")):
        ids += re.findall(r"^UID:(.+?)\r?$", f.read_text("utf-8", "replace"), flags=re.M)
    return ids


def calendar(root: Path) -> list[Case]:
    s = "calendar"
    ids = _event_ids(root)
    c = [
        Case(server=s, tool="list_events", args={}),
        Case(server=s, tool="list_events", args={"limit": 1, "offset": 1}),
    ]
    c += [Case(server=s, tool="read_event", args={"event_id": i}) for i in ids[:2]]
    c.append(Case(server=s, tool="read_event", args={"event_id": "no-such-event"}))
    c.append(
        Case(
            server=s,
            tool="create_event",
            args={
                "summary": "Parity sync",
                "start": {"dateTime": "2025-10-01T10:00:00+00:00"},
                "end": {"dateTime": "2025-10-01T11:00:00+00:00"},
            },
            writes=True,
        )
    )
    if ids:
        c.append(
            Case(
                server=s,
                tool="update_event",
                args={"event_id": ids[0], "summary": "Renamed"},
                writes=True,
            )
        )
        c.append(Case(server=s, tool="delete_event", args={"event_id": ids[-1]}, writes=True))
    c.append(
        Case(
            server=s,
            tool="create_event",
            args={
                "summary": "Offsite",
                "start": {"date": "2025-11-03"},
                "end": {"date": "2025-11-04"},
            },
            writes=True,
        )
    )
    c.append(Case(server=s, tool="delete_event", args={"event_id": "no-such-event"}))
    return c


def code_execution(root: Path) -> list[Case]:
    s = "code_execution"
    return [
        Case(server=s, tool="code_exec", args={"code": "pwd"}),
        Case(server=s, tool="code_exec", args={"code": "ls"}),
        Case(server=s, tool="code_exec", args={"code": "echo out; echo err >&2"}),
        Case(server=s, tool="code_exec", args={"code": "exit 3"}),
        Case(server=s, tool="code_exec", args={"code": "cat no_such_file"}),
        Case(server=s, tool="code_exec", args={"code": "python3 -c 'print(6*7)'"}),
        Case(server=s, tool="code_exec", args={"code": "import os"}),
        Case(
            server=s,
            tool="code_exec",
            args={"code": "echo made > parity.txt && cat parity.txt"},
            writes=True,
        ),
    ]


BUILDERS: dict[str, Callable[[Path], list[Case]]] = {
    "filesystem": filesystem,
    "word": word,
    "excel": excel,
    "powerpoint": powerpoint,
    "pdfs": pdfs,
    "mail": mail,
    "chat": chat,
    "calendar": calendar,
    "code_execution": code_execution,
}


def cases_for(root: Path, servers: list[str]) -> list[Case]:
    """The case set over a world folder (holding filesystem/ and .apps_data/)."""
    out: list[Case] = []
    for name in servers:
        out += BUILDERS[name](root)
    return out
