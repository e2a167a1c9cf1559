"""Order-preserving process fan-out for CPU-bound per-task work (pack, unpack)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

# Below this many items the pool's start-up costs more than it saves.
MIN_ITEMS_FOR_POOL = 64


def default_workers() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0))))


def die_with_parent(parent: int) -> None:
    """Worker start: SIGKILL when the process that started the pool dies (kill -9 of
    pack/unpack must not leave workers writing). The pool's direct parent is the
    forkserver, which exits when apexrl does; a worker also checks it outlived neither."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)
    import threading

    def watch() -> None:  # the forkserver may outlive apexrl for a moment: poll apexrl too
        import time

        while True:
            time.sleep(0.5)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="apexrl-parent-watch", daemon=True).start()


def ordered_map[T, R](
    fn: Callable[[T], R],
    items: Iterable[T],
    *,
    workers: int | None = None,
    n_items: int | None = None,
    preload: tuple[str, ...] = (),
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
    # The forkserver imports `fn`'s module (and `preload`) once; each worker forks from
    # it already loaded instead of importing again (no effect once a forkserver runs).
    ctx.set_forkserver_preload([fn.__module__, "ctypes", *preload])
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        # Few large chunks: each one costs a round trip through the pool's queues.
        chunk = max(1, min(64, n_items // (workers * 4))) if n_items else 16
        yield from pool.map(fn, items, chunksize=chunk)
