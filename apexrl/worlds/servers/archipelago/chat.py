"""archipelago `chat` server over the world's Google-Chat-like export: channels (spaces),
history, threads, posting, replies, reactions, deletion, users."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import chat as _chat
from apexrl.worlds.world import World

ChannelId = Annotated[str, Field(description="Channel id from list_channels.")]
PostId = Annotated[str, Field(description="Message id from get_channel_history.")]


def _post(m: dict[str, Any]) -> dict[str, Any]:
    shown = _chat._show(m)
    shown["post_id"] = shown.pop("message_id")
    shown["thread_id"] = shown.pop("topic_id")
    if m.get("deleted"):
        shown["deleted"] = True
        shown["text"] = ""
    return shown


def _find(msgs: list[dict[str, Any]], post_id: str, channel_id: str) -> dict[str, Any]:
    for m in msgs:
        if m.get("message_id") == post_id:
            return m
    raise ApexError(f"no message {post_id!r} in channel {channel_id!r}")


def tools(world: World) -> list:
    legacy = {f.__name__: f for f in _chat.tools(world)}

    def list_channels(
        limit: Annotated[int, Field(ge=1)] = 100, page: Annotated[int, Field(ge=0)] = 0
    ) -> str:
        """List channels (spaces and direct messages): id, name, member and message counts."""
        chans = legacy["list_channels"]()
        groups = [
            {
                "id": c["space_id"],
                "name": c["name"],
                "member_count": len(c.get("members") or []),
                "message_count": c.get("messages", 0),
            }
            for c in chans[page * limit : (page + 1) * limit]
        ]
        return _compact(
            {"groups": groups, "total_count": len(chans), "page": page, "per_page": limit}
        )

    def get_channel_history(
        channel_id: ChannelId,
        limit: Annotated[int, Field(ge=1, description="Root messages per page.")] = 30,
        page: Annotated[int, Field(ge=0, description="0 = the latest messages.")] = 0,
    ) -> dict[str, Any]:
        """Recent thread-starting messages of a channel (oldest first within the page), each
        with its reply count; page 0 is the latest."""
        d = _chat._space_dir(world, channel_id)
        msgs = _chat._messages(d)
        roots, replies = [], {}
        seen = set()
        for m in msgs:
            t = m.get("topic_id")
            if t in seen:
                replies[t] = replies.get(t, 0) + 1
            else:
                seen.add(t)
                roots.append(m)
        end = max(0, len(roots) - page * limit)
        chunk = roots[max(0, end - limit) : end]
        posts = [{**_post(m), "reply_count": replies.get(m.get("topic_id"), 0)} for m in chunk]
        return {
            "channel_id": channel_id,
            "name": _chat._group_name(d),
            "total_threads": len(roots),
            "page": page,
            "posts": posts,
        }

    def get_thread_replies(channel_id: ChannelId, post_id: PostId) -> dict[str, Any]:
        """Every message of the thread a message belongs to, oldest first."""
        d = _chat._space_dir(world, channel_id)
        msgs = _chat._messages(d)
        topic = _find(msgs, post_id, channel_id).get("topic_id")
        return {
            "channel_id": channel_id,
            "thread_id": topic,
            "posts": [_post(m) for m in msgs if m.get("topic_id") == topic],
        }

    def post_message(channel_id: ChannelId, message: str) -> dict[str, Any]:
        """Post a new message (a new thread) in a channel."""
        return _post_shown(legacy["post"](channel_id, message))

    def reply_to_thread(channel_id: ChannelId, post_id: PostId, message: str) -> dict[str, Any]:
        """Reply in the thread of a message."""
        msgs = _chat._messages(_chat._space_dir(world, channel_id))
        topic = _find(msgs, post_id, channel_id).get("topic_id")
        return _post_shown(legacy["reply"](channel_id, topic, message))

    def add_reaction(
        channel_id: ChannelId,
        post_id: PostId,
        emoji_name: Annotated[str, Field(description="The emoji character, e.g. '👍'.")],
    ) -> dict[str, Any]:
        """React to a message with an emoji."""
        return _post_shown(legacy["react"](channel_id, post_id, emoji_name))

    def delete_post(channel_id: ChannelId, post_id: PostId) -> dict[str, Any]:
        """Delete a message (marked deleted, kept in storage)."""
        with world.lock:
            d = _chat._space_dir(world, channel_id)
            msgs = _chat._messages(d)
            m = _find(msgs, post_id, channel_id)
            m["deleted"] = True
            _chat._save(d, msgs)
        return {"success": True, "post_id": post_id, "channel_id": channel_id}

    def get_users(
        limit: Annotated[int, Field(ge=1)] = 100, page: Annotated[int, Field(ge=0)] = 0
    ) -> str:
        """List the chat's users: id, username, email, first and last name."""
        us = _users(world)
        shown = [_person(u) for u in us[page * limit : (page + 1) * limit]]
        return _compact({"users": shown, "total_count": len(us), "page": page, "per_page": limit})

    def get_user_profile(
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

    return [
        list_channels,
        get_channel_history,
        post_message,
        reply_to_thread,
        add_reaction,
        get_thread_replies,
        delete_post,
        get_user_profile,
        get_users,
    ]


def _post_shown(shown: dict[str, Any]) -> dict[str, Any]:
    shown["post_id"] = shown.pop("message_id")
    shown["thread_id"] = shown.pop("topic_id")
    return shown


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
    d = world.apps_path(f"{_chat.CHAT_DIR}/Users")
    out = []
    if d.is_dir():
        for u in sorted(d.iterdir()):
            f = u / "user_info.json"
            if f.is_file():
                data = _chat._read_json(f)
                info = data.get("user", data) if isinstance(data, dict) else {}
                if isinstance(info, dict):
                    out.append(
                        {
                            "user_id": u.name,
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
