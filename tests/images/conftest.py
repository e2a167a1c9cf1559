"""Fixtures for image tests: a real OCI registry (Debian's docker-registry), moto's ECR
API in server mode, small worlds, and an offline base image built with umoci.

Every server listens on 127.0.0.1 on a free port, is waited for with a bounded
timeout, and is stopped after the test. Needs the apt packages docker-registry,
skopeo, umoci and apache2-utils (htpasswd)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(
    cmd: list[str], *, timeout: float = 120, check: bool = True, **kw
) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def apexrl(
    *args: str, env: dict | None = None, timeout: float = 300, **kw
) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess (stdout piped -> NDJSON)."""
    e = dict(os.environ)
    e.update(env or {})
    e.setdefault("NO_COLOR", "1")
    return subprocess.run(
        [PY, "-m", "apexrl", *args], capture_output=True, text=True, timeout=timeout, env=e, **kw
    )


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


class Registry:
    """docker-registry serving one temp storage dir on 127.0.0.1:<port>."""

    def __init__(self, root: Path, *, htpasswd: tuple[str, str] | None = None) -> None:
        self.root = root
        self.port = free_port()
        self.storage = root / "storage"
        self.storage.mkdir(parents=True, exist_ok=True)
        self.config = root / "config.yml"
        self.log = root / "registry.log"
        auth = ""
        if htpasswd:
            user, password = htpasswd
            line = run(["htpasswd", "-Bbn", user, password]).stdout.strip()
            (root / "htpasswd").write_text(line + "\n")
            auth = f"auth:\n  htpasswd:\n    realm: test\n    path: {root / 'htpasswd'}\n"
        self.config.write_text(
            "version: 0.1\n"
            "log:\n  level: warn\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.storage}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n  secret: apexrl-test-secret\n" + auth
        )
        self.proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def start(self, timeout: float = 20.0) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                ["/usr/bin/docker-registry", "serve", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"docker-registry exited:\n{self.log.read_text()[-2000:]}")
            try:
                r = httpx.get(f"{self.url}/v2/", timeout=1)
                if r.status_code in (200, 401):
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"docker-registry did not answer in {timeout}s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def registry(tmp_path):
    reg = Registry(tmp_path / "registry")
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()


ECR_ACCOUNT = "123456789012"
ECR_REGION = "us-east-1"
ECR_HOST = f"{ECR_ACCOUNT}.dkr.ecr.{ECR_REGION}.amazonaws.com"


@pytest.fixture
def ecr(tmp_path, monkeypatch):
    """moto's ECR API (server mode) + a registry that wants moto's token as Basic auth."""
    port = free_port()
    log = open(tmp_path / "moto.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [str(Path(PY).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    moto_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(moto_url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("moto_server did not start") from None
                time.sleep(0.1)
        reg = Registry(tmp_path / "ecr-registry", htpasswd=("AWS", f"{ECR_ACCOUNT}-auth-token"))
        reg.start()
        env = {
            "AWS_ENDPOINT_URL_ECR": moto_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": ECR_REGION,
            "APEXRL_REGISTRY_ENDPOINT": reg.url,
        }
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        try:
            yield {"moto_url": moto_url, "registry": reg, "env": env}
        finally:
            reg.stop()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def make_world(
    root: Path, *, n_files: int = 3, extra_bytes: int = 0, seed: int = 0, random_share: float = 0.5
) -> Path:
    """A small world folder: filesystem/ documents and .apps_data/ mail, chat, calendar."""
    import random

    rng = random.Random(seed)
    fs = root / "filesystem"
    (fs / "reports").mkdir(parents=True)
    for i in range(n_files):
        (fs / "reports" / f"note_{i}.txt").write_text(f"Quarterly note {i}\n" * (i + 1))
    (fs / "budget.csv").write_text("item,amount\nrent,1200\npayroll,54000\n")
    if extra_bytes:
        (fs / "data").mkdir()
        chunk = 8 << 20
        left, k = extra_bytes, 0
        while left > 0:
            n = min(chunk, left)
            # random (like zipped docx/xlsx/pdf) + repetitive text: partly compressible
            r = int(n * random_share)
            data = rng.randbytes(r) + (b"revenue,cost,margin\n" * (n // 20 + 1))[: n - r]
            (fs / "data" / f"blob_{k:03d}.bin").write_bytes(data)
            left -= n
            k += 1
    apps = root / ".apps_data"
    (apps / "mail").mkdir(parents=True)
    (apps / "mail" / "inbox.mbox").write_text(
        "From alice@example.com Mon Jan  1 00:00:00 2024\n"
        "From: alice@example.com\nTo: bob@example.com\nSubject: Budget\n"
        "Message-ID: <1@example.com>\n\nPlease review the budget.\n"
    )
    (apps / "calendar").mkdir()
    (apps / "calendar" / "team.ics").write_text(
        "BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//t//t//EN\nEND:VCALENDAR\n"
    )
    grp = apps / "chat" / "Groups" / "general"
    grp.mkdir(parents=True)
    (grp / "group_info.json").write_text('{"name": "general"}')
    (grp / "messages.json").write_text('{"messages": []}')
    return root


@pytest.fixture
def world(tmp_path) -> Path:
    return make_world(tmp_path / "acme_world")


@pytest.fixture(scope="session")
def base_layout(tmp_path_factory) -> Path:
    """An offline base image built with umoci (an independent OCI tool): a tiny
    rootfs with /etc/os-release and /etc/passwd. Returns the layout dir (ref 'base')."""
    root = tmp_path_factory.mktemp("base")
    layout = root / "layout"
    run(["umoci", "init", "--layout", str(layout)])
    run(["umoci", "new", "--image", f"{layout}:base"])
    bundle = root / "bundle"
    run(["umoci", "unpack", "--rootless", "--image", f"{layout}:base", str(bundle)])
    etc = bundle / "rootfs" / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "os-release").write_text('ID=apexrl-test-base\nNAME="apexrl test base"\n')
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    run(["umoci", "repack", "--image", f"{layout}:base", str(bundle)])
    run(
        [
            "umoci",
            "config",
            "--image",
            f"{layout}:base",
            "--os",
            "linux",
            "--architecture",
            "amd64",
            "--config.env",
            "PATH=/usr/local/bin:/usr/bin:/bin",
        ]
    )
    shutil.rmtree(bundle)
    return layout


def zip_dir(src: Path, dest: Path, *, prefix: str = "") -> Path:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(src.rglob("*")):
            arc = prefix + p.relative_to(src).as_posix()
            if p.is_dir():
                zf.write(p, arc + "/")
            else:
                zf.write(p, arc)
    return dest


@pytest.fixture(scope="session")
def runtime_pkg(tmp_path_factory) -> Path:
    """A frozen copy of the apexrl package for --runtime: others edit the working tree
    while tests run, and reproducibility checks need the same runtime layer twice."""
    dest = tmp_path_factory.mktemp("runtime") / "apexrl"
    shutil.copytree(
        REPO_ROOT / "apexrl", dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return dest
