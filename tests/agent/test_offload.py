"""Record writes go through one writer thread: never two at once, never on the loop."""

from __future__ import annotations

import asyncio
import threading
import time

from apexrl.agent.offload import write_off_loop


def test_record_writes_run_one_at_a_time_off_the_loop():
    active, peak, names = [0], [0], set()
    lock = threading.Lock()

    def write(k: int) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        names.add(threading.current_thread().name)
        time.sleep(0.002)
        with lock:
            active[0] -= 1
        return k * 2

    async def main() -> tuple[list[int], float]:
        ticks = []

        async def tick() -> None:
            for _ in range(5):
                t = time.perf_counter()
                await asyncio.sleep(0.005)
                ticks.append(time.perf_counter() - t)

        t = asyncio.create_task(tick())
        out = await asyncio.gather(*(write_off_loop(write, k) for k in range(40)))
        await t
        return out, max(ticks)

    out, worst = asyncio.run(main())
    assert out == [k * 2 for k in range(40)]
    assert peak[0] == 1  # bounded: one serializer competes with the loop at a time
    assert names and all(n.startswith("apexrl-records") for n in names)
    assert worst < 0.5  # the loop kept running while 40 writes queued
    # a second event loop in the same process (shard workers, the bench) uses it too
    assert asyncio.run(write_off_loop(sum, [1, 2])) == 3
