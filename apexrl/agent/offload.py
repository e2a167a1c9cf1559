"""Record writing off the event loop, one at a time.

Serializing and writing a trial's records (a 100k-token tito.json, the ATIF, the agent
record) holds the GIL while it runs. In a worker thread it does not block the event loop
outright, but N such threads at once (550 trials finishing together) take the GIL in
turns with the loop and stall every agent loop sharing it for seconds. All record writes
of a process therefore go through one writer thread: at most one serializer competes
with the loop at any moment, and the queue of finished trials drains in order.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apexrl-records")
        return _POOL


async def write_off_loop[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `fn(*args, **kwargs)` in the process's single record-writer thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), functools.partial(fn, *args, **kwargs))
