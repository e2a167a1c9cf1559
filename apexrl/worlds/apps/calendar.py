"""Calendar over `.apps_data/calendar/*.ics` (icalendar): list, read, create, update and
delete events."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from apexrl.artifacts.atomic import write_bytes_atomic
from apexrl.errors import ApexError, BadRecordError
from apexrl.worlds.world import World

CAL_DIR = "calendar"


def _files(world: World) -> list[Path]:
    """The world's .ics files, at any depth real exports use (apexrl.worlds.appdata)."""
    from apexrl.worlds.appdata import find_files

    return find_files(world.apps_path(CAL_DIR), suffixes=(".ics",))


def _load(p: Path):
    from icalendar import Calendar

    try:
        return Calendar.from_ical(p.read_bytes())
    except Exception as e:
        raise BadRecordError(str(p), f"not a valid .ics calendar: {e}") from e


def _save(p: Path, cal) -> None:
    write_bytes_atomic(p, cal.to_ical())


def _dt(v: Any) -> datetime | date | None:
    if v is None:
        return None
    d = getattr(v, "dt", v)
    return d


def _iso(v: Any) -> str | None:
    d = _dt(v)
    return d.isoformat() if d is not None else None


def _as_utc(d: datetime | date | None) -> datetime | None:
    if d is None:
        return None
    if isinstance(d, datetime):
        return d if d.tzinfo else d.replace(tzinfo=UTC)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _parse(s: str, what: str) -> datetime | date:
    try:
        if len(s) == 10:
            return date.fromisoformat(s)
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
        return d if d.tzinfo else d.replace(tzinfo=UTC)
    except ValueError:
        raise ApexError(
            f"{what} {s!r} is not an ISO date/time (e.g. 2025-03-14T15:00:00Z)"
        ) from None


def _event_summary(ev, cal_name: str) -> dict[str, Any]:
    return {
        "uid": str(ev.get("UID", "")),
        "summary": str(ev.get("SUMMARY", "")),
        "start": _iso(ev.get("DTSTART")),
        "end": _iso(ev.get("DTEND")),
        "location": str(ev.get("LOCATION", "")) or None,
        "calendar": cal_name,
    }


def _attendees(ev) -> list[str]:
    a = ev.get("ATTENDEE")
    if a is None:
        return []
    vals = a if isinstance(a, list) else [a]
    return [str(x).removeprefix("mailto:").removeprefix("MAILTO:") for x in vals]


def _all_events(world: World):
    for f in _files(world):
        cal = _load(f)
        for ev in cal.walk("VEVENT"):
            yield f, cal, ev


def _find(world: World, uid: str):
    for f, cal, ev in _all_events(world):
        if str(ev.get("UID", "")) == uid:
            return f, cal, ev
    raise ApexError(f"no event with uid {uid!r}", hint="use list to see event uids")


def tools(world: World) -> list:
    def list(
        start: str | None = None, end: str | None = None, query: str | None = None, limit: int = 100
    ) -> dict[str, Any]:  # noqa: A001
        """List events sorted by start time. Optional filters: `start`/`end` (ISO dates or
        date-times; events overlapping the window) and `query` (text in summary/description)."""
        lo = _as_utc(_parse(start, "start")) if start else None
        hi = _as_utc(_parse(end, "end")) if end else None
        q = query.lower() if query else None
        evs = []
        for f, _cal, ev in _all_events(world):
            s = _as_utc(_dt(ev.get("DTSTART")))
            e = _as_utc(_dt(ev.get("DTEND"))) or s
            if lo and e and e < lo:
                continue
            if hi and s and s > hi:
                continue
            if (
                q
                and q
                not in (str(ev.get("SUMMARY", "")) + " " + str(ev.get("DESCRIPTION", ""))).lower()
            ):
                continue
            evs.append((s or datetime.min.replace(tzinfo=UTC), _event_summary(ev, f.stem)))
        evs.sort(key=lambda t: t[0])
        return {"total": len(evs), "events": [e for _, e in evs[: max(1, limit)]]}

    def read(uid: str) -> dict[str, Any]:
        """Read one event by uid: times, location, description, organizer, attendees."""
        f, _cal, ev = _find(world, uid)
        return {
            **_event_summary(ev, f.stem),
            "description": str(ev.get("DESCRIPTION", "")),
            "organizer": str(ev.get("ORGANIZER", "")).removeprefix("mailto:") or None,
            "attendees": _attendees(ev),
        }

    def create(
        summary: str,
        start: str,
        end: str | None = None,
        description: str | None = None,
        location: str | None = None,
        attendees: list[str] | None = None,
        calendar: str | None = None,
    ) -> dict[str, Any]:
        """Create an event. `start`/`end` are ISO date-times (e.g. 2025-03-14T15:00:00Z) or
        dates for all-day events; `end` defaults to one hour after start. `calendar` names the
        .ics file (default: the world's first calendar)."""
        from icalendar import Calendar, Event, vCalAddress

        s = _parse(start, "start")
        e = (
            _parse(end, "end")
            if end
            else (s + timedelta(hours=1) if isinstance(s, datetime) else s + timedelta(days=1))
        )
        if _as_utc(e) < _as_utc(s):
            raise ApexError("end is before start")
        with world.lock:
            files = _files(world)
            if calendar:
                target = world.apps_path(f"{CAL_DIR}/{calendar.removesuffix('.ics')}.ics")
            else:
                target = files[0] if files else world.apps_path(f"{CAL_DIR}/calendar.ics")
            if target.exists():
                cal = _load(target)
            else:
                cal = Calendar()
                cal.add("prodid", "-//apexrl//world//EN")
                cal.add("version", "2.0")
            ev = Event()
            uid = f"{uuid.uuid4()}@apexrl"
            ev.add("uid", uid)
            ev.add("dtstamp", datetime.now(UTC))
            ev.add("summary", summary)
            ev.add("dtstart", s)
            ev.add("dtend", e)
            if description:
                ev.add("description", description)
            if location:
                ev.add("location", location)
            for a in attendees or []:
                ev.add("attendee", vCalAddress(f"mailto:{a}"))
            cal.add_component(ev)
            target.parent.mkdir(parents=True, exist_ok=True)
            _save(target, cal)
        return _event_summary(ev, target.stem)

    def update(
        uid: str,
        summary: str | None = None,
        start: str | None = None,
        end: str | None = None,
        description: str | None = None,
        location: str | None = None,
    ) -> dict[str, Any]:
        """Change fields of an event (only those given)."""
        with world.lock:
            f, cal, ev = _find(world, uid)
            for key, val in (
                ("summary", summary),
                ("description", description),
                ("location", location),
            ):
                if val is not None:
                    ev.pop(key.upper(), None)
                    ev.add(key, val)
            for key, val in (("dtstart", start), ("dtend", end)):
                if val is not None:
                    ev.pop(key.upper(), None)
                    ev.add(key, _parse(val, key))
            ev.pop("LAST-MODIFIED", None)
            ev.add("last-modified", datetime.now(UTC))
            _save(f, cal)
        return _event_summary(ev, f.stem)

    def delete(uid: str) -> str:
        """Delete an event by uid."""
        with world.lock:
            f, cal, ev = _find(world, uid)
            cal.subcomponents.remove(ev)
            _save(f, cal)
        return f"deleted event {uid} ({ev.get('SUMMARY', '')}) from {f.stem}"

    return [list, read, create, update, delete]


def probe(world: World) -> str:
    from apexrl.worlds.appdata import require_data

    require_data(world.apps_path(CAL_DIR), len(_files(world)), "calendar (.ics)")
    n = sum(1 for _ in _all_events(world))
    return f"{n} events in {len(_files(world))} calendars"
