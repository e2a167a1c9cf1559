"""Train/eval split by world: no world appears on both sides (no contamination)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def split_dataset(
    dataset: str,
    out: Path,
    *,
    by: str = "world",
    eval_fraction: float,
    seed: int,
    shard_mb: float,
    force: bool,
    on_warning: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Write OUT/train and OUT/eval, datasets that share no world; one summary per side
    (split, out, n_tasks, fraction, worlds). `on_warning` hears when whole worlds cannot
    meet `eval_fraction` (split_note)."""
    from apexrl.artifacts.atomic import MARKER
    from apexrl.tasks.dataset import PackedTask, iter_rows, row_metadata, write_dataset

    # OUT holds train/ and eval/ and nothing of anyone else's (a folder apexrl wrote may)
    if out.is_dir() and not force and not (out / MARKER).is_file():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in ("train", "eval"))
        if foreign:
            raise UsageError(
                f"-o {out} is not empty and was not written by `tasks split` "
                f"(found {foreign[0]!r})",
                hint="choose a new folder, or pass --force to write train/ and eval/ into it",
            )
    if by != "world":
        raise UsageError(f"--by {by!r} is not supported", hint="use --by world")
    rows = [row_metadata(r) for _, r in iter_rows(dataset)]
    eval_worlds = choose_eval_worlds(rows, eval_fraction, seed)
    note = split_note(rows, eval_worlds, eval_fraction)
    if note and on_warning:
        on_warning(note)
    world_of = {r.path: r.world_id for r in rows}

    def side(is_eval: bool):
        for _, r in iter_rows(dataset):
            if (world_of[r["path"]] in eval_worlds) == is_eval:
                yield PackedTask(row=row_metadata(r), task_binary=r["task_binary"])

    from apexrl.tasks.terms import source_terms

    data_terms = source_terms(str(dataset))  # both sides keep the source's terms
    summaries = []
    for name, is_eval in (("train", False), ("eval", True)):
        manifest = write_dataset(
            side(is_eval),
            out / name,
            shard_mb=shard_mb,
            force=force,
            inputs=[dataset],
            data_terms=data_terms,
        )
        summaries.append(
            {
                "split": name,
                "out": str((out / name).absolute()),
                "n_tasks": manifest.n_tasks,
                "fraction": round(manifest.n_tasks / max(len(rows), 1), 4),
                "worlds": sorted(manifest.worlds),
            }
        )
    return summaries
