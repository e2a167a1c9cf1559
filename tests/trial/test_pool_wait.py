"""The warm pool's wait for background refills (benchmarks settle on it between runs)."""

from __future__ import annotations

import threading
import time

from apexrl.envs.local.pool import _Pool


def test_wait_filled_returns_once_no_refill_is_under_way():
    pool = _Pool()
    assert pool.wait_filled(0.0)  # nothing filling: at once
    pool.filling["w"] = 1
    t0 = time.monotonic()
    assert not pool.wait_filled(0.2)  # still filling: False after the timeout
    assert time.monotonic() - t0 >= 0.2

    def finish() -> None:
        time.sleep(0.1)
        with pool.lock:
            pool.filling["w"] = 0

    threading.Thread(target=finish).start()
    assert pool.wait_filled(5.0)
