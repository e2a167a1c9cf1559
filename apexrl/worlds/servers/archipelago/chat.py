"""archipelago `chat` server over the world's Google-Chat-like export: channels (spaces),
history, threads, posting, replies, reactions, deletion, users.

Behaviour follows archipelago's server, as running it shows: a thread's root is the
message whose id ends with its topic id (`<space>/<topic>/<topic>`, as exports and new
posts write it); history lists roots newest first; writes store every message with all
the fields archipelago's chat model has; new posts and reactions are by
`user@example.com` ("Current User" unless a member of the space has that address),
stamped "Wednesday, December 02, 2026 at 09:48:44 AM UTC"; failures are error results
worded as archipelago words them.

Option (off by default): APEXRL_CHAT_POST_AS_OWNER=1 posts and reacts as the world's
own user (the chat user whose address owns the mailbox) instead."""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import chat as _chat
from apexrl.worlds.servers import Failed, Server, Style
from apexrl.worlds.world import World

SERVER = Server("chat", app="chat", aliases=("messaging",))

ChannelId = Annotated[str, Field(description="Channel id from list_channels.")]
PostId = Annotated[str, Field(description="Message id from get_channel_history.")]
USER_EMAIL = "user@example.com"  # who posts and reacts, as archipelago's server does
OWNER_ENV = "APEXRL_CHAT_POST_AS_OWNER"


def _channels(world: World) -> list[dict[str, Any]]:
    g = _chat._groups(world)
    out = []
    if g.is_dir():
        for d in sorted(g.iterdir()):
            if not d.is_dir():
                continue
            info = (
                _chat._read_json(d / "group_info.json") if (d / "group_info.json").is_file() else {}
            )
            members = info.get("members", []) if isinstance(info, dict) else []
            out.append(
                {
                    "id": d.name,
                    "name": _chat._group_name(d),
                    "member_count": len([m for m in members if isinstance(m, dict)]),
                    "message_count": len(_chat._messages(d)),
                }
            )
    return out


class _NotFound(Exception):
    pass


def _group(world: World, channel_id: str) -> tuple[Path, dict | None, dict | None]:
    """A channel's folder, its messages.json and group_info.json (None when absent or
    empty); a channel with neither does not exist."""
    try:
        d = _chat._space_dir(world, channel_id)
    except ApexError:
        raise _NotFound(f"Group {channel_id} not found") from None
    msgs = _load(d / "messages.json")
    info = _load(d / "group_info.json")
    if not msgs and not info:
        raise _NotFound(f"Group {channel_id} not found")
    return d, msgs, info


def _post(
    data: dict | None, channel_id: str, post_id: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A channel's messages and the one `post_id` names; archipelago's words when the
    channel has no messages file or no such message."""
    if not data:
        raise _NotFound(f"Messages file not found for group {channel_id}")
    msgs = _messages_of(data)
    m = next((m for m in msgs if m.get("message_id") == post_id), None)
    if m is None:
        raise _NotFound(f"Message {post_id} not found")
    return msgs, m


def _load(p: Path) -> dict | None:
    if not p.is_file():
        return None
    data = _chat._read_json(p)
    return data or None


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """A stored message with every field archipelago's chat server writes, in its order."""
    c = m.get("creator")
    creator = None
    if isinstance(c, dict):
        creator = {
            "name": c.get("name"),
            "email": c.get("email", ""),
            "user_type": c.get("user_type", "Human"),
        }
    return {
        "creator": creator,
        "created_date": m.get("created_date"),
        "text": m.get("text", ""),
        "topic_id": m.get("topic_id"),
        "message_id": m.get("message_id"),
        "reactions": [
            {
                "emoji": {"unicode": _chat._emoji(r)},
                "reactor_emails": list(r.get("reactor_emails") or []),
            }
            for r in m.get("reactions") or []
            if isinstance(r, dict)
        ],
        "annotations": [_annotation(a) for a in m.get("annotations") or [] if isinstance(a, dict)],
        "message_state": m.get("message_state"),
        "deleted_date": m.get("deleted_date"),
        "deletion_metadata": (
            {"deletion_type": m["deletion_metadata"].get("deletion_type")}
            if isinstance(m.get("deletion_metadata"), dict)
            else None
        ),
    }


def _annotation(a: dict[str, Any]) -> dict[str, Any]:
    def sub(key: str, fields: tuple[tuple[str, Any], ...]) -> dict[str, Any] | None:
        v = a.get(key)
        return {f: v.get(f, dflt) for f, dflt in fields} if isinstance(v, dict) else None

    return {
        "start_index": a.get("start_index"),
        "length": a.get("length"),
        "drive_metadata": sub(
            "drive_metadata", (("id", None), ("title", None), ("thumbnail_url", ""))
        ),
        "format_metadata": sub("format_metadata", (("format_type", None),)),
        "interaction_data": sub("interaction_data", (("url", {}),)),
        "video_call_metadata": sub("video_call_metadata", (("meeting_space", {}),)),
    }


def _save(d: Path, msgs: list[dict[str, Any]]) -> None:
    from apexrl.artifacts.atomic import write_text_atomic

    body = {"messages": [_message(m) for m in msgs]}
    write_text_atomic(d / "messages.json", json.dumps(body, indent=2, ensure_ascii=False))


def _info(m: dict[str, Any]) -> dict[str, Any]:
    """A message as archipelago's history and thread replies show it."""
    c = m.get("creator") if isinstance(m.get("creator"), dict) else None
    return {
        "message_id": m.get("message_id"),
        "creator_name": c.get("name") if c else "Unknown",
        "creator_email": c.get("email", "") if c else "unknown@example.com",
        "text": m.get("text", ""),
        "created_date": m.get("created_date") or "Unknown",
        "topic_id": m.get("topic_id"),
        "reaction_count": len(m.get("reactions") or []),
        "is_deleted": m.get("message_state") == "DELETED",
    }


def _stamp() -> str:
    return datetime.now().strftime("%A, %B %d, %Y at %I:%M:%S %p UTC")


def _new_id() -> str:
    return uuid.uuid4().hex[:11]


def _author(world: World, info: dict | None) -> dict[str, Any]:
    """Who posts: the member with the chat user's address, else archipelago's default
    user (`APEXRL_CHAT_POST_AS_OWNER=1`: the world's own user, found from its mail)."""
    if _on(OWNER_ENV):
        me = _chat.me(world)
        email = me["email"]
        name = me["name"]
    else:
        email, name = USER_EMAIL, "Current User"
    for mem in (info or {}).get("members") or []:
        if isinstance(mem, dict) and mem.get("email") == email:
            return {
                "name": mem.get("name"),
                "email": email,
                "user_type": mem.get("user_type", "Human"),
            }
    return {"name": name, "email": email, "user_type": "Human"}


def _reactor(world: World) -> str:
    return _chat.me(world)["email"] if _on(OWNER_ENV) else USER_EMAIL


def _on(env: str) -> bool:
    return os.environ.get(env, "").strip().lower() in ("1", "true", "yes")


def _write(
    world: World, channel_id: str, text: str, tool: str, what: str, parent: str | None
) -> Any:
    with world.lock:
        try:
            d, data, info = _group(world, channel_id)
            msgs = _messages_of(data)
            topic = None
            if parent is not None:
                topic = _post(data, channel_id, parent)[1].get("topic_id")
        except _NotFound as e:
            raise Failed(f"{what}: {e}", Style.INVALID_PARAMS, tool=tool) from None
        code = channel_id.replace("Space ", "")
        if topic is None:
            topic = _new_id()
            message_id = f"{code}/{topic}/{topic}"
        else:
            message_id = f"{code}/{topic}/{_new_id()}"
        when = _stamp()
        msgs.append(
            {
                "creator": _author(world, info),
                "created_date": when,
                "text": text,
                "topic_id": topic,
                "message_id": message_id,
            }
        )
        _save(d, msgs)
    return _compact(
        {
            "message_id": message_id,
            "group_id": channel_id,
            "text": text,
            "created_date": when,
            "topic_id": topic,
            "is_reply": parent is not None,
        }
    )


def _target(world: World, channel_id: str, post_id: str) -> tuple[Path, list[dict[str, Any]], dict]:
    try:
        d = _chat._space_dir(world, channel_id)
    except ApexError:
        d = None
    data = _load(d / "messages.json") if d is not None else None
    msgs, m = _post(data, channel_id, post_id)
    return d, msgs, m


@SERVER.tool
def list_channels(
    world: World, limit: Annotated[int, Field(ge=1)] = 100, page: Annotated[int, Field(ge=0)] = 0
) -> str:
    """List channels (spaces and direct messages): id, name, member and message counts."""
    chans = _channels(world)
    groups = chans[page * limit : (page + 1) * limit]
    return _compact({"groups": groups, "total_count": len(chans), "page": page, "per_page": limit})


@SERVER.tool
def get_channel_history(
    world: World,
    channel_id: ChannelId,
    limit: Annotated[int, Field(ge=1, description="Root messages per page.")] = 30,
    page: Annotated[int, Field(ge=0, description="0 = the latest messages.")] = 0,
) -> Any:
    """Thread-starting messages of a channel, newest first, with reaction counts."""
    try:
        _d, data, _info_ = _group(world, channel_id)
    except _NotFound as e:
        raise Failed(f"Error getting group history: {e}", Style.INVALID_PARAMS) from None
    msgs = _messages_of(data)
    roots = [m for m in msgs if m.get("topic_id") == str(m.get("message_id", "")).split("/")[-1]]
    roots.reverse()
    lo, hi = page * limit, page * limit + limit
    return _compact(
        {
            "messages": [_info(m) for m in roots[lo:hi]],
            "has_next": hi < len(roots),
            "has_prev": page > 0,
            "page": page,
            "per_page": limit,
        }
    )


@SERVER.tool
def get_thread_replies(world: World, channel_id: ChannelId, post_id: PostId) -> Any:
    """The replies in the thread a message starts (the message itself as root_post)."""
    try:
        _d, data, _i = _group(world, channel_id)
        msgs, root = _post(data, channel_id, post_id)
    except _NotFound as e:
        raise Failed(f"Error getting thread replies: {e}", Style.INVALID_PARAMS) from None
    thread = sorted(
        (m for m in msgs if m.get("topic_id") == root.get("topic_id")),
        key=lambda m: m.get("created_date") or "",
    )
    posts = [_info(m) for m in thread if m.get("message_id") != post_id]
    return _compact({"posts": posts, "root_post": _info(root)})


@SERVER.tool
def get_user_profile(
    world: World,
    user_id: Annotated[str, Field(description="user_id from get_users.")],
) -> str:
    """Profile of one user."""
    for u in _users(world):
        if user_id in (u["user_id"], u["email"]):
            p = _person(u)
            del p["is_bot"]
            extra = {"locale": "en", "timezone": {}, "is_bot": False, "bot_description": ""}
            extra.update({"last_picture_update": 0, "create_at": None, "update_at": None})
            return _compact({**p, **extra})
    raise ApexError(f"no user {user_id!r}", hint="use get_users to see user ids")


@SERVER.tool
def get_users(
    world: World, limit: Annotated[int, Field(ge=1)] = 100, page: Annotated[int, Field(ge=0)] = 0
) -> str:
    """List the chat's users: id, username, email, first and last name."""
    us = _users(world)
    shown = [_person(u) for u in us[page * limit : (page + 1) * limit]]
    return _compact({"users": shown, "total_count": len(us), "page": page, "per_page": limit})


@SERVER.tool
def post_message(world: World, channel_id: ChannelId, message: str) -> Any:
    """Post a new message (a new thread) in a channel."""
    return _write(world, channel_id, message, "post_message", "Error posting message", None)


@SERVER.tool
def reply_to_thread(world: World, channel_id: ChannelId, post_id: PostId, message: str) -> Any:
    """Reply in the thread of a message."""
    return _write(
        world, channel_id, message, "reply_to_thread", "Error replying to thread", post_id
    )


@SERVER.tool
def add_reaction(
    world: World,
    channel_id: ChannelId,
    post_id: PostId,
    emoji_name: Annotated[str, Field(description="The emoji character, e.g. '👍'.")],
) -> Any:
    """React to a message with an emoji."""
    me = _reactor(world)
    with world.lock:
        try:
            d, msgs, m = _target(world, channel_id, post_id)
        except _NotFound as e:
            raise Failed(f"Error adding reaction: {e}", Style.INVALID_PARAMS) from None
        m["reactions"] = reactions = [dict(r) for r in m.get("reactions") or []]
        hit = next((r for r in reactions if _chat._emoji(r) == emoji_name), None)
        if hit is None:
            reactions.append({"emoji": {"unicode": emoji_name}, "reactor_emails": [me]})
        elif me in (hit.get("reactor_emails") or []):
            raise Failed(
                f"You have already reacted with {emoji_name} to this message", Style.INVALID_PARAMS
            ) from None
        else:
            hit["reactor_emails"] = [*(hit.get("reactor_emails") or []), me]
        _save(d, msgs)
    return _compact(
        {"post_id": post_id, "user_id": me, "emoji_name": emoji_name, "create_at": _stamp()}
    )


@SERVER.tool
def delete_post(world: World, channel_id: ChannelId, post_id: PostId) -> Any:
    """Delete a message (marked deleted, kept in storage)."""
    with world.lock:
        try:
            d, msgs, m = _target(world, channel_id, post_id)
        except _NotFound as e:
            raise Failed(f"Error deleting post: {e}", Style.INVALID_PARAMS) from None
        if m.get("message_state") == "DELETED":
            raise Failed(f"Message {post_id} is already deleted", Style.INVALID_PARAMS) from None
        n_reactions = len(m.get("reactions") or [])
        m.update(
            message_state="DELETED",
            deleted_date=_stamp(),
            deletion_metadata={"deletion_type": "CREATOR"},
            text="",
            reactions=[],
            annotations=[],
        )
        n_replies = sum(
            1
            for x in msgs
            if x.get("topic_id") == m.get("topic_id") and x.get("message_id") != post_id
        )
        _save(d, msgs)
    return _compact(
        {"post_id": post_id, "deleted_replies": n_replies, "deleted_reactions": n_reactions}
    )


def _messages_of(data: dict | None) -> list[dict[str, Any]]:
    msgs = (data or {}).get("messages") if isinstance(data, dict) else None
    return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []


def _compact(record: dict[str, Any]) -> str:
    """A reply as archipelago's chat server serialises it: compact JSON, error last."""
    return json.dumps({**record, "error": None}, ensure_ascii=False, separators=(",", ":"))


def _person(u: dict[str, Any]) -> dict[str, Any]:
    """A user in archipelago's fields (username: the address before '@'; the name split
    into first and the rest)."""
    email = str(u.get("email") or "")
    first, _, last = str(u.get("name") or "").partition(" ")
    return {
        "id": u["user_id"],
        "username": email.split("@", 1)[0],
        "email": email,
        "first_name": first,
        "last_name": last,
        "nickname": "",
        "position": "",
        "roles": "",
        "is_bot": False,
    }


def _users(world: World) -> list[dict[str, Any]]:
    out = []
    for user_id, info in _chat.user_infos(world.apps_path(f"{_chat.CHAT_DIR}/Users")):
        if isinstance(info, dict):
            out.append(
                {
                    "user_id": user_id,
                    "name": info.get("name"),
                    "email": info.get("email"),
                    **{
                        k: v
                        for k, v in info.items()
                        if k not in ("name", "email") and isinstance(v, str | int)
                    },
                }
            )
    return out


def probe(world: World) -> str:
    return _chat.probe(world)
