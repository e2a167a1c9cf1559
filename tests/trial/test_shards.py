"""ShardPool: named calls in worker processes, each with its own event loop."""

from __future__ import annotations

import asyncio
import os

import pytest

from apexrl.trial.shards import ShardCallError, ShardPool, ShardWorkerDied


async def where(x: int) -> tuple[int, int]:
    """A coroutine: runs in the worker's event loop."""
    await asyncio.sleep(0.05)
    return os.getpid(), x * 2


_IN_FLIGHT = [0, 0]  # now, most seen (in the worker process)


async def probe() -> int:
    _IN_FLIGHT[0] += 1
    _IN_FLIGHT[1] = max(_IN_FLIGHT)
    await asyncio.sleep(0.3)
    _IN_FLIGHT[0] -= 1
    return _IN_FLIGHT[1]


def blocking(x: int) -> int:
    """A plain function: runs in a worker thread."""
    return x + 1


async def fails(msg: str) -> None:
    raise ValueError(msg)


async def dies() -> None:
    os._exit(3)


def test_calls_run_in_workers_concurrently():
    async def main():
        with ShardPool(2) as pool:
            out = await asyncio.gather(
                *(pool.submit("tests.trial.test_shards:where", i) for i in range(40))
            )
            assert await pool.submit("tests.trial.test_shards:blocking", 1) == 2
            pinned = await pool.submit("tests.trial.test_shards:where", 0, shard=1)
            seen = await asyncio.gather(
                *(pool.submit("tests.trial.test_shards:probe", shard=0) for _ in range(10))
            )
        return out, max(seen), pinned

    out, most_at_once, pinned = asyncio.run(main())
    assert [v for _, v in out] == [2 * i for i in range(40)]
    pids = {p for p, _ in out}
    assert len(pids) == 2 and os.getpid() not in pids  # two worker processes
    assert pinned[0] in pids
    assert most_at_once > 1  # calls run at once in a worker's event loop


def test_errors_and_dead_workers_are_reported():
    async def main():
        with ShardPool(2) as pool:
            with pytest.raises(ShardCallError, match="ValueError: bad record 7"):
                await pool.submit("tests.trial.test_shards:fails", "bad record 7")
            with pytest.raises(ShardCallError, match="not 'module:attr'"):
                await pool.submit("no_colon")
            with pytest.raises(ShardWorkerDied):
                await pool.submit("tests.trial.test_shards:dies", shard=0)
            # the other worker goes on
            assert await pool.submit("tests.trial.test_shards:blocking", 5) == 6

    asyncio.run(main())
