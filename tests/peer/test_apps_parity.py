"""mail, chat and calendar beside archipelago's own servers, on more cases than the
verify set: the writes (new mail, replies, forwards, posts, reactions, deletions, event
create/update/delete), their confirmations and the files they leave, searches by date and
thread, and the error texts. Every case must come back identical (after the same
normalisation `world verify` applies)."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from apexrl.peer.cases import Case, cases_for
from apexrl.peer.verify import _run_server, prepare_copies

pytestmark = [pytest.mark.peer, pytest.mark.integration, pytest.mark.timeout(900)]


def _first_mail(root: Path) -> str:
    from apexrl.peer.cases import _mail_ids

    return _mail_ids(root)[0]


def mail_cases(root: Path) -> list[Case]:
    mid = _first_mail(root)
    w = {"writes": True}
    s = "mail"
    return [
        Case(server=s, tool="search_mail", args={"after_date": "2025-09-13T00:00:00+00:00"}),
        Case(server=s, tool="search_mail", args={"before_date": "2025-09-13"}),
        Case(server=s, tool="search_mail", args={"after_date": "not a date"}),
        Case(server=s, tool="search_mail", args={"to_email": "halvorsenpike", "limit": 2}),
        Case(server=s, tool="read_mail", args={"mail_id": mid.strip("<>")}),
        Case(
            server=s,
            tool="send_mail",
            args={
                "from_email": "a@x.com",
                "to_email": ["b@x.com", "c@x.com"],
                "cc": ["d@x.com"],
                "bcc": "e@x.com",
                "subject": "S",
                "body": "<p>Hi</p>",
                "body_format": "html",
                "attachments": ["/report.pdf"],
            },
            **w,
        ),
        Case(
            server=s,
            tool="send_mail",
            args={"from_email": "bad", "to_email": ["b@x.com"], "subject": "S", "body": "B"},
        ),
        Case(
            server=s,
            tool="send_mail",
            args={"from_email": "a@x.com", "to_email": [], "subject": "S", "body": "B"},
        ),
        Case(server=s, tool="reply_all_mail", args={"original_mail_id": mid, "body": "All"}, **w),
        Case(server=s, tool="reply_mail", args={"original_mail_id": "<no@x.com>", "body": "T"}),
        Case(
            server=s,
            tool="forward_mail",
            args={"original_mail_id": mid, "to_email": "f@x.com"},
            **w,
        ),
        # the thread the replies above made, and the mail sent with its own thread id
        Case(server=s, tool="search_mail", args={"thread_id": mid}),
        Case(server=s, tool="search_mail", args={"subject": "S"}),
        Case(server=s, tool="list_mails", args={"limit": 3}),
    ]


def chat_cases(root: Path) -> list[Case]:
    from apexrl.peer.cases import _chat

    groups, _users, posts = _chat(root)
    g, p = posts[0]
    w = {"writes": True}
    s = "chat"
    return [
        Case(
            server=s,
            tool="reply_to_thread",
            args={"channel_id": g, "post_id": p, "message": "Re"},
            **w,
        ),
        Case(server=s, tool="get_thread_replies", args={"channel_id": g, "post_id": p}),
        Case(
            server=s,
            tool="add_reaction",
            args={"channel_id": g, "post_id": p, "emoji_name": "👍"},
            **w,
        ),
        Case(
            server=s, tool="add_reaction", args={"channel_id": g, "post_id": p, "emoji_name": "👍"}
        ),
        Case(server=s, tool="post_message", args={"channel_id": g, "message": "New thread"}, **w),
        Case(server=s, tool="get_channel_history", args={"channel_id": g, "limit": 1}),
        Case(server=s, tool="delete_post", args={"channel_id": g, "post_id": p}, **w),
        Case(server=s, tool="delete_post", args={"channel_id": g, "post_id": p}),
        Case(server=s, tool="get_thread_replies", args={"channel_id": g, "post_id": "nope"}),
        Case(
            server=s,
            tool="add_reaction",
            args={"channel_id": "nope", "post_id": p, "emoji_name": "x"},
        ),
        Case(
            server=s,
            tool="reply_to_thread",
            args={"channel_id": g, "post_id": "nope", "message": "m"},
        ),
        Case(server=s, tool="post_message", args={"channel_id": "nope", "message": "m"}),
    ]


def calendar_cases(root: Path) -> list[Case]:
    from apexrl.peer.cases import _event_ids

    ids = _event_ids(root)
    w = {"writes": True}
    s = "calendar"
    return [
        Case(
            server=s,
            tool="create_event",
            args={
                "summary": "Offsite",
                "start": {"date": "2025-11-03"},
                "end": {"date": "2025-11-04"},
                "location": "Lisbon",
                "description": "Two days",
                "attendees": [
                    {"email": "a@x.com", "displayName": "A", "responseStatus": "accepted"}
                ],
            },
            **w,
        ),
        Case(
            server=s,
            tool="update_event",
            args={
                "event_id": ids[1],
                "start": {"dateTime": "2025-09-20T09:00:00+00:00"},
                "end": {"dateTime": "2025-09-20T10:00:00+00:00"},
                "attendees": [{"email": "b@x.com"}],
            },
            **w,
        ),
        Case(server=s, tool="read_event", args={"event_id": ids[1]}),
        Case(server=s, tool="update_event", args={"event_id": "nope", "summary": "x"}),
        Case(server=s, tool="delete_event", args={"event_id": "nope"}),
        Case(server=s, tool="delete_event", args={"event_id": ids[0]}, **w),
        Case(server=s, tool="list_events", args={"limit": 3}),
    ]


EXTRA = {"mail": mail_cases, "chat": chat_cases, "calendar": calendar_cases}
_VOLATILE_READ = re.compile(r"^(Created|Updated): ", re.M)


@pytest.mark.parametrize("server", sorted(EXTRA))
def test_more_cases_identical(server, example_worlds, checkout, tmp_path):
    from apexrl.peer.runtime import runtimes

    rt = runtimes(checkout, servers=[server])[server]
    a_root, p_root = prepare_copies(example_worlds[0], tmp_path)
    cases = cases_for(a_root, [server]) + EXTRA[server](a_root)
    records = []
    start = datetime.now(UTC)
    asyncio.run(_run_server(server, cases, rt, a_root, p_root, records.append, start))
    assert len(records) == len(cases)
    # the writes were made and compared by content
    assert any(r.peer.files for r in records) and any(r.peer.error for r in records)
    diff = [
        json.dumps(
            {
                "tool": r.tool,
                "args": r.args,
                "apexrl": r.apexrl.content,
                "peer": r.peer.content,
                "files": [r.apexrl.files, r.peer.files],
            },
            ensure_ascii=False,
        )
        for r in records
        if not r.same
    ]
    assert diff == []
    if server == "mail":  # each new mail in a second of its own, on both sides
        for root in (a_root, p_root):
            seconds = _new_mail_seconds(root, since=start)
            assert len(seconds) == sum(r.apexrl.files != {} for r in records)
            assert len(set(seconds)) == len(seconds), seconds


def _new_mail_seconds(root: Path, since: datetime) -> list[datetime]:
    """Date headers (to the second) of the mails written since `since`."""
    import mailbox
    from email.utils import parsedate_to_datetime

    out = []
    for box in sorted((root / ".apps_data" / "mail").rglob("*.mbox")):
        for msg in mailbox.mbox(str(box)):
            try:
                when = parsedate_to_datetime(str(msg["Date"]))
            except (TypeError, ValueError):
                continue  # the world's own mails, whatever their dates
            if when.tzinfo is not None and when >= since.replace(microsecond=0):
                out.append(when)
    return out
