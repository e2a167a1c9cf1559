"""Issue 29, 7a: sandbox uids are unique among live trials (this process's and other
apexrl processes'): two trials on one uid share its process limit and can signal each
other's processes. Picked at random from the span, a collision among 500 concurrent
trials was likely."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from apexrl.envs.local import sandbox
from apexrl.envs.local.environment import SandboxError
from tests.trial.conftest import task_named
from tests.trial.test_local_env import make_env

pytestmark = pytest.mark.integration


def test_sandbox_uids_are_unique_among_live_trials(tmp_path, worlds, task_dirs, monkeypatch):
    assert os.geteuid() == 0, "per-trial uids exist when apexrl runs as root (as tests do)"
    monkeypatch.setattr(sandbox, "UID_SPAN", 3)
    monkeypatch.setattr(sandbox, "UID_CLAIMS", (str(tmp_path), "claims"))
    task = task_named(task_dirs, "steerco-40fc")
    claims = tmp_path / "claims"

    def env(i: int):
        return make_env(task, tmp_path / f"t{i}", worlds, gateway=False)

    async def go():
        envs = [env(i) for i in range(3)]
        await asyncio.gather(*(e.start(force_build=False) for e in envs))
        uids = [e._slot.uid for e in envs]
        with pytest.raises(SandboxError, match="no free sandbox uid"):
            await env(3).start(force_build=False)
        # a trial's uid is free again once it stops ...
        freed = uids[0]
        await envs[0].stop(delete=True)
        assert not (claims / str(freed)).exists()
        # ... unless another live apexrl process claims it first
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            start = sandbox._start_of(other.pid)
            (claims / str(freed)).write_text(json.dumps({"pid": other.pid, "start": start}))
            with pytest.raises(SandboxError, match="no free sandbox uid"):
                await env(4).start(force_build=False)
        finally:
            other.kill()
            other.wait()
        # a claim left by a process that is gone is taken over
        late = env(5)
        await late.start(force_build=False)
        assert late._slot.uid == freed
        for e in [*envs[1:], late]:
            await e.stop(delete=True)
        return uids

    uids = asyncio.run(go())
    assert len(set(uids)) == 3 and all(
        sandbox.UID_BASE <= u < sandbox.UID_BASE + 3 for u in uids
    ), uids
    assert sorted(os.listdir(claims)) == []
