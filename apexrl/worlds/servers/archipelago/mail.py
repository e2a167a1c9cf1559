"""archipelago `mail` server over the world's mbox files: list, read, search, send,
reply, reply-all, forward. Mail ids are RFC 5322 Message-IDs ('<id@domain>')."""

from __future__ import annotations

import email.utils
import mimetypes
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import mail as _mail
from apexrl.worlds.world import World

Addresses = str | list[str]
MailId = Annotated[str, Field(description="Message-ID of the email, e.g. '<abc@example.com>'.")]
BodyFormat = Literal["plain", "html"]


def _addrs(v: Addresses | None, what: str) -> list[str]:
    if v is None:
        return []
    items = [v] if isinstance(v, str) else list(v)
    out = [a.strip() for a in items if a and a.strip()]
    for a in out:
        if "@" not in a or " " in a.strip():
            raise ApexError(f"{what}: {a!r} is not an email address (pass a list for several)")
    return out


def _compose(
    world: World,
    sender: str,
    to: list[str],
    subject: str,
    body: str,
    cc: list[str],
    bcc: list[str],
    attachments: list[str] | None,
    body_format: str,
):
    msg = _mail._new_message(world, sender, to, subject, body, cc or None)
    if body_format == "html":
        msg.set_content(body, subtype="html")
    if bcc:
        msg["Bcc"] = ", ".join(bcc)
    for a in attachments or []:
        p = world.fs_path(a, must_exist=True)
        if not p.is_file():
            raise ApexError(f"attachment {a!r} is not a file")
        ctype = (mimetypes.guess_type(p.name)[0] or "application/octet-stream").split("/", 1)
        msg.add_attachment(p.read_bytes(), maintype=ctype[0], subtype=ctype[1], filename=p.name)
    return msg


def _sent(msg, box: str) -> dict[str, Any]:
    return {
        "success": True,
        "mail_id": msg["Message-ID"],
        "from": msg["From"],
        "to": msg["To"],
        "cc": msg["Cc"],
        "subject": msg["Subject"],
        "mailbox": box,
    }


def _summary(m: _mail.Mail) -> dict[str, Any]:
    s = m.summary()
    return {"mail_id": s.pop("message_id"), **s}


def _parse_date(s: str | None, what: str) -> datetime | None:
    if not s:
        return None
    try:
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ApexError(
            f"{what} {s!r} is not ISO 8601 ('YYYY-MM-DD' or 'YYYY-MM-DDTHH:MM:SS')"
        ) from None
    return d if d.tzinfo else d.replace(tzinfo=UTC)


def _bare(header: str) -> list[str]:
    """The addresses of an address header, without display names."""
    return [a for _, a in email.utils.getaddresses([header]) if a]


def _stamp(m: _mail.Mail) -> str:
    return email.utils.format_datetime(m.date) if m.date else m.header("Date")


def _listing(mails: list[_mail.Mail]) -> str:
    """archipelago's list of emails: numbered entries of id, time, sender, recipients
    (with their count), subject and the id replied to, a blank line apart."""
    if not mails:
        return "No emails found"
    entries = []
    for i, m in enumerate(mails, 1):
        to = _bare(m.header("To"))
        lines = [
            f"{i}. Mail ID: {m.message_id}",
            f"Timestamp: {_stamp(m)}",
            f"From: {(_bare(m.header('From')) or [''])[0]}",
            f"To: {', '.join(to)} ({len(to)} recipient(s))",
            f"Subject: {m.header('Subject')}",
        ]
        if m.header("In-Reply-To"):
            lines.append(f"In Reply To: {m.header('In-Reply-To').strip()}")
        entries.append("\n".join(lines))
    return f"Found {len(mails)} email(s):\n\n" + "\n\n".join(entries)


def _shown(m: _mail.Mail) -> str:
    """One email as archipelago shows it: headers, body format, then the body."""
    lines = [
        f"Mail ID: {m.message_id}",
        f"Timestamp: {_stamp(m)}",
        f"From: {(_bare(m.header('From')) or [''])[0]}",
        f"To: {', '.join(_bare(m.header('To')))}",
    ]
    if m.header("Cc"):
        lines.append(f"CC: {', '.join(_bare(m.header('Cc')))}")
    if m.header("Bcc"):
        lines.append(f"BCC: {', '.join(_bare(m.header('Bcc')))}")
    types = {p.get_content_type() for p in m.msg.walk() if not p.is_multipart()}
    html = "text/html" in types and "text/plain" not in types
    lines += [f"Subject: {m.header('Subject')}", f"Body Format: {'html' if html else 'plain'}"]
    if m.header("In-Reply-To"):
        lines.append(f"In Reply To: {m.header('In-Reply-To').strip()}")
    lines += ["", "Body:", _mail.body_text(m.msg)]
    names = [p.get_filename() for p in m.msg.walk() if p.get_filename()]
    if names:
        lines += ["", "Attachments:", *(f"  - {n}" for n in names)]
    return "\n".join(lines)


def tools(world: World) -> list:
    def list_mails(
        limit: Annotated[int, Field(ge=1, le=100, description="Emails per page.")] = 50,
        offset: Annotated[int, Field(ge=0, description="Emails to skip.")] = 0,
    ) -> str:
        """List emails, newest first: id, time, sender, recipients, subject."""
        return _listing(_mail.load_all(world)[offset : offset + limit])

    def read_mail(mail_id: MailId) -> str:
        """Read one email: headers, body format, body and attachment names."""
        want = (mail_id or "").strip()
        for m in _mail.load_all(world):
            if m.message_id == want or m.message_id.strip("<>") == want.strip("<>"):
                return _shown(m)
        return f"Mail not found with ID: {mail_id}"

    def search_mail(
        from_email: str | None = None,
        to_email: str | None = None,
        subject: str | None = None,
        after_date: str | None = None,
        before_date: str | None = None,
        thread_id: str | None = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 50,
    ) -> str:
        """Search emails: from_email, to_email and subject match partially (case-insensitive),
        after_date/before_date are ISO dates, thread_id matches exactly. Newest first."""
        lo, hi = _parse_date(after_date, "after_date"), _parse_date(before_date, "before_date")
        hits = []
        for m in _mail.load_all(world):
            if from_email and from_email.lower() not in m.header("From").lower():
                continue
            if to_email and to_email.lower() not in (m.header("To") + " " + m.header("Cc")).lower():
                continue
            if subject and subject.lower() not in m.header("Subject").lower():
                continue
            if thread_id and m.thread_id != thread_id.strip():
                continue
            if (lo and (m.date is None or m.date <= lo)) or (
                hi and (m.date is None or m.date >= hi)
            ):
                continue
            hits.append(m)
        return _listing(hits[:limit])

    def send_mail(
        from_email: Annotated[str, Field(description="Sender address.")],
        to_email: Annotated[Addresses, Field(description="Recipient address or list.")],
        subject: str,
        body: str,
        cc: Addresses | None = None,
        bcc: Addresses | None = None,
        attachments: Annotated[list[str] | None, Field(description="File paths to attach.")] = None,
        body_format: BodyFormat = "plain",
        thread_id: str | None = None,
        in_reply_to: str | None = None,
        references: list[str] | None = None,
    ) -> dict[str, Any]:
        """Send a new email (stored in the world's mailbox). Returns its mail_id."""
        to = _addrs(to_email, "to_email")
        if not to:
            raise ApexError("to_email is required")
        sender = _addrs(from_email, "from_email")
        if len(sender) != 1:
            raise ApexError("from_email must be one address")
        with world.lock:
            msg = _compose(
                world,
                sender[0],
                to,
                subject,
                body,
                _addrs(cc, "cc"),
                _addrs(bcc, "bcc"),
                attachments,
                body_format,
            )
            if in_reply_to:
                msg["In-Reply-To"] = in_reply_to
            refs = list(references or [])
            if thread_id and thread_id not in refs:
                refs.insert(0, thread_id)
            if in_reply_to and in_reply_to not in refs:
                refs.append(in_reply_to)
            if refs:
                msg["References"] = " ".join(refs)
            box = _mail._append(world, msg)
        return _sent(msg, box)

    def _reply(original_mail_id, body, attachments, body_format, reply_all: bool):
        with world.lock:
            orig, mails = _mail._find(world, original_mail_id)
            me = _mail.owner_address(world, mails)
            sender = orig.header("Reply-To") or orig.header("From")
            to = [a for _, a in email.utils.getaddresses([sender]) if a] or [sender]
            cc: list[str] = []
            if reply_all:
                for _, addr in email.utils.getaddresses([orig.header("To"), orig.header("Cc")]):
                    low = addr.lower()
                    if addr and low != me and low not in (t.lower() for t in to) and addr not in cc:
                        cc.append(addr)
            subj = orig.header("Subject")
            if not subj.lower().startswith("re:"):
                subj = f"Re: {subj}"
            msg = _compose(world, me, to, subj, body, cc, [], attachments, body_format)
            msg["In-Reply-To"] = orig.message_id
            msg["References"] = " ".join([*orig.references, orig.message_id])
            box = _mail._append(world, msg)
        return _sent(msg, box)

    def reply_mail(
        original_mail_id: MailId,
        body: Annotated[str, Field(description="The reply (without the quoted original).")],
        attachments: list[str] | None = None,
        body_format: BodyFormat = "plain",
    ) -> dict[str, Any]:
        """Reply to the sender of an email (threading headers kept)."""
        return _reply(original_mail_id, body, attachments, body_format, reply_all=False)

    def reply_all_mail(
        original_mail_id: MailId,
        body: Annotated[str, Field(description="The reply (without the quoted original).")],
        attachments: list[str] | None = None,
        body_format: BodyFormat = "plain",
    ) -> dict[str, Any]:
        """Reply to the sender and every other recipient (To and Cc) of an email."""
        return _reply(original_mail_id, body, attachments, body_format, reply_all=True)

    def forward_mail(
        original_mail_id: MailId,
        to_email: Addresses,
        body: Annotated[str | None, Field(description="Note above the forwarded message.")] = None,
        cc: Addresses | None = None,
        bcc: Addresses | None = None,
        attachments: list[str] | None = None,
        body_format: BodyFormat = "plain",
    ) -> dict[str, Any]:
        """Forward an email (its text below a separator) to new recipients."""
        to = _addrs(to_email, "to_email")
        if not to:
            raise ApexError("to_email is required")
        with world.lock:
            orig, mails = _mail._find(world, original_mail_id)
            me = _mail.owner_address(world, mails)
            subj = orig.header("Subject")
            if not subj.lower().startswith(("fwd:", "fw:")):
                subj = f"Fwd: {subj}"
            text = (
                f"{body or ''}\n\n---------- Forwarded message ---------\n"
                f"From: {orig.header('From')}\nDate: {orig.header('Date')}\n"
                f"Subject: {orig.header('Subject')}\nTo: {orig.header('To')}\n\n"
                f"{_mail.body_text(orig.msg)}"
            )
            msg = _compose(
                world,
                me,
                to,
                subj,
                text,
                _addrs(cc, "cc"),
                _addrs(bcc, "bcc"),
                attachments,
                body_format,
            )
            msg["References"] = " ".join([*orig.references, orig.message_id])
            box = _mail._append(world, msg)
        return _sent(msg, box)

    return [send_mail, list_mails, read_mail, search_mail, reply_mail, reply_all_mail, forward_mail]


def probe(world: World) -> str:
    return _mail.probe(world)
