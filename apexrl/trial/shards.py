"""Shard work over a few long-lived worker processes, each with its own event loop.

    with ShardPool(4) as pool:                       # 4 spawned workers
        out = await pool.submit("pkg.mod:fn", *args)  # runs in the least-loaded worker

One event loop for hundreds of agent loops turns every blocking moment (tokenizing an
observation, JSON-encoding a 100k-token prompt) into latency for all of them; one
process per trial (the recipe's isolation) pays an interpreter, Harbor's imports and
SSL contexts per trial. A shard pool sits between: K processes, each running many
trials concurrently in its own asyncio loop, so event-loop contention is divided by K
while memory grows with K, not with the number of trials.

`fn` is named "module:function" and imported in the worker. A coroutine function is
awaited in the worker's loop (many at once); a plain function runs in a worker thread.
Arguments and results travel pickled over a pipe. A worker that dies fails the calls
it held (ShardWorkerDied); the others go on. Workers are spawned (never forked from a
process that holds threads and sockets).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import multiprocessing as mp
import os
import threading
from typing import Any

from apexrl.importpath import load


class ShardWorkerDied(RuntimeError):
    """The worker process running a call ended before answering."""


class ShardCallError(RuntimeError):
    """The call raised in the worker; the message carries its type and text."""


def _resolve(spec: str):
    return load(spec)


def _shard_main(conn) -> None:
    """Entry of a worker process: run calls from `conn` until it sends None or closes."""
    os.environ.setdefault("HARBOR_TELEMETRY", "0")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue()

        def reader() -> None:
            while True:
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = None
                loop.call_soon_threadsafe(inbox.put_nowait, msg)
                if msg is None:
                    return

        threading.Thread(target=reader, name="apexrl-shard-reader", daemon=True).start()
        send_lock = threading.Lock()

        def reply(msg: tuple) -> None:
            with send_lock:
                conn.send(msg)

        async def run(job_id: int, spec: str, args: tuple, kwargs: dict) -> None:
            try:
                fn = _resolve(spec)
                if inspect.iscoroutinefunction(fn):
                    res = await fn(*args, **kwargs)
                else:
                    res = await asyncio.to_thread(fn, *args, **kwargs)
                msg = (job_id, True, res)
            except BaseException as e:  # noqa: BLE001 - reported to the caller, never lost
                msg = (job_id, False, f"{type(e).__name__}: {e}")
            try:
                await asyncio.to_thread(reply, msg)
            except Exception as e:  # unpicklable result: say so instead
                await asyncio.to_thread(reply, (job_id, False, f"unsendable result: {e}"))

        tasks: set[asyncio.Task] = set()
        while True:
            msg = await inbox.get()
            if msg is None:
                break
            t = asyncio.create_task(run(*msg))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    try:
        asyncio.run(main())
    finally:
        conn.close()


class _Shard:
    def __init__(self, index: int, ctx) -> None:
        self.index = index
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_shard_main, args=(child,), name=f"apexrl-shard-{index}", daemon=True
        )
        self.proc.start()
        child.close()
        self.pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self.lock = threading.Lock()
        self.dead = False
        self.reader = threading.Thread(
            target=self._read, name=f"apexrl-shard-{index}-results", daemon=True
        )
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                job_id, ok, value = self.conn.recv()
            except (EOFError, OSError):
                break
            with self.lock:
                entry = self.pending.pop(job_id, None)
            if entry is not None:
                loop, fut = entry
                loop.call_soon_threadsafe(_settle, fut, ok, value)
        with self.lock:
            self.dead = True
            left, self.pending = list(self.pending.values()), {}
        code = self.proc.exitcode
        for loop, fut in left:
            err = ShardWorkerDied(f"shard worker {self.index} ended (exit code {code})")
            loop.call_soon_threadsafe(_fail, fut, err)

    def send(self, job_id: int, spec: str, args: tuple, kwargs: dict, fut, loop) -> None:
        with self.lock:
            if self.dead:
                raise ShardWorkerDied(f"shard worker {self.index} is gone")
            self.pending[job_id] = (loop, fut)
            try:
                self.conn.send((job_id, spec, args, kwargs))
            except Exception:
                self.pending.pop(job_id, None)
                raise


def _settle(fut: asyncio.Future, ok: bool, value: Any) -> None:
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(ShardCallError(value))


def _fail(fut: asyncio.Future, err: BaseException) -> None:
    if not fut.done():
        fut.set_exception(err)


class ShardPool:
    """K worker processes; `submit` runs a named function in one of them."""

    def __init__(self, shards: int) -> None:
        if shards < 1:
            raise ValueError("a shard pool needs at least one worker")
        ctx = mp.get_context("spawn")
        self._shards = [_Shard(i, ctx) for i in range(shards)]
        self._ids = itertools.count()
        self._closed = False

    @property
    def size(self) -> int:
        return len(self._shards)

    def _pick(self, shard: int | None) -> _Shard:
        if shard is not None:
            return self._shards[shard % len(self._shards)]
        alive = [s for s in self._shards if not s.dead] or self._shards
        return min(alive, key=lambda s: len(s.pending))

    async def submit(self, spec: str, *args: Any, shard: int | None = None, **kwargs: Any) -> Any:
        """Run `spec(*args, **kwargs)` in a worker (`shard`: that one; else the least
        loaded) and return its result. Raises ShardCallError if it raised there,
        ShardWorkerDied if its worker ended first."""
        if self._closed:
            raise RuntimeError("the shard pool is closed")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pick(shard).send(next(self._ids), spec, args, kwargs, fut, loop)
        return await fut

    def close(self, timeout_s: float = 10.0) -> None:
        """Let the workers finish what they hold (up to timeout_s), then end them."""
        if self._closed:
            return
        self._closed = True
        for s in self._shards:
            try:
                with s.lock:
                    s.conn.send(None)
            except Exception:  # noqa: BLE001 - already gone
                pass
        for s in self._shards:
            s.proc.join(timeout_s)
            if s.proc.is_alive():
                s.proc.terminate()
                s.proc.join(5)
            s.reader.join(5)
            s.conn.close()

    def __enter__(self) -> ShardPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
