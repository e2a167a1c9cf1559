"""`apexrl engine make-tiny` and `apexrl engine serve` (a real process on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
from typer.testing import CliRunner

from apexrl.cli.app import app

runner = CliRunner()


def test_make_tiny_and_serve(tmp_path, tok):
    out = tmp_path / "tiny"
    r = runner.invoke(app, ["engine", "make-tiny", str(out), "--seed", "1"])
    assert r.exit_code == 0, r.output
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    assert (out / "tokenizer.json").is_file()

    proc = subprocess.Popen(
        [sys.executable, "-m", "apexrl", "engine", "serve", "--model", str(out), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and not line:
            line = proc.stdout.readline()
            if proc.poll() is not None:
                break
        info = json.loads(line)
        assert info["model"] == "tiny" and info["url"].startswith("http://127.0.0.1:")
        assert httpx.get(info["url"] + "/health", timeout=10).status_code == 200
        prompt = tok.encode("hello")
        body = {"prompt": prompt, "max_tokens": 3, "seed": 0, "return_token_ids": True}
        resp = httpx.post(info["url"] + "/v1/completions", json=body, timeout=30).json()
        assert len(resp["choices"][0]["token_ids"]) <= 3
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
