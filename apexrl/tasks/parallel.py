"""Order-preserving process fan-out for CPU-bound per-task work (pack, unpack)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

# Below this many items the pool's start-up costs more than it saves.
MIN_ITEMS_FOR_POOL = 64


def default_workers() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


def ordered_map[T, R](
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int | None = None,
    n_items: int | None = None,
) -> Iterator[R]:
    """`map(fn, items)` across processes, results in input order. `fn` must be a
    module-level function; it should return errors as values (exceptions with
    custom constructors do not survive pickling)."""
    workers = workers or default_workers()
    if workers <= 1 or (n_items is not None and n_items < MIN_ITEMS_FOR_POOL):
        yield from map(fn, items)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: children start clean, not as forks of a parent running pyarrow threads.
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        yield from pool.map(fn, items, chunksize=16)
