"""Chat over a Google-Chat-export-like tree in `.apps_data/chat/`:

    Groups/<space_id>/group_info.json   {"name": ..., "members": [...]}
    Groups/<space_id>/messages.json     {"messages": [{message_id, creator: {name, email},
                                          created_date (ISO), text, topic_id, reactions: []}]}
    Users/<user_id>/user_info.json      {"user": {"name", "email"}} (the world's user)

Tools: list channels, history, thread replies, post, reply, react.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apexrl.artifacts.atomic import write_text_atomic
from apexrl.errors import ApexError, BadRecordError
from apexrl.worlds.world import World

CHAT_DIR = "chat"


def _groups(world: World) -> Path:
    """chat/Groups, or the shallowest Groups folder below chat/ (exports nest it)."""
    return _chat_folder(world, "Groups")


def _chat_folder(world: World, name: str) -> Path:
    from apexrl.worlds.appdata import find_dir

    return find_dir(world.apps_path(CHAT_DIR), name) or world.apps_path(f"{CHAT_DIR}/{name}")


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text("utf-8"))
    except (OSError, ValueError) as e:
        raise BadRecordError(str(p), f"unreadable JSON: {e}") from e


def _space_dir(world: World, space_id: str) -> Path:
    groups = _groups(world).resolve()
    d = (groups / str(space_id)).resolve()  # '..' or a link out lands elsewhere: refused
    if not d.is_dir() or d.parent != groups or not d.is_relative_to(world.apps_root.resolve()):
        raise ApexError(f"no chat space {space_id!r}", hint="use list_channels to see space ids")
    return d


def _messages(d: Path) -> list[dict[str, Any]]:
    p = d / "messages.json"
    if not p.exists():
        return []
    data = _read_json(p)
    msgs = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(msgs, list):
        raise BadRecordError(str(p), "expected {'messages': [...]}")
    return msgs


def _save(d: Path, msgs: list[dict[str, Any]]) -> None:
    write_text_atomic(
        d / "messages.json", json.dumps({"messages": msgs}, indent=2, ensure_ascii=False) + "\n"
    )


def users(world: World) -> list[dict[str, str]]:
    d = _chat_folder(world, "Users")
    out = []
    if d.is_dir():
        for u in sorted(d.iterdir()):
            f = u / "user_info.json"
            if f.is_file():
                data = _read_json(f)
                info = data.get("user", data) if isinstance(data, dict) else {}
                if isinstance(info, dict) and info.get("email"):
                    name = str(info.get("name") or info["email"])
                    out.append({"name": name, "email": str(info["email"])})
    return out


def me(world: World) -> dict[str, str]:
    """The world's user: the chat user whose address owns the mailbox, else the first."""
    from apexrl.worlds.apps.mail import owner_address

    if "chat_me" in world.cache:
        return world.cache["chat_me"]
    world.cache["chat_me"] = found = _find_me(world, owner_address)
    return found


def _find_me(world: World, owner_address) -> dict[str, str]:
    known = users(world)
    try:
        owner = owner_address(world)
    except Exception:
        owner = ""
    for u in known:
        if u["email"].lower() == owner:
            return u
    if known:
        return known[0]
    return {"name": owner or "Me", "email": owner or "me@example.com"}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _group_name(d: Path) -> str:
    info = d / "group_info.json"
    if info.is_file():
        data = _read_json(info)
        if isinstance(data, dict):
            return str(data.get("name") or d.name)
    return d.name


def _emoji(r: dict[str, Any]) -> str:
    e = r.get("emoji")
    return str(e.get("unicode") or e.get("name") or "") if isinstance(e, dict) else str(e or "")


def _show(m: dict[str, Any]) -> dict[str, Any]:
    c = m.get("creator") or {}
    return {
        "message_id": m.get("message_id"),
        "topic_id": m.get("topic_id"),
        "from": c.get("name") or c.get("email"),
        "date": m.get("created_date"),
        "text": m.get("text", ""),
        "reactions": m.get("reactions") or [],
    }


def tools(world: World) -> list:
    def list_channels() -> list[dict[str, Any]]:
        """List chat spaces (channels and direct messages): space_id, name, members and
        message count."""
        g = _groups(world)
        out = []
        if g.is_dir():
            for d in sorted(g.iterdir()):
                if not d.is_dir():
                    continue
                info = (
                    _read_json(d / "group_info.json") if (d / "group_info.json").is_file() else {}
                )
                members = info.get("members", []) if isinstance(info, dict) else []
                msgs = _messages(d)
                out.append(
                    {
                        "space_id": d.name,
                        "name": _group_name(d),
                        "members": [
                            m.get("name") or m.get("email") for m in members if isinstance(m, dict)
                        ],
                        "messages": len(msgs),
                        "last_message": msgs[-1].get("created_date") if msgs else None,
                    }
                )
        return out

    def history(space_id: str, limit: int = 50, offset: int = 0) -> dict[str, Any]:
        """Messages of a space, oldest first; `offset` counts back from the newest
        (offset=0 gives the latest `limit` messages)."""
        d = _space_dir(world, space_id)
        msgs = _messages(d)
        end = max(0, len(msgs) - offset)
        start = max(0, end - max(1, limit))
        return {
            "space_id": space_id,
            "name": _group_name(d),
            "total": len(msgs),
            "messages": [_show(m) for m in msgs[start:end]],
        }

    def thread(space_id: str, topic_id: str) -> dict[str, Any]:
        """All messages of one thread (topic) in a space, oldest first."""
        d = _space_dir(world, space_id)
        msgs = [_show(m) for m in _messages(d) if m.get("topic_id") == topic_id]
        if not msgs:
            raise ApexError(f"no thread {topic_id!r} in space {space_id!r}")
        return {"space_id": space_id, "topic_id": topic_id, "messages": msgs}

    def _add(space_id: str, text: str, topic_id: str | None) -> dict[str, Any]:
        if not text.strip():
            raise ApexError("message text is empty")
        with world.lock:
            d = _space_dir(world, space_id)
            msgs = _messages(d)
            if topic_id is not None and not any(m.get("topic_id") == topic_id for m in msgs):
                raise ApexError(f"no thread {topic_id!r} in space {space_id!r}")
            msg = {
                "message_id": f"{space_id}/{uuid.uuid4().hex[:16]}",
                "creator": me(world),
                "created_date": _now(),
                "text": text,
                "topic_id": topic_id or uuid.uuid4().hex[:12],
                "reactions": [],
            }
            msgs.append(msg)
            _save(d, msgs)
        return _show(msg)

    def post(space_id: str, text: str) -> dict[str, Any]:
        """Post a new message (starting a new thread) in a space."""
        return _add(space_id, text, None)

    def reply(space_id: str, topic_id: str, text: str) -> dict[str, Any]:
        """Reply in an existing thread (topic_id) of a space."""
        return _add(space_id, text, topic_id)

    def react(space_id: str, message_id: str, emoji: str) -> dict[str, Any]:
        """Add an emoji reaction (e.g. 'thumbsup' or '👍') from the world's user to a message."""
        with world.lock:
            d = _space_dir(world, space_id)
            msgs = _messages(d)
            for m in msgs:
                if m.get("message_id") == message_id:
                    email = me(world)["email"]
                    reactions = m.setdefault("reactions", [])
                    for r in reactions:
                        if isinstance(r, dict) and _emoji(r) == emoji:
                            key = "reactor_emails" if "reactor_emails" in r else "users"
                            if email not in r.setdefault(key, []):
                                r[key].append(email)
                            break
                    else:
                        reactions.append({"emoji": emoji, "users": [email]})
                    _save(d, msgs)
                    return _show(m)
        raise ApexError(f"no message {message_id!r} in space {space_id!r}")

    return [list_channels, history, thread, post, reply, react]


def probe(world: World) -> str:
    from apexrl.worlds.appdata import require_data

    g = _groups(world)
    require_data(world.apps_path(CHAT_DIR), int(g.is_dir()), "chat export (a Groups folder)")
    n_spaces = n_msgs = 0
    if g.is_dir():
        for d in sorted(g.iterdir()):
            if d.is_dir():
                if (d / "group_info.json").is_file():
                    _read_json(d / "group_info.json")
                n_msgs += len(_messages(d))
                n_spaces += 1
    me(world)
    return f"{n_spaces} spaces, {n_msgs} messages"
