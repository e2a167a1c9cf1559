"""Train/eval split by world: no world appears on both sides (no contamination)."""

from __future__ import annotations

import random
from collections import defaultdict

from apexrl.artifacts.models import DatasetRow
from apexrl.errors import UsageError


def choose_eval_worlds(rows: list[DatasetRow], eval_fraction: float, seed: int) -> set[str]:
    """Pick whole worlds (seeded shuffle) until they hold >= eval_fraction of the tasks.

    At least one world goes to each side."""
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
    chosen: set[str] = set()
    count = 0
    for w in worlds[:-1]:  # the last world always stays in train
        if count >= target:
            break
        chosen.add(w)
        count += by_world[w]
    return chosen
