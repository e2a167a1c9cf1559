"""End-to-end check of the train tier: SkyRL's fully-async trainer in its simulated-training
mode driving apexrl's entrypoint and trial generator. Collected by `make test-train` (marker
`skyrl`, run in .venv-train); also runnable by hand:

    .venv-train/bin/python tests/train/skyrl_sim_e2e.py

Needs the train extra (`skyrl==0.4.0` with the modules SkyRL's trainer imports, `ray`,
`vllm-router`; CPU is enough) plus bubblewrap for the local sandbox. What it runs: a Ray
head of its own on 127.0.0.1, 2 example tasks, oracle trials (each in its own process, real
local sandbox and grading), 1 prompt x 2 samples per step, 2 steps, staleness 1, a stub
control plane answering SkyRL's pause/resume. Passes when both steps finish (4 trials) and
SkyRL resumed generation through the control plane. On machines without flash-attn (CPU) a
stub module stands in for the import SkyRL's FSDP worker module does at load time (no model
is built in this mode).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class ControlPlane(BaseHTTPRequestHandler):
    calls: list[str] = []

    def _ok(self) -> None:
        n = int(self.headers.get("content-length") or 0)
        if n:
            self.rfile.read(n)
        ControlPlane.calls.append(f"{self.command} {self.path}")
        data = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _ok

    def log_message(self, *a) -> None:
        pass


def flash_attn_stub(root: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("flash_attn") is not None:
        return
    pkg = root / "stubs" / "flash_attn"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "bert_padding.py").write_text(
        "def pad_input(*a, **k):\n    raise NotImplementedError\n\n"
        "def unpad_input(*a, **k):\n    raise NotImplementedError\n"
    )
    sys.path.insert(0, str(root / "stubs"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(root / "stubs"), str(REPO), os.environ.get("PYTHONPATH", "")]
    )


def main() -> int:
    ok, summary = run_sim()
    print(summary)
    return 0 if ok else 1


def test_skyrl_fully_async_simulated_run():
    saved_env, saved_path = dict(os.environ), list(sys.path)
    try:
        ok, summary = run_sim()
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
    assert ok, summary


try:  # marker for pytest (the train tier selects `-m skyrl`)
    import pytest as _pytest

    test_skyrl_fully_async_simulated_run = _pytest.mark.skyrl(
        _pytest.mark.timeout(600)(test_skyrl_fully_async_simulated_run)
    )
except ImportError:  # run by hand without pytest
    pass


def run_sim() -> tuple[bool, str]:
    sys.path.insert(0, str(REPO))
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example
    from apexrl.tito.tokenizer import bundled_qwen3_dir
    from apexrl.train import entrypoint as E
    from apexrl.train.launch import LocalRay
    from apexrl.train.recipe import load_recipe
    from apexrl.train.render import render

    root = Path(tempfile.mkdtemp(prefix="sim-"))
    flash_attn_stub(root)
    write_example(root / "ex")
    list(convert_all(load_source(root / "ex"), root / "tasks", {}, strict=True))
    data = root / "data"
    for t in sorted((root / "tasks").iterdir())[:2]:
        shutil.copytree(t, data / t.name)
    os.environ.update(
        HARBOR_TELEMETRY="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        APEXRL_LOCAL_WORKDIR=str(root / "work"),
        APEXRL_WORLD_CACHE=str(root / "cache"),
    )
    srv = ThreadingHTTPServer(("127.0.0.1", 0), ControlPlane)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}"
    model = root / "model"  # a tokenizer is all the simulated trainer loads
    shutil.copytree(bundled_qwen3_dir(), model)
    sets = [
        f'model.path="{model}"',
        'agent.agent="oracle"',
        f'data.worlds_dir="{root / "ex" / "world_files_zipped"}"',
        "batch.train_batch_size=1",
        "batch.mini_batch_size=1",
        "batch.n_samples=2",
        "async.enabled=true",
        "async.max_staleness=1",
        "async.generation_workers=1",
        "training.colocate=false",
        "training.max_steps=2",
        "rollout.concurrency=2",
        f'checkpoint.path="{root}/run/ckpts"',
        "checkpoint.interval=-1",
        "skyrl.trainer.fully_async.simulate_training=true",
        "skyrl.trainer.fully_async.simulate_training_step_seconds=1.0",
        "skyrl.generator.inference_engine.run_engines_locally=false",
        f'skyrl.generator.inference_engine.external_proxy_url="{url}"',
        f'skyrl.generator.inference_engine.external_server_urls=["{url}"]',
        "skyrl.trainer.eval_interval=-1",
        f'skyrl.trainer.log_path="{root}/logs"',
        "skyrl.data.dataloader.num_workers=0",
    ]
    spec = render(load_recipe("smoke-1gpu", sets), data_train=str(data), executor="process")
    (root / "job").mkdir()
    (root / "job" / "run_spec.json").write_text(spec.model_dump_json())
    with LocalRay(num_cpus=4) as head:
        os.environ["RAY_ADDRESS"] = head.gcs_address
        t0 = time.time()
        spec2, overrides = E.preflight(root / "job" / "run_spec.json")
        try:
            E.run(spec2, overrides)
        finally:
            import ray

            ray.shutdown()  # before the head goes: a driver left attached to a dead GCS aborts
        took = time.time() - t0
    import json

    results = sorted(Path(spec2.generator.logs_dir).rglob("result.json"))
    rewards = [
        (json.loads(p.read_text()).get("verifier_result") or {}).get("rewards") for p in results
    ]
    summary = (
        f"done in {took:.0f}s: {len(results)} trials, rewards {rewards}; "
        f"control plane calls: {ControlPlane.calls}"
    )
    ok = len(results) == 4 and "POST /resume" in ControlPlane.calls
    srv.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return ok, summary


if __name__ == "__main__":
    sys.exit(main())
