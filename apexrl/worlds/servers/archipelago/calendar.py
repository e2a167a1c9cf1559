"""archipelago `calendar` server over the world's .ics files: list, read, create, update,
delete events. Times are {'dateTime': ISO, 'timeZone': ...} or {'date': 'YYYY-MM-DD'}."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import calendar as _cal
from apexrl.worlds.world import World

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


def _when(v: CalendarEventDateTime | None, what: str) -> datetime | date | None:
    if v is None:
        return None
    if v.date:
        return _cal._parse(v.date[:10], what)
    if not v.dateTime:
        raise ApexError(f"{what} needs 'date' or 'dateTime'")
    d = _cal._parse(v.dateTime, what)
    if (
        v.timeZone
        and isinstance(d, datetime)
        and "+" not in v.dateTime[10:]
        and not v.dateTime.endswith("Z")
    ):
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            d = d.replace(tzinfo=ZoneInfo(v.timeZone))
        except (ZoneInfoNotFoundError, ValueError):
            raise ApexError(f"{what}: unknown timeZone {v.timeZone!r}") from None
    return d


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


def _apply(ev, *, summary, description, start, end, location, attendees, recurrence, color_id):
    from icalendar import vCalAddress, vRecur

    s, e = _when(start, "start"), _when(end, "end")
    s_eff = s if s is not None else _cal._dt(ev.get("DTSTART"))
    e_eff = e if e is not None else _cal._dt(ev.get("DTEND"))
    if s_eff is not None and e_eff is not None and _cal._as_utc(e_eff) < _cal._as_utc(s_eff):
        raise ApexError("end is before start")
    for key, val in (
        ("summary", summary),
        ("description", description),
        ("location", location),
        ("dtstart", s),
        ("dtend", e),
        ("color", color_id),
    ):
        if val is not None:
            ev.pop(key.upper(), None)
            ev.add(key, val)
    if attendees is not None:
        ev.pop("ATTENDEE", None)
        for a in attendees:
            addr = vCalAddress(f"mailto:{a.email}")
            if a.displayName:
                addr.params["cn"] = a.displayName
            ev.add("attendee", addr)
    if recurrence is not None:
        ev.pop("RRULE", None)
        for r in recurrence:
            if r.upper().startswith("RRULE:"):
                ev.add("rrule", vRecur.from_ical(r[6:]))


def tools(world: World) -> list:
    def list_events(
        limit: Annotated[int, Field(ge=1, le=100)] = 50, offset: Annotated[int, Field(ge=0)] = 0
    ) -> str:
        """List events sorted by start time (offset/limit pagination)."""
        evs = []
        for f, _c, ev in _cal._all_events(world):
            s = _cal._as_utc(_cal._dt(ev.get("DTSTART"))) or datetime.min.replace(tzinfo=UTC)
            evs.append((s, _event(ev, f.stem)))
        evs.sort(key=lambda t: t[0])
        return _listing([e for _, e in evs[offset : offset + limit]])

    def read_event(event_id: EventId) -> str:
        """One event in full: times, location, description, attendees."""
        f, _c, ev = _cal._find(world, event_id)
        return _full(ev, _event(ev, f.stem))

    def create_event(
        summary: Annotated[str, Field(description="Title of the event.")],
        start: CalendarEventDateTime,
        end: CalendarEventDateTime,
        description: str | None = None,
        location: str | None = None,
        attendees: list[CalendarEventAttendee] | None = None,
        colorId: str | None = None,  # noqa: N803
        reminders: CalendarEventReminders | None = None,
        recurrence: Annotated[list[str] | None, Field(description="RRULE lines")] = None,
    ) -> dict[str, Any]:
        """Create an event; start/end are {'dateTime': ..., 'timeZone': ...} or {'date': ...}."""
        from icalendar import Calendar, Event

        if not summary.strip():
            raise ApexError("summary must not be empty")
        with world.lock:
            files = _cal._files(world)
            target = files[0] if files else world.apps_path(f"{_cal.CAL_DIR}/calendar.ics")
            if target.exists():
                cal = _cal._load(target)
            else:
                cal = Calendar()
                cal.add("prodid", "-//apexrl//world//EN")
                cal.add("version", "2.0")
            ev = Event()
            ev.add("uid", datetime.now(UTC).strftime("%Y%m%d_%H%M%S_%f_") + _rand())
            ev.add("dtstamp", datetime.now(UTC))
            _apply(
                ev,
                summary=summary,
                description=description,
                start=start,
                end=end,
                location=location,
                attendees=attendees,
                recurrence=recurrence,
                color_id=colorId,
            )
            cal.add_component(ev)
            target.parent.mkdir(parents=True, exist_ok=True)
            _cal._save(target, cal)
        return {"success": True, "event": _event(ev, target.stem)}

    def update_event(
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
    ) -> dict[str, Any]:
        """Change the given fields of an event; the others stay."""
        if summary is not None and not summary.strip():
            raise ApexError("summary cannot be empty")
        with world.lock:
            f, cal, ev = _cal._find(world, event_id)
            _apply(
                ev,
                summary=summary,
                description=description,
                start=start,
                end=end,
                location=location,
                attendees=attendees,
                recurrence=recurrence,
                color_id=colorId,
            )
            ev.pop("LAST-MODIFIED", None)
            ev.add("last-modified", datetime.now(UTC))
            _cal._save(f, cal)
        return {"success": True, "event": _event(ev, f.stem)}

    def delete_event(event_id: EventId) -> dict[str, Any]:
        """Delete an event permanently."""
        legacy = {fn.__name__: fn for fn in _cal.tools(world)}
        return {"success": True, "message": legacy["delete"](event_id)}

    return [create_event, read_event, update_event, delete_event, list_events]


def _rand() -> str:
    import secrets

    return secrets.token_hex(3)


def probe(world: World) -> str:
    return _cal.probe(world)
