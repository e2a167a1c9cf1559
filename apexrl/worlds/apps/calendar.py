"""The calendar's `.ics` files under `.apps_data/calendar/` (icalendar): finding,
loading, saving and looking up events, and the readiness check."""

from __future__ import annotations

from datetime import UTC, date, datetime
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


def _as_utc(d: datetime | date | None) -> datetime | None:
    if d is None:
        return None
    if isinstance(d, datetime):
        return d if d.tzinfo else d.replace(tzinfo=UTC)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


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


def probe(world: World) -> str:
    from apexrl.worlds.appdata import require_data

    require_data(world.apps_path(CAL_DIR), len(_files(world)), "calendar (.ics)")
    n = sum(1 for _ in _all_events(world))
    return f"{n} events in {len(_files(world))} calendars"
