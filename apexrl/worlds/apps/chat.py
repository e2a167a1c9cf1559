"""Chat over a Google-Chat-export-like tree in `.apps_data/chat/`:

    Groups/<space_id>/group_info.json   {"name": ..., "members": [...]}
    Groups/<space_id>/messages.json     {"messages": [{message_id, creator: {name, email},
                                          created_date (ISO), text, topic_id, reactions: []}]}
    Users/<user_id>/user_info.json      {"user": {"name", "email"}} (the world's user)

Reading spaces, messages and users, and the readiness check.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def user_infos(users_dir: Path) -> Iterator[tuple[str, Any]]:
    """(folder name, its user_info.json's user) of each user under `users_dir`, by name."""
    if not users_dir.is_dir():
        return
    for u in sorted(users_dir.iterdir()):
        f = u / "user_info.json"
        if f.is_file():
            data = _read_json(f)
            yield u.name, data.get("user", data) if isinstance(data, dict) else {}


def users(world: World) -> list[dict[str, str]]:
    out = []
    for _, info in user_infos(_chat_folder(world, "Users")):
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
