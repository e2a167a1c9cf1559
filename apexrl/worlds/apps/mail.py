"""Mail over `.apps_data/mail/*.mbox` (stdlib mailbox): the world's mbox files, their
messages, the world user's address, and the readiness check."""

from __future__ import annotations

import email.policy
import email.utils
import mailbox
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path
from typing import Any

from apexrl.worlds.world import World

MAIL_DIR = "mail"


@dataclass
class Mail:
    message_id: str
    mbox: str
    msg: Message

    def header(self, name: str) -> str:
        v = self.msg.get(name)
        return str(v) if v is not None else ""

    @property
    def references(self) -> list[str]:
        return self.header("References").split()

    @property
    def thread_id(self) -> str:
        refs = self.references
        if refs:
            return refs[0]
        irt = self.header("In-Reply-To").strip()
        return irt or self.message_id

    @property
    def date(self) -> datetime | None:
        try:
            d = email.utils.parsedate_to_datetime(self.header("Date"))
        except (TypeError, ValueError, IndexError):
            return None
        if d is not None and d.tzinfo is None:
            d = d.replace(tzinfo=UTC)
        return d

    def summary(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "thread_id": self.thread_id,
            "date": self.date.isoformat() if self.date else self.header("Date"),
            "from": self.header("From"),
            "to": self.header("To"),
            "subject": self.header("Subject"),
            "mailbox": self.mbox,
        }


def _mail_dir(world: World) -> Path:
    return world.apps_path(MAIL_DIR)


def mbox_files(world: World) -> list[Path]:
    """The world's mbox files, at any depth real exports use (apexrl.worlds.appdata)."""
    from apexrl.worlds.appdata import find_files

    return find_files(_mail_dir(world), suffixes=(".mbox",), names=("mbox",))


def _label(world: World, f: Path) -> str:
    """An mbox's name as the agent sees it: its path under .apps_data/mail/."""
    try:
        return f.relative_to(_mail_dir(world)).as_posix()
    except ValueError:
        return f.name


def load_all(world: World) -> list[Mail]:
    out: list[Mail] = []
    for f in mbox_files(world):
        box = mailbox.mbox(str(f), create=False)
        try:
            for i, msg in enumerate(box):
                mid = (msg.get("Message-ID") or "").strip() or f"<{f.stem}-{i}@apexrl.local>"
                out.append(Mail(message_id=mid, mbox=_label(world, f), msg=msg))
        finally:
            box.close()
    out.sort(key=lambda m: m.date or datetime.min.replace(tzinfo=UTC), reverse=True)
    return out


def owner_address(world: World, mails: list[Mail] | None = None) -> str:
    """The world user's address: the one that receives most mail in the world's data as
    it was first read (mail sent during a run does not change it)."""
    if "mail_owner" in world.cache:
        return world.cache["mail_owner"]
    mails = load_all(world) if mails is None else mails
    counts: Counter[str] = Counter()
    for m in mails:
        for _, addr in email.utils.getaddresses([m.header("To"), m.header("Cc")]):
            if addr:
                counts[addr.lower()] += 1
    owner = counts.most_common(1)[0][0] if counts else "me@example.com"
    world.cache["mail_owner"] = owner
    return owner


def probe(world: World) -> str:
    from apexrl.worlds.appdata import require_data

    require_data(_mail_dir(world), len(mbox_files(world)), "mailbox (.mbox)")
    mails = load_all(world)  # raises on an unreadable mbox
    owner = owner_address(world, mails)
    return f"{len(mails)} messages in {len(mbox_files(world))} mbox files; user {owner}"
