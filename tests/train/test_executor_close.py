"""The process executor closes cleanly with trials still running: no "NoneType has no len()"
from the pool's manager thread, no hang at interpreter exit (CPython 3.12 pool issues)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time


def test_process_executor_close_with_running_trials_exits_promptly(tmp_path):
    task = tmp_path / "task"
    task.mkdir()
    (task / "scenario.json").write_text(json.dumps({"status": "complete", "sleep": 120}))
    script = textwrap.dedent(
        f"""
        import asyncio, time
        from pathlib import Path
        from apexrl.trial.executors import ProcessExecutor
        from apexrl.trial.config import TrialConfig

        async def main():
            ex = ProcessExecutor(2)
            cfg = TrialConfig(logs_dir=Path({str(tmp_path / "logs")!r}))
            runs = [
                asyncio.ensure_future(
                    ex.run("tests.train.fake_trials:run_trial", Path({str(task)!r}), cfg)
                )
                for _ in range(3)
            ]
            await asyncio.sleep(3)  # two trials running, one queued
            t0 = time.monotonic()
            ex.close()
            print("closed in", round(time.monotonic() - t0, 1))
            for r in runs:
                r.cancel()

        asyncio.run(main())
        """
    )
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    assert "closed in" in out.stdout
    assert "NoneType" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert took < 40  # the sleeping trials were ended, not waited for


def test_process_executor_close_after_trials_finished_is_quick_and_clean(tmp_path):
    task = tmp_path / "task"
    task.mkdir()
    (task / "scenario.json").write_text(json.dumps({"status": "complete", "reward": 1.0}))
    script = textwrap.dedent(
        f"""
        import asyncio, time
        from pathlib import Path
        from apexrl.trial.executors import ProcessExecutor
        from apexrl.trial.config import TrialConfig

        async def main():
            ex = ProcessExecutor(3)
            cfg = TrialConfig(logs_dir=Path({str(tmp_path / "logs")!r}))
            runner = "tests.train.fake_trials:run_trial"
            outs = await asyncio.gather(
                *(ex.run(runner, Path({str(task)!r}), cfg) for _ in range(4))
            )
            print("rewards", [o.result.reward for o in outs])
            ex.close()
            print("closed")

        asyncio.run(main())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert "rewards [1.0, 1.0, 1.0, 1.0]" in out.stdout and "closed" in out.stdout
    assert "Traceback" not in out.stderr, out.stderr
