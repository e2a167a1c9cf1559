"""Mail over `.apps_data/mail/*.mbox` (stdlib mailbox): list, read, search, send,
reply, forward. Threads follow Message-ID / In-Reply-To / References. Sent mail is
appended to the world's mbox (one named sent*.mbox when there is one)."""

from __future__ import annotations

import email.policy
import email.utils
import mailbox
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage, Message
from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.servers import cap_text
from apexrl.worlds.world import World

MAIL_DIR = "mail"
BODY_LIMIT = 20_000


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


def body_text(msg: Message) -> str:
    if msg.is_multipart():
        for part in msg.walk():
            if part.get_content_type() == "text/plain" and not part.get_filename():
                return _decode(part)
        for part in msg.walk():
            if part.get_content_type() == "text/html" and not part.get_filename():
                return _decode(part)
        return ""
    return _decode(msg)


def _decode(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if payload is None:
        p = part.get_payload()
        return p if isinstance(p, str) else ""
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, errors="replace")
    except LookupError:
        return payload.decode("utf-8", errors="replace")


def _attachments(msg: Message) -> list[str]:
    return [p.get_filename() for p in msg.walk() if p.get_filename()] if msg.is_multipart() else []


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


def _find(world: World, message_id: str) -> tuple[Mail, list[Mail]]:
    mails = load_all(world)
    want = message_id.strip()
    for m in mails:
        if m.message_id == want or m.message_id.strip("<>") == want.strip("<>"):
            return m, mails
    raise ApexError(
        f"no message with id {message_id!r}", hint="use list or search to find message ids"
    )


def _target_mbox(world: World) -> Path:
    files = mbox_files(world)
    for f in files:
        if f.stem.lower().startswith("sent"):
            return f
    if files:
        return files[0]
    d = _mail_dir(world)
    d.mkdir(parents=True, exist_ok=True)
    return d / "mailbox.mbox"


def _append(world: World, msg: EmailMessage) -> str:
    target = _target_mbox(world)
    box = mailbox.mbox(str(target), create=True)
    box.lock()
    try:
        box.add(mailbox.mboxMessage(msg))
        box.flush()
    finally:
        box.unlock()
        box.close()
    return target.name


def _new_message(
    world: World, sender: str, to: list[str], subject: str, body: str, cc: list[str] | None
) -> EmailMessage:
    msg = EmailMessage(policy=email.policy.SMTP)
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    if cc:
        msg["Cc"] = ", ".join(cc)
    msg["Subject"] = subject
    msg["Date"] = email.utils.format_datetime(datetime.now(UTC))
    domain = sender.split("@")[-1] if "@" in sender else "apexrl.local"
    msg["Message-ID"] = email.utils.make_msgid(domain=domain)
    msg.set_content(body)
    return msg


def tools(world: World) -> list:
    def list(limit: int = 20, offset: int = 0, mailbox: str | None = None) -> dict[str, Any]:  # noqa: A001
        """List emails, newest first: message_id, thread_id, date, from, to, subject.
        Page with offset/limit; `mailbox` filters by mbox file name."""
        mails = [m for m in load_all(world) if mailbox is None or m.mbox == mailbox]
        return {
            "total": len(mails),
            "messages": [m.summary() for m in mails[offset : offset + max(1, limit)]],
        }

    def read(message_id: str) -> dict[str, Any]:
        """Read one email by message_id: headers, body text, attachment names, and the
        other messages of its thread."""
        m, mails = _find(world, message_id)
        thread = [
            {
                "message_id": x.message_id,
                "from": x.header("From"),
                "subject": x.header("Subject"),
                "date": x.summary()["date"],
            }
            for x in reversed(mails)
            if x.thread_id == m.thread_id and x.message_id != m.message_id
        ]
        return {
            **m.summary(),
            "cc": m.header("Cc"),
            "in_reply_to": m.header("In-Reply-To"),
            "references": m.references,
            "body": cap_text(body_text(m.msg), BODY_LIMIT),
            "attachments": _attachments(m.msg),
            "thread": thread,
        }

    def search(query: str, field: str = "any", limit: int = 20) -> dict[str, Any]:
        """Search emails (case-insensitive) in `field`: any, from, to, subject or body.
        Newest first."""
        q = query.lower()
        if field not in ("any", "from", "to", "subject", "body"):
            raise ApexError(f"unknown field {field!r}; use any, from, to, subject or body")
        hits = []
        for m in load_all(world):
            hay = {
                "from": m.header("From"),
                "to": m.header("To") + " " + m.header("Cc"),
                "subject": m.header("Subject"),
            }
            if field in ("any", "body"):
                hay["body"] = body_text(m.msg)
            vals = hay.values() if field == "any" else [hay[field]]
            if any(q in v.lower() for v in vals):
                hits.append(m.summary())
        return {"total": len(hits), "messages": hits[: max(1, limit)]}

    def send(to: list[str], subject: str, body: str, cc: list[str] | None = None) -> dict[str, Any]:
        """Send a new email (it is stored in the world's mailbox). Returns its message_id."""
        if not to:
            raise ApexError("`to` is empty")
        with world.lock:
            me = owner_address(world)
            msg = _new_message(world, me, to, subject, body, cc)
            box = _append(world, msg)
        return {"sent": True, "message_id": msg["Message-ID"], "mailbox": box, "from": me}

    def reply(message_id: str, body: str, reply_all: bool = False) -> dict[str, Any]:
        """Reply to an email (to its sender; with reply_all also to the other recipients).
        Threading headers (In-Reply-To, References) are set."""
        with world.lock:
            orig, mails = _find(world, message_id)
            me = owner_address(world, mails)
            sender = orig.header("Reply-To") or orig.header("From")
            to = [sender]
            cc: list[str] = []
            if reply_all:
                for _, addr in email.utils.getaddresses([orig.header("To"), orig.header("Cc")]):
                    if addr and addr.lower() != me and addr.lower() not in sender.lower():
                        cc.append(addr)
            subj = orig.header("Subject")
            if not subj.lower().startswith("re:"):
                subj = f"Re: {subj}"
            quoted = "\n".join("> " + ln for ln in body_text(orig.msg).splitlines())
            msg = _new_message(
                world,
                me,
                to,
                subj,
                f"{body}\n\nOn {orig.header('Date')}, {orig.header('From')} wrote:\n{quoted}\n",
                cc,
            )
            msg["In-Reply-To"] = orig.message_id
            msg["References"] = " ".join([*orig.references, orig.message_id])
            box = _append(world, msg)
        return {"sent": True, "message_id": msg["Message-ID"], "to": to, "cc": cc, "mailbox": box}

    def forward(message_id: str, to: list[str], body: str = "") -> dict[str, Any]:
        """Forward an email to new recipients with an optional note above it."""
        if not to:
            raise ApexError("`to` is empty")
        with world.lock:
            orig, mails = _find(world, message_id)
            me = owner_address(world, mails)
            subj = orig.header("Subject")
            if not subj.lower().startswith(("fwd:", "fw:")):
                subj = f"Fwd: {subj}"
            fwd = (
                f"{body}\n\n---------- Forwarded message ----------\n"
                f"From: {orig.header('From')}\nDate: {orig.header('Date')}\n"
                f"Subject: {orig.header('Subject')}\nTo: {orig.header('To')}\n\n"
                f"{body_text(orig.msg)}"
            )
            msg = _new_message(world, me, to, subj, fwd, None)
            msg["References"] = " ".join([*orig.references, orig.message_id])
            box = _append(world, msg)
        return {"sent": True, "message_id": msg["Message-ID"], "to": to, "mailbox": box}

    return [list, read, search, send, reply, forward]


def probe(world: World) -> str:
    from apexrl.worlds.appdata import require_data

    require_data(_mail_dir(world), len(mbox_files(world)), "mailbox (.mbox)")
    mails = load_all(world)  # raises on an unreadable mbox
    owner = owner_address(world, mails)
    return f"{len(mails)} messages in {len(mbox_files(world))} mbox files; user {owner}"
