"""Plain descriptions of an example world and its tasks, and the seeded context
each domain builder draws names, numbers and ids from."""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

FIRST_NAMES = [
    "Amelia", "Rohan", "Priya", "Marcus", "Elena", "Tomas", "Grace", "Daniel", "Sofia",
    "Kwame", "Hannah", "Luis", "Mei", "Oliver", "Fatima", "Jonas", "Chloe", "Ibrahim",
    "Nina", "Samuel", "Aisha", "Felix", "Clara", "Victor", "Leah", "Mateo", "Yuki",
]  # fmt: skip
LAST_NAMES = [
    "Okafor", "Lindqvist", "Shah", "Delgado", "Whitfield", "Novak", "Brennan", "Castillo",
    "Nakamura", "Adeyemi", "Fischer", "Moreau", "Kowalski", "Haddad", "Ferreira", "Osei",
    "Larsen", "Chen", "Patel", "Rossi", "Tanaka", "Walsh", "Abara", "Keller", "Duarte",
]  # fmt: skip


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def org_domain(name: str, suffix: str = ".com") -> str:
    """A made-up organisation's mail domain: 'Meridian Capital' -> 'meridiancapital.com'."""
    return slugify(name).replace("-", "") + suffix


@dataclass
class Person:
    name: str
    email: str
    title: str = ""

    @property
    def pair(self) -> tuple[str, str]:
        return (self.name, self.email)

    @property
    def first(self) -> str:
        return self.name.split()[0]


@dataclass
class TaskSpec:
    """One task before ids are assigned. Paths:
    input_files: relative to task_files/<task_id>/ (so they start with filesystem/ or .apps_data/)
    gold_files:  relative to the world's filesystem/ folder
    """

    key: str
    task_name: str
    prompt: str
    rubric: list[dict[str, Any]]
    gold_response: str
    gold_response_type: str = "text"
    expected_output: str | None = "message_in_console"
    input_files: dict[str, bytes] = field(default_factory=dict)
    input_files_as_string: bool = False
    gold_files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class WorldSpec:
    domain: str
    short_name: str  # e.g. "meridian-capital"; world_name is "<domain>-<short_name>"
    description: str
    apps: list[str]
    files: dict[str, bytes]  # zip paths: filesystem/... and .apps_data/...
    tasks: list[TaskSpec]

    @property
    def world_name(self) -> str:
        return f"{self.domain}-{self.short_name}"


class Ctx:
    """Seeded randomness for one domain: the same (seed, domain) gives the same draws."""

    def __init__(self, seed: int, domain: str):
        self.seed = seed
        self.domain = domain
        digest = hashlib.sha256(f"apexrl-example/{seed}/{domain}".encode()).digest()
        self.rng = random.Random(int.from_bytes(digest[:8], "big"))
        self._used_first: set[str] = set()
        self.start = date(2025, 9, 1) + timedelta(days=self.rng.randrange(0, 21))

    def hex(self, *parts: object, n: int = 32) -> str:
        text = "/".join(["apexrl-example", str(self.seed), self.domain, *map(str, parts)])
        return hashlib.sha256(text.encode()).hexdigest()[:n]

    def person(self, email_domain: str, title: str = "") -> Person:
        # First names are unique within a world so "Best, Amelia" is unambiguous.
        while True:
            first_name = self.rng.choice(FIRST_NAMES)
            if first_name not in self._used_first:
                self._used_first.add(first_name)
                break
        name = f"{first_name} {self.rng.choice(LAST_NAMES)}"
        first, last = name.lower().split()
        return Person(name, f"{first}.{last}@{email_domain}", title)

    def people(self, email_domain: str, *titles: str) -> list[Person]:
        """One person per title at `email_domain`, drawn in the titles' order (a team)."""
        return [self.person(email_domain, title) for title in titles]

    def day(self, offset: int) -> date:
        """A business day `offset` days after the world's start date (weekends skipped)."""
        d = self.start
        step = 1 if offset >= 0 else -1
        left = abs(offset)
        while left:
            d += timedelta(days=step)
            if d.weekday() < 5:
                left -= 1
        while d.weekday() >= 5:
            d += timedelta(days=1)
        return d

    def at(self, offset: int, hour: int, minute: int = 0) -> datetime:
        return datetime.combine(self.day(offset), time(hour, minute), tzinfo=UTC)

    def message_id(self, key: str, email_domain: str) -> str:
        return f"{self.hex('mail', key, n=20)}@{email_domain}"


def fmt_money_m(value: float) -> str:
    """1234.5 -> '1234.5' (USD millions, one decimal, no thousands separator)."""
    return f"{value:.1f}"


def fmt_usd(value: float) -> str:
    return f"${value:,.0f}"


def check(kind: str, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind}
    out.update({k: v for k, v in kw.items() if v is not None})
    return out


def crit(n: int, text: str, chk: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"verifier_id": f"v{n}", "criteria": text}
    if chk is not None:
        out["check"] = chk
    return out


def number_crit(n: int, text: str, value: float, tolerance: float) -> dict[str, Any]:
    """A criterion met when the answer states `value` (within `tolerance`)."""
    return crit(n, text, check("number", value=value, tolerance=tolerance))
