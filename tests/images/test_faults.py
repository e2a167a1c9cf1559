"""Faults: registry restarted mid-push, corrupted blob, unreachable registry, retry rules."""

from __future__ import annotations

import http.server
import io
import json
import tarfile
import threading
import time
from pathlib import Path

import pytest

from apexrl.errors import ExitCode, RemoteError
from apexrl.images import oci
from apexrl.images.refs import parse_reference
from apexrl.images.registry_client import RegistryClient, RegistryRetry, push_image
from tests.images.conftest import apexrl, free_port, make_world, records, run

pytestmark = pytest.mark.integration  # a real registry, skopeo/umoci or podman


@pytest.fixture(scope="module")
def big_archive(tmp_path_factory, runtime_pkg) -> Path:
    root = tmp_path_factory.mktemp("big")
    w = make_world(root / "bigw", extra_bytes=24 << 20)
    p = apexrl(
        "world",
        "pack",
        str(w),
        "-o",
        str(root / "out"),
        "--runtime",
        str(runtime_pkg),
        "--level",
        "1",
    )
    assert p.returncode == 0, p.stderr
    return Path(records(p.stdout)[0]["archive"])


class _Gate:
    """Wraps an archive's blob reader: after the first MiB of the largest blob it
    signals and waits, so the test can stop the registry mid-upload."""

    def __init__(self, src: oci.ImageSource, digest: str) -> None:
        self.src, self.digest = src, digest
        self.reached, self.release = threading.Event(), threading.Event()
        orig = src._open

        def opener(d: str):
            fh = orig(d)
            if d != digest:
                return fh
            gate = self

            class Slow(io.RawIOBase):
                sent = 0

                def readable(self):
                    return True

                def readinto(self, b):
                    if self.sent >= (1 << 20) and not gate.release.is_set():
                        gate.reached.set()
                        gate.release.wait(30)
                    data = fh.read(min(len(b), 1 << 18))
                    b[: len(data)] = data
                    self.sent += len(data)
                    return len(data)

                def close(self):
                    fh.close()
                    super().close()

            return io.BufferedReader(Slow())

        src._open = opener


def test_registry_restarted_mid_push_then_rerun_completes(big_archive, registry):
    src = oci.open_image(big_archive)
    biggest = max(src.blob_refs(), key=lambda b: b.size)
    gate = _Gate(src, biggest.digest)
    ref = parse_reference(f"{registry.host}/worlds")
    errors: list[BaseException] = []

    def push() -> None:
        with RegistryClient(ref, retry=RegistryRetry(attempts=2, base_delay=0.05)) as c:
            try:
                push_image(c, src, "bigw", concurrency=2)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

    t = threading.Thread(target=push)
    t.start()
    assert gate.reached.wait(60), "upload never started"
    registry.stop()  # mid-upload
    gate.release.set()
    t.join(60)
    assert errors and isinstance(errors[0], RemoteError) and errors[0].code == ExitCode.REMOTE
    registry.start()  # same storage
    p = apexrl("image", "push", str(big_archive), "--to", f"{registry.host}/worlds")
    assert p.returncode == 0, p.stderr
    (rec,) = records(p.stdout)
    info = json.loads(
        run(["skopeo", "inspect", "--tls-verify=false", f"docker://{rec['ref']}"]).stdout
    )
    assert info["Digest"] == src.manifest_digest
    p = apexrl("image", "push", str(big_archive), "--to", f"{registry.host}/worlds")
    assert p.returncode == 0 and "0 blobs uploaded (0 bytes)" in p.stderr


def test_corrupted_blob_is_detected_by_digest(big_archive, registry, tmp_path):
    bad = tmp_path / "bad.tar"
    bad.write_bytes(big_archive.read_bytes())
    src = oci.open_image(bad)
    layer = src.manifest["layers"][-1]["digest"]
    with tarfile.open(bad) as tar:
        m = tar.getmember(f"blobs/sha256/{layer.split(':')[1]}")
    with open(bad, "r+b") as fh:  # flip one byte in the middle of the world layer
        fh.seek(m.offset_data + m.size // 2)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 0xFF]))
    p = apexrl("image", "push", str(bad), "--to", f"{registry.host}/worlds")
    assert p.returncode == 1, p.stderr
    assert "corrupted" in p.stderr and layer in p.stderr
    assert "Traceback" not in p.stderr
    # nothing was tagged
    r = run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry.host}/worlds:bigw"],
        check=False,
    )
    assert r.returncode != 0


def test_unreachable_registry_exits_4_after_bounded_retries(big_archive):
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    p = apexrl(
        "image",
        "push",
        str(big_archive),
        "--to",
        f"127.0.0.1:{port}/worlds",
        "--retries",
        "3",
        "--timeout",
        "2",
    )
    assert p.returncode == 4, p.stderr
    assert "gave up after 3 attempts" in p.stderr
    assert time.monotonic() - t0 < 30


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers every request with the next status of `plan` (then 404s)."""

    plan: list[int] = []
    seen: list[str] = []

    def _answer(self):
        type(self).seen.append(f"{self.command} {self.path}")
        code = type(self).plan.pop(0) if type(self).plan else 404
        body = json.dumps({"errors": [{"code": "DENIED", "message": "no"}]}).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = _answer

    def log_message(self, *a):
        pass


@pytest.mark.parametrize(
    "plan, n_requests, retryable",
    [([503, 503, 404], 3, None), ([429, 404], 2, None), ([400], 1, False), ([403], 1, False)],
)
def test_retry_on_5xx_429_not_on_other_4xx(plan, n_requests, retryable):
    _Stub.plan, _Stub.seen = list(plan), []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        ref = parse_reference(f"127.0.0.1:{srv.server_port}/w")
        with RegistryClient(ref, retry=RegistryRetry(attempts=4, base_delay=0.01)) as c:
            if retryable is None:
                assert c.blob_exists("sha256:" + "a" * 64) is False
            else:
                with pytest.raises(Exception) as ei:
                    c.blob_exists("sha256:" + "a" * 64)
                assert getattr(ei.value, "code", None) in (ExitCode.REMOTE, ExitCode.AUTH)
        assert len(_Stub.seen) == n_requests
    finally:
        srv.shutdown()
        srv.server_close()
