"""The worker threads that tokenize for an event loop shared by many agent loops.

Rendering a prompt and encoding an observation (3-5k tokens: ~15 ms of CPU) run off the
event loop. With asyncio's default executor that is up to cpus+4 threads at once, each as
eager for a core as the loop itself: on a small node the loop thread waits for a core (or
for the GIL) behind them and every trial on it stalls. Here they get their own pool:

  APEXRL_ROLLOUT_TOKENIZE_THREADS  threads (unset or 0: auto, one per core but one, 1-4)
  APEXRL_ROLLOUT_TOKENIZE_NICE     their niceness above the loop's (default 10; 0: the
                                   same priority). Linux sets it per thread; elsewhere it
                                   is ignored. The encode releases the GIL, so a lower
                                   priority only decides who gets a busy core first: the
                                   loop, then the encodes queued behind it.

The recipe's [rollout] keys `tokenize_threads` / `tokenize_nice` set them for a run
(apexrl.train.generator exports them to its trial processes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

THREADS_ENV = "APEXRL_ROLLOUT_TOKENIZE_THREADS"
NICE_ENV = "APEXRL_ROLLOUT_TOKENIZE_NICE"
DEFAULT_NICE = 10

_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def tokenize_threads() -> int:
    n = _int_env(THREADS_ENV, 0)
    if n > 0:
        return n
    return max(1, min(4, (os.cpu_count() or 2) - 1))


def _lower_priority(nice: int) -> None:
    """Thread initializer: this thread's niceness + `nice` (Linux: per thread)."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


def tokenize_pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(
                max_workers=tokenize_threads(),
                thread_name_prefix="apexrl-tokenize",
                initializer=_lower_priority,
                initargs=(max(0, _int_env(NICE_ENV, DEFAULT_NICE)),),
            )
        return _POOL


async def off_loop[T](fn: Callable[..., T], *args: Any) -> T:
    """Run `fn(*args)` in the process's tokenize threads."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(tokenize_pool(), functools.partial(fn, *args))
