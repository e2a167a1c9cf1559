"""Garbage collection for a process whose event loop carries many agent loops.

At 550 trials in one loop the cyclic GC's full (generation 2) collections walk the whole
heap, 0.3-0.7 s each with the loop stopped, and run every time the heap has grown by a
quarter: trials' requests, responses and coroutines live for seconds (one engine call), so
they survive the young collections and count as growth although refcounting frees them
a moment later. A full collection finds little (a few thousand cycles).

  APEXRL_ROLLOUT_GC  "tuned" (default): at the first agent loop of the process, the heap
                     built so far (modules, tokenizer, templates, schemas) is frozen out
                     of every collection (gc.freeze), young collections run every
                     10,000 allocations instead of 700 (fewer walks of live objects), and
                     a full collection waits for 100 middle ones instead of 10.
                     "default": Python's own settings, untouched.

The recipe's [rollout] key `loop_gc` sets it for a run (apexrl.train.generator exports it
to its trial processes).
"""

from __future__ import annotations

import gc
import os
import threading

GC_ENV = "APEXRL_ROLLOUT_GC"
GC_MODES = ("tuned", "default")
TUNED_THRESHOLDS = (10_000, 10, 100)

_LOCK = threading.Lock()
_DONE = False


def gc_mode() -> str:
    mode = os.environ.get(GC_ENV, "").strip() or "tuned"
    return mode if mode in GC_MODES else "tuned"


def tune_gc_once() -> bool:
    """Apply APEXRL_ROLLOUT_GC once per process; True when this call tuned it."""
    global _DONE
    with _LOCK:
        if _DONE:
            return False
        _DONE = True
        if gc_mode() != "tuned":
            return False
        gc.freeze()
        gc.set_threshold(*TUNED_THRESHOLDS)
        return True
