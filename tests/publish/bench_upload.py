"""Publish a ~1 GB checkpoint (4 x 256 MB shards) to the Hub stand-in: dry run, upload +
verify, no-op rerun, and huggingface_hub's plain upload_folder of the same files to a fresh
repo (the peer: what a user would run by hand, without checks, redaction or verification).

Run: .venv/bin/python -m tests.publish.bench_upload   (not a pytest test; about 15 s)
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from apexrl.cli.app import app
from tests.hub_standin import HubStandIn
from tests.publish.conftest import make_checkpoint, write_safetensors


def main() -> None:
    d = Path(tempfile.mkdtemp())
    try:
        ck = make_checkpoint(d / "ck")
        for p in ck.glob("model-*-of-00002.safetensors"):
            p.unlink()
        weight_map = {}
        for s in range(4):
            name = f"model-{s + 1:05d}-of-00004.safetensors"
            write_safetensors(ck / name, {f"w{s}": np.full((64 * 1024 * 1024,), s, np.float32)})
            weight_map[f"w{s}"] = name
        (ck / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
        size = sum(p.stat().st_size for p in ck.glob("*.safetensors"))
        runner = CliRunner()
        with HubStandIn(tokens={"hf_w": "write"}) as hub:
            os.environ.update(HF_ENDPOINT=hub.url, HF_TOKEN="hf_w", HF_HOME=str(d / "home"))
            times = {}
            for label, extra in (("dry-run", ["--dry-run"]), ("upload", []), ("rerun", [])):
                t = time.perf_counter()
                res = runner.invoke(app, ["publish", "model", str(ck), "--repo", "a/b", *extra])
                times[label] = time.perf_counter() - t
                assert res.exit_code == 0, res.stderr
            from huggingface_hub import HfApi

            api = HfApi(endpoint=hub.url, token="hf_w")
            t = time.perf_counter()
            api.create_repo("a/c")
            api.upload_folder(repo_id="a/c", folder_path=str(ck), commit_message="x")
            times["upload_folder"] = time.perf_counter() - t
        print(
            f"checkpoint {size / 1e6:.0f} MB: dry-run {times['dry-run']:.2f}s, "
            f"publish (check+hash+upload+verify) {times['upload']:.2f}s, "
            f"no-op rerun {times['rerun']:.2f}s; plain HfApi.upload_folder "
            f"{times['upload_folder']:.2f}s"
        )
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
