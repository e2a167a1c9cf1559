"""Streaming blob upload: the body is read and hashed ahead of the socket, the last chunk
is held back until the digest is known, and a cut-off upload is retried from the start.

A small in-process registry stand-in records what each PUT actually received, which a
real registry cannot tell us (it discards a broken upload)."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import json
import socket
import threading

import pytest

from apexrl.images.refs import parse_reference
from apexrl.images.registry_client import CHUNK, CorruptBlobError, RegistryClient, RegistryRetry

SIZE = 5 * CHUNK + 12345  # several chunks, the last one partial


class _Upload(http.server.BaseHTTPRequestHandler):
    """POST gives an upload URL; PUT reads the body and, per `plan`, cuts the connection
    half-way ("cut") or stores the blob when its digest matches ("ok")."""

    protocol_version = "HTTP/1.1"
    plan: list[str] = []
    posts = 0
    received: list[int] = []  # bytes each PUT got
    stored: dict[str, bytes] = {}

    def do_POST(self):
        type(self).posts += 1
        self.send_response(202)
        self.send_header("Location", f"/v2/w/blobs/uploads/u{type(self).posts}?state=x")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self):
        length = int(self.headers["Content-Length"])
        mode = type(self).plan.pop(0) if type(self).plan else "ok"
        want = length // 2 if mode == "cut" else length
        buf = bytearray()
        while len(buf) < want:
            part = self.rfile.read(min(1 << 16, want - len(buf)))
            if not part:
                break
            buf += part
        type(self).received.append(len(buf))
        if mode == "cut" or len(buf) < length:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        digest = self.path.split("digest=", 1)[1]
        if "sha256:" + hashlib.sha256(buf).hexdigest() != digest:
            body = json.dumps({"errors": [{"code": "DIGEST_INVALID", "message": "bad"}]}).encode()
            self.send_response(400)
        else:
            type(self).stored[digest] = bytes(buf)
            body = b""
            self.send_response(201)
            self.send_header("Docker-Content-Digest", digest)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture()
def stub():
    _Upload.plan, _Upload.posts, _Upload.received, _Upload.stored = [], 0, [], {}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upload)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield parse_reference(f"127.0.0.1:{srv.server_port}/w")
    finally:
        srv.shutdown()
        srv.server_close()


def _client(ref, attempts: int) -> RegistryClient:
    return RegistryClient(ref, retry=RegistryRetry(attempts=attempts, base_delay=0.01))


def _payload(seed: int = 1) -> tuple[bytes, str]:
    import random

    data = random.Random(seed).randbytes(SIZE)
    return data, "sha256:" + hashlib.sha256(data).hexdigest()


def _wait_received(n: int, timeout: float = 10.0) -> list[int]:
    """The server thread records a cut-off PUT after the client has moved on: wait for it."""
    import time

    deadline = time.monotonic() + timeout
    while len(_Upload.received) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return _Upload.received


class _Progress:
    def __init__(self) -> None:
        self.net = 0
        self.lowest = 0

    def __call__(self, n: int) -> None:
        self.net += n
        self.lowest = min(self.lowest, self.net)


def test_streamed_blob_is_sent_whole_and_verified(stub):
    data, digest = _payload()
    progress = _Progress()
    with _client(stub, 1) as c:
        c.upload_blob(digest, SIZE, lambda: io.BytesIO(data), progress)
    assert _Upload.stored[digest] == data
    assert progress.net == SIZE


def test_digest_mismatch_while_streaming_cuts_the_upload_before_its_end(stub):
    data, digest = _payload()
    bad = bytearray(data)
    bad[-1] ^= 0xFF  # only the very last byte differs: found at the end of the stream
    progress = _Progress()
    with _client(stub, 3) as c, pytest.raises(CorruptBlobError) as ei:
        c.upload_blob(digest, SIZE, lambda: io.BytesIO(bytes(bad)), progress)
    assert "corrupted" in str(ei.value) and digest in str(ei.value)
    assert _Upload.posts == 1, "a corrupt blob is a local fault: no retry"
    # the held-back last chunk never left: the registry saw an incomplete body
    received = _wait_received(1)
    assert len(received) == 1 and received[0] < SIZE
    assert digest not in _Upload.stored


def test_blob_longer_than_its_manifest_size_is_refused(stub):
    data, digest = _payload()
    with _client(stub, 2) as c, pytest.raises(CorruptBlobError):
        c.upload_blob(digest, SIZE, lambda: io.BytesIO(data + b"tail"), None)
    assert _Upload.posts == 1
    assert all(n < SIZE for n in _wait_received(1))
    assert not _Upload.stored


def test_small_blob_mismatch_is_refused_before_sending(stub):
    data = b"config" * 100
    digest = "sha256:" + hashlib.sha256(b"other").hexdigest()
    with _client(stub, 2) as c, pytest.raises(CorruptBlobError):
        c.upload_blob(digest, len(data), lambda: io.BytesIO(data), None)
    assert all(n == 0 for n in _Upload.received)
    assert not _Upload.stored


def test_streamed_blob_cut_mid_upload_is_retried_from_the_start(stub):
    data, digest = _payload(seed=2)
    _Upload.plan = ["cut", "cut", "ok"]
    progress = _Progress()
    opened = []

    def opener():
        opened.append(1)
        return io.BytesIO(data)

    with _client(stub, 4) as c:
        c.upload_blob(digest, SIZE, opener, progress)
    assert _Upload.posts == 3 and len(opened) == 3  # a fresh upload session and read each time
    assert _Upload.received[-1] == SIZE and _Upload.stored[digest] == data
    assert progress.net == SIZE and progress.lowest >= 0  # progress rewound, never doubled


def test_streamed_blob_gives_up_after_the_retry_budget(stub):
    from apexrl.errors import ExitCode, RemoteError

    data, digest = _payload(seed=3)
    _Upload.plan = ["cut", "cut"]
    progress = _Progress()
    # threads other tests of the session left (servers, pools) are not this test's: count ours
    before = threading.active_count()
    with _client(stub, 2) as c, pytest.raises(RemoteError) as ei:
        c.upload_blob(digest, SIZE, lambda: io.BytesIO(data), progress)
    assert ei.value.code == ExitCode.REMOTE and "gave up after 2 attempts" in str(ei.value)
    assert progress.net == 0
    assert threading.active_count() < before + 20  # reader threads ended
    readers = [t for t in threading.enumerate() if t.name == "push-read"]
    for t in readers:  # a loaded machine may take a moment to schedule their exit
        t.join(timeout=10)
    assert not [t for t in readers if t.is_alive()]
