"""Train/eval split by world: no world appears on both sides (no contamination)."""

from __future__ import annotations

import random
from collections import defaultdict

from apexrl.artifacts.models import DatasetRow
from apexrl.errors import UsageError


def choose_eval_worlds(rows: list[DatasetRow], eval_fraction: float, seed: int) -> set[str]:
    """Whole worlds whose tasks come nearest eval_fraction of all (ties: the first in a
    seeded shuffle). At least one world goes to each side; `split_note` says how far the
    world sizes kept it from the request."""
    if not 0 < eval_fraction < 1:
        raise UsageError(f"--eval-fraction must be between 0 and 1, got {eval_fraction}")
    by_world: dict[str, int] = defaultdict(int)
    for r in rows:
        if not r.world_id:
            raise UsageError(
                f"row {r.path!r} has no world_id", hint="re-pack with `apexrl tasks pack`"
            )
        by_world[r.world_id] += 1
    worlds = sorted(by_world)
    if len(worlds) < 2:
        raise UsageError(
            f"only {len(worlds)} world(s): a world-disjoint split needs at least 2",
            hint="add tasks from more worlds",
        )
    random.Random(seed).shuffle(worlds)
    target = eval_fraction * len(rows)
    total = len(rows)
    # every achievable eval size from whole worlds (subset sums, first combination in the
    # seeded order), then the one nearest the target with at least one world on each side
    reach: dict[int, tuple[str, ...]] = {0: ()}
    for w in worlds:
        for got, combo in list(reach.items()):
            reach.setdefault(got + by_world[w], (*combo, w))
    best = min((n for n in reach if 0 < n < total), key=lambda n: (abs(n - target), n))
    return set(reach[best])


def split_note(rows: list[DatasetRow], eval_worlds: set[str], eval_fraction: float) -> str | None:
    """A warning when whole worlds cannot meet the requested fraction (e.g. 14 tasks in 3
    worlds): the fraction achieved and the world sizes that limit it."""
    n_eval = sum(1 for r in rows if r.world_id in eval_worlds)
    achieved = n_eval / len(rows)
    if abs(achieved - eval_fraction) <= 0.05:
        return None
    sizes: dict[str, int] = defaultdict(int)
    for r in rows:
        sizes[r.world_id] += 1
    shown = ", ".join(str(n) for n in sorted(sizes.values(), reverse=True)[:12])
    return (
        f"--eval-fraction {eval_fraction:g}: the nearest a world-disjoint split gets is "
        f"{achieved:.2f} ({n_eval} of {len(rows)} tasks); the {len(sizes)} worlds hold "
        f"{shown} task(s)"
    )
