"""archipelago `calendar` server over the world's .ics files: list, read, create, update,
delete events. Times are {'dateTime': ISO, 'timeZone': ...} or {'date': 'YYYY-MM-DD'}.

Writes follow archipelago's server, as running it shows: new events go to
`calendar/calendar.ics` with ids `YYYYMMDD_HHMMSS_micro_xxxxxx`; an update rewrites the
event from the fields archipelago's event model holds (moved to the end of its file,
CREATED/DTSTAMP kept or stamped now, LAST-MODIFIED now); a `dateTime` is written as
given (its `timeZone` is not applied); answers are one line ("Event created successfully
(Event ID: ...)", "Failed: Event not found with ID: ...")."""

from __future__ import annotations

import secrets
import string
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import calendar as _cal
from apexrl.worlds.servers import Failed, Server, Style
from apexrl.worlds.world import World

SERVER = Server("calendar", app="calendar")

DEFAULT_FILE = "calendar.ics"  # where new events go, as archipelago's server does
PRODID = "-//Archipelago Calendar Server//EN"  # a new calendar file's PRODID (a format fact)
_EMPTY_SUMMARY = "Validation error: request.summary: Value error, Summary cannot be empty"
EventId = Annotated[str, Field(description="Event id from list_events or create_event.")]


class CalendarEventDateTime(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    date: str | None = Field(None, description="All-day date 'YYYY-MM-DD'")
    dateTime: str | None = Field(
        None, description="'YYYY-MM-DDTHH:MM:SS' (with offset or timeZone)"
    )  # noqa: N815,E501
    timeZone: str | None = Field(None, description="IANA time zone, e.g. 'America/New_York'")  # noqa: N815


class CalendarEventAttendee(BaseModel):
    email: str
    displayName: str | None = None  # noqa: N815
    responseStatus: str | None = None  # noqa: N815


class ReminderOverride(BaseModel):
    method: str
    minutes: int


class CalendarEventReminders(BaseModel):
    useDefault: bool = True  # noqa: N815
    overrides: list[ReminderOverride] | None = None


def _event(ev, cal_name: str) -> dict[str, Any]:
    def t(v):
        d = _cal._dt(v)
        if d is None:
            return None
        return {"dateTime": d.isoformat()} if isinstance(d, datetime) else {"date": d.isoformat()}

    out = {
        "id": str(ev.get("UID", "")),
        "summary": str(ev.get("SUMMARY", "")),
        "start": t(ev.get("DTSTART")),
        "end": t(ev.get("DTEND")),
        "location": str(ev.get("LOCATION", "")) or None,
        "description": str(ev.get("DESCRIPTION", "")) or None,
        "attendees": [{"email": a} for a in _cal._attendees(ev)],
        "calendar": cal_name,
    }
    rr = ev.get("RRULE")
    if rr is not None:
        out["recurrence"] = ["RRULE:" + rr.to_ical().decode()]
    return out


_STATUS = {"ACCEPTED": "accepted", "DECLINED": "declined", "TENTATIVE": "tentative"}
_STATUS["NEEDS-ACTION"] = "needsAction"


def _when_text(v: dict[str, str] | None, label: str) -> str:
    if v and v.get("dateTime"):
        return f"{label}: {v['dateTime']}"
    return f"{label} Date: {(v or {}).get('date')}"


def _brief(e: dict[str, Any]) -> str:
    """One event in a listing: id, summary, start, end."""
    start = (e["start"] or {}).get("dateTime") or (e["start"] or {}).get("date") or "N/A"
    end = (e["end"] or {}).get("dateTime") or (e["end"] or {}).get("date") or "N/A"
    return f"Event ID: {e['id']}\nSummary: {e['summary'] or 'N/A'}\nStart: {start}\nEnd: {end}"


def _listing(events: list[dict[str, Any]]) -> str:
    if not events:
        return "No events found"
    return f"Found {len(events)} event(s):\n\n" + "\n\n".join(
        f"{i}. {_brief(e)}" for i, e in enumerate(events, 1)
    )


def _full(ev, e: dict[str, Any]) -> str:
    """One event as archipelago shows it (attendees by name, created/updated times:
    the file's own, else now, as archipelago stamps events that carry none)."""
    lines = [f"Event ID: {e['id']}", f"Summary: {e['summary'] or 'N/A'}"]
    if e["description"]:
        lines.append(f"Description: {e['description']}")
    lines += [_when_text(e["start"], "Start"), _when_text(e["end"], "End")]
    if e["location"]:
        lines.append(f"Location: {e['location']}")
    people = ev.get("ATTENDEE")
    people = [] if people is None else people if isinstance(people, list) else [people]
    if people:
        lines.append(f"Attendees ({len(people)}):")
        for a in people:
            name = str(a.params.get("CN", "")) or str(a).removeprefix("mailto:")
            status = _STATUS.get(str(a.params.get("PARTSTAT", "")).upper())
            lines.append(f"  - {name}" + (f" [{status}]" if status else ""))
    if e.get("recurrence"):
        lines += ["Recurrence:", *(f"  - {r}" for r in e["recurrence"])]
    now = datetime.now().isoformat()
    created = _cal._dt(ev.get("CREATED"))
    updated = _cal._dt(ev.get("LAST-MODIFIED"))
    lines.append(f"Created: {created.isoformat() if created else now}")
    lines.append(f"Updated: {updated.isoformat() if updated else now}")
    return "\n".join(lines)


_PARTSTAT = {v: k for k, v in _STATUS.items()}


def _time_field(v) -> dict[str, Any]:
    """A DTSTART/DTEND as archipelago's event model holds it."""
    d = _cal._dt(v)
    if isinstance(d, datetime):
        return {
            "dateTime": d.isoformat(),
            "date": None,
            "timeZone": str(d.tzinfo) if d.tzinfo else None,
        }
    return {"dateTime": None, "date": d.strftime("%Y-%m-%d") if d else None, "timeZone": None}


def _model(ev) -> dict[str, Any]:
    """An event as archipelago's server reads it back (what it keeps of a VEVENT)."""
    if ev.get("DTSTART") is None or ev.get("DTEND") is None:
        raise ApexError("Event must have start and end times")
    created = _cal._dt(ev.get("CREATED"))
    created_s = created.isoformat() if created else datetime.now().isoformat()
    updated = _cal._dt(ev.get("LAST-MODIFIED"))
    people = ev.get("ATTENDEE")
    people = [] if people is None else people if isinstance(people, list) else [people]
    attendees = []
    for a in people:
        addr = str(a)
        params = getattr(a, "params", {}) or {}
        status = params.get("PARTSTAT")
        attendees.append(
            {
                "email": addr[7:] if addr.lower().startswith("mailto:") else addr,
                "displayName": params.get("CN"),
                "responseStatus": _STATUS.get(str(status).upper()) if status else None,
            }
        )
    rr = ev.get("RRULE")
    rules = None if rr is None else [str(r) for r in (rr if isinstance(rr, list) else [rr])]

    def text(key: str) -> str | None:
        return str(ev.get(key)) if ev.get(key) else None

    return {
        "id": str(ev.get("UID")),
        "summary": text("SUMMARY"),
        "description": text("DESCRIPTION"),
        "start": _time_field(ev.get("DTSTART")),
        "end": _time_field(ev.get("DTEND")),
        "location": text("LOCATION"),
        "attendees": attendees or None,
        "colorId": text("COLOR"),
        "reminders": None,
        "recurrence": rules,
        "created": created_s,
        "updated": updated.isoformat() if updated else created_s,
    }


def _ical_time(t: dict[str, Any]):
    if t.get("dateTime"):
        return datetime.fromisoformat(t["dateTime"].replace("Z", "+00:00"))
    if t.get("date"):
        return datetime.strptime(t["date"], "%Y-%m-%d").date()
    raise ApexError("Either dateTime or date must be provided")


def _stamp(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def _vevent(m: dict[str, Any]):
    """A VEVENT written from an event model, as archipelago writes one: its own fields
    only (an update drops what the model does not hold, e.g. ORGANIZER)."""
    from icalendar import Alarm, Event, vText

    ev = Event()
    ev.add("uid", m["id"])
    ev.add("dtstart", _ical_time(m["start"]))
    ev.add("dtend", _ical_time(m["end"]))
    ev.add("dtstamp", _stamp(m["created"]))
    ev.add("created", _stamp(m["created"]))
    ev.add("last-modified", _stamp(m["updated"]))
    for key in ("summary", "description", "location"):
        if m.get(key):
            ev.add(key, vText(m[key]))
    for a in m.get("attendees") or []:
        params = {}
        if a.get("displayName"):
            params["CN"] = a["displayName"]
        if a.get("responseStatus"):
            params["PARTSTAT"] = _PARTSTAT.get(a["responseStatus"], "NEEDS-ACTION")
        ev.add("attendee", f"mailto:{a['email']}", parameters=params)
    if m.get("colorId"):
        ev.add("color", m["colorId"])
    rem = m.get("reminders") or {}
    for r in rem.get("overrides") or []:
        alarm = Alarm()
        alarm.add("action", "DISPLAY" if r["method"] == "popup" else "EMAIL")
        alarm.add("trigger", timedelta(minutes=-r["minutes"]))
        alarm.add("description", m.get("summary") or "Reminder")
        ev.add_component(alarm)
    for rule in m.get("recurrence") or []:
        ev.add("rrule", rule)
    return ev


def _done(message: str, event_id: str) -> str:
    return f"{message} (Event ID: {event_id})"


def _event_id() -> str:
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(6))
    return datetime.now().strftime("%Y%m%d_%H%M%S_%f_") + suffix


def _plain(v: BaseModel | None) -> dict[str, Any] | None:
    return None if v is None else v.model_dump(exclude_none=True)


@SERVER.tool
def list_events(
    world: World,
    limit: Annotated[int, Field(ge=1, le=100)] = 50,
    offset: Annotated[int, Field(ge=0)] = 0,
) -> str:
    """List events sorted by start time (offset/limit pagination)."""
    evs = []
    for f, _c, ev in _cal._all_events(world):
        s = _cal._as_utc(_cal._dt(ev.get("DTSTART"))) or datetime.min.replace(tzinfo=UTC)
        evs.append((s, _event(ev, f.stem)))
    evs.sort(key=lambda t: t[0])
    return _listing([e for _, e in evs[offset : offset + limit]])


@SERVER.tool
def read_event(world: World, event_id: EventId) -> Any:
    """One event in full: times, location, description, attendees."""
    try:
        f, _c, ev = _cal._find(world, event_id)
    except ApexError:
        raise Failed(f"Event not found with ID: {event_id}", Style.INVALID_PARAMS) from None
    return _full(ev, _event(ev, f.stem))


@SERVER.tool
def create_event(
    world: World,
    summary: Annotated[str, Field(description="Title of the event.")],
    start: CalendarEventDateTime,
    end: CalendarEventDateTime,
    description: str | None = None,
    location: str | None = None,
    attendees: list[CalendarEventAttendee] | None = None,
    colorId: str | None = None,  # noqa: N803
    reminders: CalendarEventReminders | None = None,
    recurrence: Annotated[list[str] | None, Field(description="RRULE lines")] = None,
) -> Any:
    """Create an event; start/end are {'dateTime': ..., 'timeZone': ...} or {'date': ...}."""
    from icalendar import Calendar

    if not summary.strip():
        raise Failed(_EMPTY_SUMMARY, Style.INTERNAL_ERROR, tool="")
    now = datetime.now().isoformat()
    event_id = _event_id()
    m = {
        "id": event_id,
        "summary": summary,
        "description": description,
        "start": _plain(start),
        "end": _plain(end),
        "location": location,
        "attendees": [_plain(a) for a in attendees] if attendees else None,
        "colorId": colorId,
        "reminders": _plain(reminders),
        "recurrence": recurrence,
        "created": now,
        "updated": now,
    }
    try:
        ev = _vevent(m)
    except (ApexError, ValueError, TypeError) as e:
        return f"Failed: {e!r}"
    with world.lock:
        target = world.apps_path(f"{_cal.CAL_DIR}/{DEFAULT_FILE}")
        if target.exists():
            cal = _cal._load(target)
        else:
            cal = Calendar()
            cal.add("prodid", PRODID)
            cal.add("version", "2.0")
        cal.add_component(ev)
        target.parent.mkdir(parents=True, exist_ok=True)
        _cal._save(target, cal)
    return _done("Event created successfully", event_id)


@SERVER.tool
def update_event(
    world: World,
    event_id: EventId,
    summary: str | None = None,
    description: str | None = None,
    start: CalendarEventDateTime | None = None,
    end: CalendarEventDateTime | None = None,
    location: str | None = None,
    attendees: list[CalendarEventAttendee] | None = None,
    colorId: str | None = None,  # noqa: N803
    reminders: CalendarEventReminders | None = None,
    recurrence: list[str] | None = None,
) -> Any:
    """Change the given fields of an event; the others stay."""
    if summary is not None and not summary.strip():
        raise Failed(_EMPTY_SUMMARY, Style.INTERNAL_ERROR, tool="")
    with world.lock:
        try:
            f, cal, old = _cal._find(world, event_id)
        except ApexError:
            return f"Failed: Event not found with ID: {event_id}"
        try:
            m = _model(old)
        except Exception as e:
            return f"Failed: {e!r}"
        given = {
            "summary": summary,
            "description": description,
            "start": _plain(start),
            "end": _plain(end),
            "location": location,
            "attendees": [_plain(a) for a in attendees] if attendees is not None else None,
            "colorId": colorId,
            "reminders": _plain(reminders),
            "recurrence": recurrence,
        }
        m.update({k: v for k, v in given.items() if v is not None})
        m["updated"] = datetime.now().isoformat()
        try:
            ev = _vevent(m)
        except (ApexError, ValueError, TypeError) as e:
            return f"Failed: {e!r}"
        cal.subcomponents.remove(old)
        cal.add_component(ev)
        _cal._save(f, cal)
    return _done("Event updated successfully", event_id)


@SERVER.tool
def delete_event(world: World, event_id: EventId) -> str:
    """Delete an event permanently."""
    with world.lock:
        try:
            f, cal, ev = _cal._find(world, event_id)
        except ApexError:
            return f"Failed: Event not found with ID: {event_id}"
        cal.subcomponents.remove(ev)
        _cal._save(f, cal)
    return _done("Event deleted successfully", event_id)


def probe(world: World) -> str:
    return _cal.probe(world)
