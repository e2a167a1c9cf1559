"""archipelago `mail` server over the world's mbox: list, read, search, send, reply,
reply-all, forward. Mail ids are RFC 5322 Message-IDs ('<id@domain>').

Behaviour follows archipelago's server, as running it shows: one mailbox (the first
`.mbox` found under `.apps_data/mail/`, else `sent.mbox` there), read and appended to;
a mail's fields are its raw headers (addresses without display names); new mail carries
`X-Thread-ID` (its own id, or the thread it answers) and `X-Body-Format`; attachments
are names listed in `X-Attachments`; a reply comes from the first To address of the
mail it answers. Failures a model can fix are answered in text, as archipelago does.

Options (off by default; each a deliberate difference from archipelago):
  APEXRL_MAIL_ALL_MBOXES=1   read every mbox under mail/, not only the first;
  APEXRL_MAIL_DATES_AS_UTC=1 search dates without an offset are taken as UTC (archipelago
                             compares them with the mails' zoned dates, which fails, so
                             no mail matches).
  APEXRL_MAIL_CREATE_FOLDER=1 sending in a world without .apps_data/mail/ creates it and
                             sent.mbox there (archipelago fails: FileNotFoundError).
"""

from __future__ import annotations

import email.utils
import errno
import mailbox
import os
import re
from datetime import UTC, datetime
from email.header import Header, decode_header
from email.message import EmailMessage
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from apexrl.worlds.apps import mail as _mail
from apexrl.worlds.servers import Failed, Server, Style
from apexrl.worlds.world import World

SERVER = Server("mail", app="mail", aliases=("email", "e_mail"))

Addresses = str | list[str]
MailId = Annotated[str, Field(description="Message-ID of the email, e.g. '<abc@example.com>'.")]
BodyFormat = Literal["plain", "html"]

ALL_MBOXES_ENV = "APEXRL_MAIL_ALL_MBOXES"
DATES_UTC_ENV = "APEXRL_MAIL_DATES_AS_UTC"
CREATE_FOLDER_ENV = "APEXRL_MAIL_CREATE_FOLDER"
DEFAULT_MBOX = "sent.mbox"
_ADDRESS = re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SUBJECT_MAX = 998


def _on(env: str) -> bool:
    return os.environ.get(env, "").strip().lower() in ("1", "true", "yes")


class _Mbox(mailbox.mbox):
    """An mbox whose From_ lines may hold UTF-8 (accented addresses in real exports)."""

    def get_message(self, key):
        start, stop = self._lookup(key)
        self._file.seek(start)
        first = self._file.readline().rstrip(b"\r\n").decode("utf-8", errors="replace")
        rest = self._file.read(stop - self._file.tell()).replace(os.linesep.encode(), b"\n")
        msg = mailbox.mboxMessage(rest)
        msg.set_from(first[5:])
        return msg


def _mailbox_path(world: World) -> Path:
    """The mailbox archipelago uses: the first .mbox in a top-down walk of mail/."""
    root = world.apps_path(_mail.MAIL_DIR)
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            hits = sorted(f for f in filenames if f.endswith(".mbox"))
            if hits:
                return Path(dirpath) / hits[0]
    return root / DEFAULT_MBOX


def _boxes(world: World) -> list[Path]:
    if _on(ALL_MBOXES_ENV):
        return _mail.mbox_files(world)
    p = _mailbox_path(world)
    return [p] if p.is_file() else []


def _text(v: Any) -> str:
    """A header as text: raw bytes a compat32 header kept are read as UTF-8."""
    if v is None:
        return ""
    if isinstance(v, Header):
        return "".join(
            d.decode(c if c and c != "unknown-8bit" else "utf-8", errors="replace")
            if isinstance(d, bytes)
            else d
            for d, c in decode_header(v)
        )
    return str(v)


def _addresses(v: Any) -> list[str]:
    """Addresses of a header split at commas, display names dropped."""
    out = []
    for part in _text(v).split(","):
        addr = email.utils.parseaddr(part.strip())[1]
        if addr:
            out.append(addr)
    return out


def _payload_text(part) -> str:
    data = part.get_payload(decode=True)
    return data.decode("utf-8", errors="ignore") if isinstance(data, bytes) else ""


def _body(msg) -> str:
    if not msg.is_multipart():
        data = msg.get_payload(decode=True)
        return data.decode("utf-8", errors="ignore") if isinstance(data, bytes) else ""
    body = ""
    for part in msg.walk():
        kind = part.get_content_type()
        if kind == "text/plain" and part.get_payload(decode=True) is not None:
            return _payload_text(part)
        if kind == "text/html" and not body:
            body = _payload_text(part)
    return body


def _record(msg) -> dict[str, Any]:
    """One mail's fields as archipelago reads them from its headers."""
    att = _text(msg.get("X-Attachments"))
    refs = _text(msg.get("References"))
    return {
        "mail_id": _text(msg.get("Message-ID")),
        "timestamp": _text(msg.get("Date")),
        "from": email.utils.parseaddr(_text(msg.get("From")))[1],
        "to": _addresses(msg.get("To")),
        "subject": _text(msg.get("Subject")),
        "body": _body(msg),
        "body_format": _text(msg.get("X-Body-Format")) or "plain",
        "cc": _addresses(msg.get("Cc")),
        "bcc": _addresses(msg.get("Bcc")),
        "attachments": [a.strip() for a in att.split(",") if a.strip()],
        "thread_id": msg.get("X-Thread-ID"),
        "in_reply_to": msg.get("In-Reply-To"),
        "references": refs.split() if refs else [],
    }


def _messages(world: World):
    for p in _boxes(world):
        box = _Mbox(str(p), create=False)
        try:
            yield from box
        finally:
            box.close()


def _when(stamp: str) -> datetime | None:
    try:
        return email.utils.parsedate_to_datetime(stamp)
    except (TypeError, ValueError, IndexError):
        try:
            return datetime.fromisoformat(stamp)
        except (TypeError, ValueError):
            return None


def _newest_first(items: list[tuple[dict[str, Any], datetime | None]]) -> list[dict[str, Any]]:
    items.sort(key=lambda t: t[1] if t[1] is not None else _EPOCH, reverse=True)
    return [r for r, _ in items]


def _summary(r: dict[str, Any]) -> str:
    lines = [
        f"Mail ID: {r['mail_id']}",
        f"Timestamp: {r['timestamp']}",
        f"From: {r['from']}",
        f"To: {', '.join(r['to'])} ({len(r['to'])} recipient(s))",
        f"Subject: {r['subject']}",
    ]
    if r["thread_id"]:
        lines.append(f"Thread: {r['thread_id']}")
    if r["in_reply_to"]:
        lines.append(f"In Reply To: {r['in_reply_to']}")
    return "\n".join(lines)


def _listing(records: list[dict[str, Any]]) -> str:
    if not records:
        return "No emails found"
    parts = [f"{i}. {_summary(r)}" for i, r in enumerate(records, 1)]
    return f"Found {len(records)} email(s):\n\n" + "\n\n".join(parts)


def _shown(r: dict[str, Any]) -> str:
    lines = [
        f"Mail ID: {r['mail_id']}",
        f"Timestamp: {r['timestamp']}",
        f"From: {r['from']}",
        f"To: {', '.join(r['to'])}",
    ]
    if r["cc"]:
        lines.append(f"CC: {', '.join(r['cc'])}")
    if r["bcc"]:
        lines.append(f"BCC: {', '.join(r['bcc'])}")
    lines += [f"Subject: {r['subject']}", f"Body Format: {r['body_format']}"]
    if r["thread_id"]:
        lines.append(f"Thread ID: {r['thread_id']}")
    if r["in_reply_to"]:
        lines.append(f"In Reply To: {r['in_reply_to']}")
    lines += ["", "Body:", r["body"]]
    if r["attachments"]:
        lines += ["", "Attachments:", *(f"  - {a}" for a in r["attachments"])]
    return "\n".join(lines)


def _as_list(v: Addresses | None) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


def _invalid(field: str, message: str) -> Failed:
    """An argument archipelago's request model refuses (before its tool runs)."""
    why = f"Validation error: input.{field}: Value error, {message}"
    return Failed(why, Style.INTERNAL_ERROR, tool="")


def _check_send(sender: str, to: list[str], cc: list[str], bcc: list[str], subject: str):
    """Raise the first argument archipelago's request model refuses."""
    if not _ADDRESS.match(sender or ""):
        raise _invalid("from_email", "Invalid from_email address")
    if not to:
        raise _invalid("to_email", "to_email must contain at least one email address")
    for field, values in (("to_email", to), ("cc", cc), ("bcc", bcc)):
        for a in values:
            if not _ADDRESS.match(a):
                raise _invalid(field, f"Invalid {field} email address: {a}")
    if not subject or not subject.strip():
        raise _invalid("subject", "Subject cannot be empty")
    if len(subject) > _SUBJECT_MAX:
        raise _invalid("subject", f"Subject must be {_SUBJECT_MAX} characters or less")
    return None


def _append(world: World, msg: EmailMessage) -> None:
    target = _mailbox_path(world)
    target.parent.mkdir(parents=True, exist_ok=True)
    box = _Mbox(str(target), create=True)
    box.lock()
    try:
        box.add(msg)
        box.flush()
    finally:
        box.unlock()
        box.close()


def _send(
    world: World,
    *,
    sender: str,
    to: list[str],
    subject: str,
    body: str,
    cc: list[str],
    bcc: list[str],
    attachments: list[str],
    body_format: str,
    thread_id: str | None = None,
    in_reply_to: str | None = None,
    references: list[str] | None = None,
) -> str:
    """Append a new mail to the mailbox; the confirmation archipelago prints."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Subject"] = subject
    msg["Date"] = email.utils.format_datetime(datetime.now().astimezone())
    mail_id = email.utils.make_msgid(domain=sender.split("@")[-1])
    msg["Message-ID"] = mail_id
    if thread_id or not in_reply_to:
        msg["X-Thread-ID"] = thread_id or mail_id
    refs = list(references or [])
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        if in_reply_to not in refs:
            refs.append(in_reply_to)
    if refs:
        msg["References"] = " ".join(refs)
    msg["X-Body-Format"] = body_format
    if cc:
        msg["Cc"] = ", ".join(cc)
    if bcc:
        msg["Bcc"] = ", ".join(bcc)
    if attachments:
        msg["X-Attachments"] = ", ".join(attachments)
    msg.set_content(body, subtype="html" if body_format == "html" else "plain")
    with world.lock:
        if not _mailbox_path(world).parent.is_dir() and not _on(CREATE_FOLDER_ENV):
            # as archipelago: no mail folder, no mailbox file to create (its open fails)
            return f"Error: {FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))!r}"
        _append(world, msg)
    return f"Mail sent successfully! Mail ID: {mail_id}, Recipients: {len(to) + len(cc) + len(bcc)}"


def _original(world: World, mail_id: str) -> dict[str, Any] | None:
    for msg in _messages(world):
        if msg.get("Message-ID") == mail_id:
            return _record(msg)
    return None


def _date_arg(value: str, end_of_day: bool) -> datetime | None:
    try:
        d = datetime.fromisoformat(value)
    except ValueError:
        try:
            d = datetime.fromisoformat(f"{value}T{'23:59:59' if end_of_day else '00:00:00'}")
        except ValueError:
            return None
    if d.tzinfo is None and _on(DATES_UTC_ENV):
        d = d.replace(tzinfo=UTC)
    return d


def _send_checked(
    world: World,
    sender: str,
    recipients: tuple[Addresses, Addresses | None, Addresses | None],
    subject: str,
    body: str,
    attachments: list[str],
    body_format: str,
    **threading: Any,
) -> str:
    """_send of a mail whose sender and recipients (to, cc, bcc: an address or a list)
    the model chose: checked first the way archipelago's request model checks them."""
    to, cc, bcc = (_as_list(v) for v in recipients)
    _check_send(sender, to, cc, bcc, subject)
    return _send(
        world,
        sender=sender,
        to=to,
        subject=subject,
        body=body,
        cc=cc,
        bcc=bcc,
        attachments=attachments,
        body_format=body_format,
        **threading,
    )


def _reply(
    world: World, original_mail_id: str, body: str, attachments, body_format, reply_all: bool
):
    orig = _original(world, original_mail_id)
    if orig is None:
        return f"Error: Original mail not found with ID: {original_mail_id}"
    me = orig["to"][0] if orig["to"] else "user@example.com"
    cc: list[str] = []
    if reply_all:
        cc = [a for a in orig["to"] if a != me]
        cc += [a for a in orig["cc"] if a not in cc]
    subj = orig["subject"]
    if not subj.lower().startswith("re:"):
        subj = f"Re: {subj}"
    refs = list(orig["references"])
    if orig["mail_id"] not in refs:
        refs.append(orig["mail_id"])
    return _send(
        world,
        sender=me,
        to=[orig["from"]],
        subject=subj,
        body=body,
        cc=cc,
        bcc=[],
        attachments=list(attachments or []),
        body_format=body_format,
        thread_id=orig["thread_id"] or orig["mail_id"],
        in_reply_to=orig["mail_id"],
        references=refs,
    )


@SERVER.tool
def list_mails(
    world: World,
    limit: Annotated[int, Field(ge=1, le=100, description="Emails per page.")] = 50,
    offset: Annotated[int, Field(ge=0, description="Emails to skip.")] = 0,
) -> str:
    """List emails, newest first: id, time, sender, recipients, subject."""
    items = [(_record(m), _when(_text(m.get("Date")))) for m in _messages(world)]
    return _listing(_newest_first(items)[offset : offset + limit])


@SERVER.tool
def read_mail(world: World, mail_id: MailId) -> str:
    """Read one email: headers, body format, body and attachment names."""
    if not mail_id or not mail_id.strip():
        return "Error: Invalid mail_id - cannot be empty"
    found = _original(world, mail_id)
    return _shown(found) if found else f"Mail not found with ID: {mail_id}"


@SERVER.tool
def search_mail(
    world: World,
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
    lo = hi = None
    if after_date:
        lo = _date_arg(after_date, end_of_day=False)
        if lo is None:
            return "Error: Invalid after_date format. Use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS"
    if before_date:
        hi = _date_arg(before_date, end_of_day=True)
        if hi is None:
            return "Error: Invalid before_date format. Use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS"
    hits = []
    for m in _messages(world):
        r = _record(m)
        if from_email and from_email.lower() not in r["from"].lower():
            continue
        if to_email and not any(to_email.lower() in a.lower() for a in r["to"]):
            continue
        if subject and subject.lower() not in r["subject"].lower():
            continue
        when = _when(r["timestamp"])
        if lo or hi:
            try:  # a zoned date against a naive one does not compare: no match
                if when is None or (lo and when < lo) or (hi and when > hi):
                    continue
            except TypeError:
                continue
        if thread_id and r["thread_id"] != thread_id:
            continue
        hits.append((r, when))
    return _listing(_newest_first(hits)[:limit])


@SERVER.tool
def send_mail(
    world: World,
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
) -> Any:
    """Send a new email (stored in the world's mailbox). Returns its mail_id."""
    return _send_checked(
        world,
        from_email,
        (to_email, cc, bcc),
        subject,
        body,
        list(attachments or []),
        body_format,
        thread_id=thread_id,
        in_reply_to=in_reply_to,
        references=references,
    )


@SERVER.tool
def reply_mail(
    world: World,
    original_mail_id: MailId,
    body: Annotated[str, Field(description="The reply (without the quoted original).")],
    attachments: list[str] | None = None,
    body_format: BodyFormat = "plain",
) -> str:
    """Reply to the sender of an email (threading headers kept)."""
    return _reply(world, original_mail_id, body, attachments, body_format, reply_all=False)


@SERVER.tool
def reply_all_mail(
    world: World,
    original_mail_id: MailId,
    body: Annotated[str, Field(description="The reply (without the quoted original).")],
    attachments: list[str] | None = None,
    body_format: BodyFormat = "plain",
) -> str:
    """Reply to the sender and every other recipient (To and Cc) of an email."""
    return _reply(world, original_mail_id, body, attachments, body_format, reply_all=True)


@SERVER.tool
def forward_mail(
    world: World,
    original_mail_id: MailId,
    to_email: Addresses,
    body: Annotated[str | None, Field(description="Note above the forwarded message.")] = None,
    cc: Addresses | None = None,
    bcc: Addresses | None = None,
    attachments: list[str] | None = None,
    body_format: BodyFormat = "plain",
) -> Any:
    """Forward an email (its text below a separator) to new recipients."""
    orig = _original(world, original_mail_id)
    if orig is None:
        return f"Error: Original mail not found with ID: {original_mail_id}"
    subj = orig["subject"]
    if not subj.lower().startswith("fwd:"):
        subj = f"Fwd: {subj}"
    head = (
        [body, "", "---------- Forwarded message ---------"]
        if body
        else ["---------- Forwarded message ---------"]
    )
    head += [
        f"From: {orig['from']}",
        f"Date: {orig['timestamp']}",
        f"Subject: {orig['subject']}",
        f"To: {', '.join(orig['to'])}",
    ]
    if orig["cc"]:
        head.append(f"CC: {', '.join(orig['cc'])}")
    text = "\n".join([*head, "", orig["body"]])
    sender = orig["to"][0] if orig["to"] else "user@example.com"
    return _send_checked(
        world,
        sender,
        (to_email, cc, bcc),
        subj,
        text,
        [*orig["attachments"], *(attachments or [])],
        body_format,
    )


def probe(world: World) -> str:
    return _mail.probe(world)
