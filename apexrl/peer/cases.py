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


def _read(server: str, tool: str, args: dict[str, Any]) -> Case:
    """A case whose result is compared (it leaves no files to compare)."""
    return Case(server=server, tool=tool, args=args)


def _write(server: str, tool: str, args: dict[str, Any]) -> Case:
    """A case that writes: the files it leaves are compared too."""
    return Case(server=server, tool=tool, args=args, writes=True)


def _listing(
    server: str, list_tool: str, page: dict, read_tool: str, key: str, ids: list[str], missing: str
) -> list[Case]:
    """The reads of an app that lists items (mail, events): the whole list, one page,
    the first two items by id, and an id that is not there."""
    return [
        _read(server, list_tool, {}),
        _read(server, list_tool, page),
        *(_read(server, read_tool, {key: i}) for i in [*ids[:2], missing]),
    ]


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
    c = [_read("filesystem", "list_files", {"path": "/"})]
    c += [_read("filesystem", "list_files", {"path": d}) for d in _dirs(root)[:2]]
    c.append(_read("filesystem", "list_files", {"path": "/no_such_folder"}))
    for pattern in ("*.xlsx", "*.pdf", "*.zzz"):
        c.append(_read("filesystem", "search_files", {"pattern": pattern}))
    c.append(_read("filesystem", "search_files", {"pattern": "*", "max_results": 3}))
    for f in _files(root, ".txt", ".md", ".csv", ".json")[:3]:
        c.append(_read("filesystem", "read_text_file", {"file_path": f}))
    c.append(_read("filesystem", "read_text_file", {"file_path": "/missing.txt"}))
    for f in _files(root, ".pdf")[:1]:
        c.append(_read("filesystem", "read_text_file", {"file_path": f}))
    for f in _files(root, ".png", ".jpg", ".jpeg")[:1]:
        c.append(_read("filesystem", "read_image_file", {"file_path": f}))
    for f in _files(root)[:2]:
        c.append(_read("filesystem", "get_file_metadata", {"file_path": f}))
    c.append(_read("filesystem", "get_directory_tree", {"path": "/"}))
    c += [_read("filesystem", "get_directory_tree", {"path": d}) for d in _dirs(root)[:1]]
    c.append(
        _read("filesystem", "get_directory_tree", {"path": "/", "max_depth": 1, "show_size": True})
    )
    return c


def excel(root: Path) -> list[Case]:
    s = "excel"
    c: list[Case] = []
    books = _files(root, ".xlsx")
    for f in books[:2]:
        c.append(_read(s, "list_tabs_in_spreadsheet", {"file_path": f}))
        c.append(_read(s, "read_tab", {"file_path": f, "tab_index": 0}))
    if books:
        f = books[0]
        c += [
            _read(s, "read_tab", {"file_path": f, "tab_index": 0, "cell_range": "A1:C3"}),
            _read(s, "read_tab", {"file_path": f, "tab_index": 0, "cell_range": "B2"}),
            _read(s, "read_tab", {"file_path": f, "tab_index": 0, "include_formulas": True}),
            _read(s, "read_tab", {"file_path": f, "tab_index": 99}),
        ]
    c.append(_read(s, "read_tab", {"file_path": "/missing.xlsx", "tab_index": 0}))
    for f in _files(root, ".csv")[:1]:
        c.append(_read(s, "read_csv", {"file_path": f}))
        c.append(_read(s, "read_csv", {"file_path": f, "row_limit": 2}))
    new = "/parity_book.xlsx"
    c += [
        _write(
            s,
            "create_spreadsheet",
            {
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
        ),
        _read(s, "read_tab", {"file_path": new, "tab_index": 0}),
        _write(
            s,
            "add_content_text",
            {"file_path": new, "tab_index": 0, "cell": "D2", "value": "=B2+C2"},
        ),
        _read(s, "read_tab", {"file_path": new, "tab_index": 0, "cell_range": "D2"}),
        _write(
            s,
            "add_tab",
            {
                "file_path": new,
                "tab_name": "Notes",
                "sheet_data": {"headers": ["k"], "rows": [["v"]]},
            },
        ),
        _read(s, "list_tabs_in_spreadsheet", {"file_path": new}),
        _write(s, "delete_content_cell", {"file_path": new, "tab_index": 0, "cell": "A4"}),
        _write(s, "delete_tab", {"file_path": new, "tab_index": 1}),
        _write(
            s,
            "edit_spreadsheet",
            {
                "file_path": new,
                "operations": [
                    {"type": "set_cell", "sheet": "Data", "cell": "A5", "value": "Gamma"}
                ],
            },
        ),
        _read(
            s,
            "filter_tab",
            {
                "file_path": new,
                "tab_index": 0,
                "filters": [{"column": "Q1", "operator": "greater_than", "value": 6}],
            },
        ),
        _read(
            s,
            "filter_tab",
            {
                "file_path": new,
                "tab_index": 0,
                "filters": [{"column": "Q1", "operator": "greater_than", "value": 1000}],
                "include_diagnostics": True,
            },
        ),
        _read(
            s,
            "filter_tab",
            {
                "file_path": new,
                "tab_index": 0,
                "filters": [{"column": "Item", "operator": "equals", "value": "Zeta"}],
            },
        ),
        # a formula's value read back after a write (the peer recalculates it)
        _write(
            s,
            "edit_spreadsheet",
            {
                "file_path": new,
                "operations": [
                    {"type": "set_cell", "sheet": "Data", "cell": "E3", "value": "=B3/C3"}
                ],
            },
        ),
        _read(s, "read_tab", {"file_path": new, "tab_index": 0, "cell_range": "E3"}),
        _write(
            s,
            "create_chart",
            {"file_path": new, "sheet": "Data", "data_range": "A1:C3", "chart_type": "bar"},
        ),
        _write(s, "delete_spreadsheet", {"file_path": new}),
        _read(s, "delete_spreadsheet", {"file_path": new}),
    ]
    return c


def word(root: Path) -> list[Case]:
    s = "word"
    c: list[Case] = []
    for f in _files(root, ".docx")[:2]:
        c.append(_read(s, "get_document_overview", {"file_path": f}))
        c.append(_read(s, "read_document_content", {"file_path": f}))
    c.append(_read(s, "read_document_content", {"file_path": "/missing.docx"}))
    new = "/parity_memo.docx"
    c += [
        _write(
            s,
            "create_document",
            {
                "directory": "/",
                "file_name": "parity_memo.docx",
                "content": [
                    {"type": "heading", "text": "Parity memo", "level": 1},
                    {"type": "paragraph", "text": "First paragraph – with unicode ü."},
                    {"type": "bullet_list", "items": ["one", "two"]},
                ],
            },
        ),
        _read(s, "get_document_overview", {"file_path": new}),
        _read(s, "read_document_content", {"file_path": new}),
        _write(
            s,
            "add_content_text",
            {
                "file_path": new,
                "identifier": "body.p.1",
                "text": "Added after.",
                "position": "after",
            },
        ),
        _write(
            s,
            "edit_content_text",
            {"file_path": new, "identifier": "body.p.1", "new_text": "Edited paragraph."},
        ),
        _write(s, "delete_content_text", {"file_path": new, "identifier": "body.p.2"}),
        _read(s, "read_document_content", {"file_path": new}),
        _write(s, "delete_document", {"file_path": new}),
    ]
    # errors: a relative path, another type, a page past the end, a bad identifier
    docs = _files(root, ".docx")
    c.append(_read(s, "get_document_overview", {"file_path": "memo.docx"}))
    c.append(_read(s, "read_document_content", {"file_path": "/memo.pdf"}))
    for f in docs[:1]:
        c.append(_read(s, "read_document_content", {"file_path": f, "page_index": 5}))
        c.append(
            _read(s, "edit_content_text", {"file_path": f, "identifier": "p.1", "new_text": "x"})
        )
    # a unicode name, a table, formatting; a document long enough to page (truncation)
    uni = "/Ünïcode – mémo.docx"
    long = "/parity_long.docx"
    c += [
        _write(
            s,
            "create_document",
            {
                "directory": "/",
                "file_name": uni[1:],
                "content": [
                    {"type": "heading", "text": "Überblick", "level": 2},
                    {"type": "paragraph", "text": "Fett und kursiv", "bold": True, "italic": True},
                    {"type": "table", "rows": [["Name", "Wert"], ["α", "1,5"]]},
                    {"type": "numbered_list", "items": ["eins", "zwei"]},
                ],
            },
        ),
        _read(s, "read_document_content", {"file_path": uni}),
        _write(
            s, "apply_formatting", {"file_path": uni, "identifier": "body.p.1", "underline": True}
        ),
        _read(s, "get_document_overview", {"file_path": uni}),
        _write(
            s,
            "create_document",
            {
                "directory": "/",
                "file_name": long[1:],
                "content": [
                    {"type": "paragraph", "text": f"Paragraph {i}: " + "lorem ipsum " * 30}
                    for i in range(150)
                ],
            },
        ),
        _read(s, "get_document_overview", {"file_path": long}),
        _read(s, "read_document_content", {"file_path": long, "page_index": 1}),
        _read(s, "page_margins", {"file_path": long, "action": "read"}),
        _read(s, "header_footer", {"file_path": long, "action": "read", "area": "footer"}),
    ]
    return c


def powerpoint(root: Path) -> list[Case]:
    s = "powerpoint"
    c: list[Case] = []
    for f in _files(root, ".pptx")[:2]:
        c.append(_read(s, "read_completedeck", {"file_path": f}))
        c.append(_read(s, "read_slides", {"file_path": f}))
        c.append(_read(s, "read_individualslide", {"file_path": f, "slide_index": 0}))
        c.append(_read(s, "read_individualslide", {"file_path": f, "slide_index": 99}))
    c.append(_read(s, "read_completedeck", {"file_path": "/missing.pptx"}))
    new = "/parity_deck.pptx"
    c += [
        _write(
            s,
            "create_deck",
            {
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
        ),
        _read(s, "read_completedeck", {"file_path": new}),
        _write(
            s, "add_slide", {"file_path": new, "index": 2, "layout": "title_only", "title": "Added"}
        ),
        _read(s, "read_individualslide", {"file_path": new, "slide_index": 2}),
        _write(
            s,
            "insert_table",
            {
                "file_path": new,
                "slide_index": 1,
                "rows": [["k", "v"], ["a", "1"]],
                "header": True,
            },
        ),
        _write(s, "delete_deck", {"file_path": new}),
    ]
    # every slide of the first deck, a window of its markdown, and errors
    decks = _files(root, ".pptx")
    for f in decks[:1]:
        c += [
            _read(s, "read_individualslide", {"file_path": f, "slide_index": i}) for i in (1, 2, 3)
        ]
        c.append(_read(s, "read_slides", {"file_path": f, "start": 100, "end": 400}))
        c.append(_read(s, "read_slides", {"file_path": f, "start": 0, "end": 20000}))
    c.append(_read(s, "read_completedeck", {"file_path": "deck.pptx"}))
    # a unicode name, a table on a content slide, two columns, notes
    uni = "/Ünïcode – präsentation.pptx"
    c += [
        _write(
            s,
            "create_deck",
            {
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
        ),
        _read(s, "read_slides", {"file_path": uni}),
        _read(s, "read_individualslide", {"file_path": uni, "slide_index": 1}),
        _write(
            s,
            "edit_slides",
            {
                "file_path": uni,
                "operations": [{"type": "update_slide_title", "index": 2, "title": "Neu"}],
            },
        ),
        _read(s, "read_completedeck", {"file_path": uni}),
        _write(s, "delete_deck", {"file_path": uni}),
        _read(s, "delete_deck", {"file_path": uni}),
    ]
    return c


def pdfs(root: Path) -> list[Case]:
    s = "pdfs"
    c: list[Case] = []
    for f in _files(root, ".pdf")[:2]:
        c += [
            _read(s, "read_pdf_pages", {"file_path": f}),
            _read(s, "read_pdf_pages", {"file_path": f, "pages": [1]}),
            _read(s, "search_pdf", {"file_path": f, "query": "the"}),
            _read(s, "read_page_as_image", {"file_path": f, "page_number": 1}),
        ]
    c.append(_read(s, "read_pdf_pages", {"file_path": "/missing.pdf"}))
    c.append(
        _write(
            s,
            "create_pdf",
            {
                "directory": "/",
                "file_name": "parity.pdf",
                "content": [
                    {"type": "heading", "text": "Parity"},
                    {"type": "paragraph", "text": "Body."},
                ],
            },
        )
    )
    c.append(_read(s, "read_pdf_pages", {"file_path": "/parity.pdf"}))
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
    c = _listing(
        s,
        "list_mails",
        {"limit": 2, "offset": 1},
        "read_mail",
        "mail_id",
        ids,
        "<missing@example.com>",
    )
    c.append(_read(s, "search_mail", {"subject": "Re"}))
    c.append(_read(s, "search_mail", {"after_date": "2020-01-01", "limit": 3}))
    c.append(
        _write(
            s,
            "send_mail",
            {
                "from_email": "parity@example.com",
                "to_email": ["someone@example.com"],
                "subject": "Parity check",
                "body": "Hello.",
            },
        )
    )
    if ids:
        c.append(_write(s, "reply_mail", {"original_mail_id": ids[0], "body": "Thanks."}))
        c.append(
            _write(
                s,
                "forward_mail",
                {"original_mail_id": ids[0], "to_email": ["fwd@example.com"], "body": "FYI"},
            )
        )
        c.append(_write(s, "reply_all_mail", {"original_mail_id": ids[0], "body": "Thanks, all."}))
        # the thread the replies made (their X-Thread-ID)
        c.append(_read(s, "search_mail", {"thread_id": ids[0]}))
    c.append(_read(s, "reply_mail", {"original_mail_id": "<missing@example.com>", "body": "x"}))
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
    c = [_read(s, "list_channels", {}), _read(s, "get_users", {})]
    c += [_read(s, "get_channel_history", {"channel_id": g}) for g in groups[:2]]
    c.append(_read(s, "get_channel_history", {"channel_id": "no_such_space"}))
    c += [_read(s, "get_user_profile", {"user_id": u}) for u in users[:1]]
    if posts:
        g, p = posts[0]
        c.append(_read(s, "get_thread_replies", {"channel_id": g, "post_id": p}))
        c.append(
            _write(s, "add_reaction", {"channel_id": g, "post_id": p, "emoji_name": "thumbsup"})
        )
    if groups:
        c.append(_write(s, "post_message", {"channel_id": groups[0], "message": "Parity note"}))
    if posts:
        g, p = posts[0]
        c.append(
            _write(s, "reply_to_thread", {"channel_id": g, "post_id": p, "message": "Parity reply"})
        )
        c.append(_write(s, "delete_post", {"channel_id": g, "post_id": p}))
        c.append(_read(s, "get_thread_replies", {"channel_id": g, "post_id": "nope"}))
    return c


def _event_ids(root: Path) -> list[str]:
    ids = []
    for f in sorted((root / ".apps_data" / "calendar").glob("*.ics")):
        ids += re.findall(r"^UID:(.+?)\r?$", f.read_text("utf-8", "replace"), flags=re.M)
    return ids


def calendar(root: Path) -> list[Case]:
    s = "calendar"
    ids = _event_ids(root)
    c = _listing(
        s, "list_events", {"limit": 1, "offset": 1}, "read_event", "event_id", ids, "no-such-event"
    )
    c.append(
        _write(
            s,
            "create_event",
            {
                "summary": "Parity sync",
                "start": {"dateTime": "2025-10-01T10:00:00+00:00"},
                "end": {"dateTime": "2025-10-01T11:00:00+00:00"},
            },
        )
    )
    if ids:
        c.append(_write(s, "update_event", {"event_id": ids[0], "summary": "Renamed"}))
        c.append(_write(s, "delete_event", {"event_id": ids[-1]}))
    c.append(
        _write(
            s,
            "create_event",
            {
                "summary": "Offsite",
                "start": {"date": "2025-11-03"},
                "end": {"date": "2025-11-04"},
            },
        )
    )
    c.append(_read(s, "delete_event", {"event_id": "no-such-event"}))
    return c


def code_execution(root: Path) -> list[Case]:
    s = "code_execution"
    return [
        _read(s, "code_exec", {"code": "pwd"}),
        _read(s, "code_exec", {"code": "ls"}),
        _read(s, "code_exec", {"code": "echo out; echo err >&2"}),
        _read(s, "code_exec", {"code": "exit 3"}),
        _read(s, "code_exec", {"code": "cat no_such_file"}),
        _read(s, "code_exec", {"code": "python3 -c 'print(6*7)'"}),
        _read(s, "code_exec", {"code": "import os"}),
        _write(s, "code_exec", {"code": "echo made > parity.txt && cat parity.txt"}),
    ]


def builder(server: str) -> Callable[[Path], list[Case]]:
    """The case builder of a declared server: this module's function of its name."""
    fn = globals().get(server)
    if not callable(fn) or server.startswith("_"):
        raise KeyError(f"no peer cases for the server {server!r}")
    return fn


def cases_for(root: Path, servers: list[str]) -> list[Case]:
    """The case set over a world folder (holding filesystem/ and .apps_data/); every
    case's tool is one its server declares (`apexrl.worlds.servers.Server`)."""
    from apexrl.worlds.surface import ARCHIPELAGO

    out: list[Case] = []
    for name in servers:
        declared = ARCHIPELAGO.server(name).tools
        for case in builder(name)(root):
            if case.tool not in declared:
                raise ValueError(f"peer case {name}.{case.tool}: {name} declares no such tool")
            out.append(case)
    return out
