"""A small OCI distribution client: push image archives, pull base images.

Push: HEAD every blob and skip the ones present; otherwise one monolithic
upload (POST, then a single PUT ?digest=, which ECR handles reliably where
chunked PATCH does not); the manifest by digest, then the tag; the registry's
Docker-Content-Digest is checked against ours. Retries with exponential
backoff on 5xx, 429 and connection errors; other 4xx fail at once. Auth: the
registry's challenge decides (Bearer token flow or Basic); ECR gets Basic
from `get_authorization_token` up front.

Endpoint override: `endpoint` (CLI `--registry-endpoint`, env
APEXRL_REGISTRY_ENDPOINT) sends the API calls for a reference to another base
URL, e.g. a tunnel, a pull-through proxy, or a local registry standing in for
ECR in tests; the reference written to records stays as given.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin

from apexrl.errors import ApexError, AuthError, ExitCode, RemoteError, UsageError
from apexrl.images import auth, oci
from apexrl.images.challenge import Challenge, authorization
from apexrl.images.refs import ENV_ENDPOINT, Reference, default_scheme, parse_reference

ENV_RETRIES = "APEXRL_REGISTRY_RETRIES"
MANIFEST_ACCEPT = ", ".join([oci.OCI_MANIFEST, oci.OCI_INDEX, oci.DOCKER_MANIFEST, oci.DOCKER_LIST])
CHUNK = 1 << 20  # bytes per read, hash update and socket write
DEPTH = 4  # chunks read and hashed ahead of the socket, per blob in flight


class CorruptBlobError(ApexError):
    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="the archive is damaged; rebuild it with `apexrl world pack`",
            code=ExitCode.CHECK_FAILED,
        )


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RegistryRetry:
    """Retries of registry HTTP calls (the engine client's are apexrl.tito.client.RetryPolicy)."""

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 8.0

    @classmethod
    def from_env(cls, attempts: int | None = None) -> RegistryRetry:
        if attempts is None:
            raw = os.environ.get(ENV_RETRIES, "").strip()
            attempts = int(raw) if raw.isdigit() else cls.attempts
        return cls(attempts=max(1, attempts))

    def delay(self, attempt: int, retry_after: float | None) -> float:
        d = min(self.max_delay, self.base_delay * (2**attempt)) * (0.5 + random.random() / 2)
        if retry_after is not None:
            d = min(max(d, retry_after), 30.0)
        return d


class _BlobStream:
    """The body of one blob's PUT, verified as it goes.

    A reader thread reads and hashes up to DEPTH chunks ahead while the sending thread
    writes to the socket (file reads, SHA-256 and socket writes all release the GIL),
    so read, digest and send overlap. The last chunk is held back until the digest
    and the size are known: a blob whose content does not match its digest is never
    completed on the registry (the connection is cut instead). `body` is called once
    per attempt (an auth challenge re-sends); each call starts over.
    """

    def __init__(
        self,
        digest: str,
        size: int,
        opener: Callable[[], IO[bytes]],
        on_bytes: Callable[[int], None] | None = None,
        *,
        chunk: int = CHUNK,
        depth: int = DEPTH,
    ) -> None:
        self.digest, self.size = digest, size
        self._opener, self._on_bytes = opener, on_bytes
        self._chunk, self._depth = chunk, depth
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0  # bytes handed to the socket in this attempt
        self.error: BaseException | None = None

    def body(self) -> Iterator[bytes]:
        self.close()
        self.rewind_progress()
        self.error = None
        self._stop = threading.Event()
        if self.size <= self._chunk:
            return self._small()
        q: queue.Queue = queue.Queue(maxsize=self._depth)
        self._thread = threading.Thread(
            target=self._read, args=(q, self._stop), name="push-read", daemon=True
        )
        self._thread.start()
        return self._stream(q)

    def rewind_progress(self) -> None:
        if self._on_bytes and self.sent:
            self._on_bytes(-self.sent)
        self.sent = 0

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _mismatch(self, got: str, n: int) -> CorruptBlobError:
        return CorruptBlobError(
            f"blob {self.digest} ({self.size} bytes) is corrupted: its content hashes to "
            f"{got} ({n}{'+' if n > self.size else ''} bytes)"
        )

    def _count(self, chunk: bytes) -> bytes:
        self.sent += len(chunk)
        if self._on_bytes:
            self._on_bytes(len(chunk))
        return chunk

    def _small(self) -> Iterator[bytes]:
        with self._opener() as fh:
            data = fh.read(self.size + 1)
        got = "sha256:" + hashlib.sha256(data).hexdigest()
        if got != self.digest or len(data) != self.size:
            self.error = self._mismatch(got, len(data))
            raise self.error
        yield self._count(data)

    def _read(self, q: queue.Queue, stop: threading.Event) -> None:
        def put(item: tuple[str, Any]) -> bool:
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        h = hashlib.sha256()
        n = 0
        try:
            with self._opener() as fh:
                while not stop.is_set():
                    data = fh.read(self._chunk)
                    if not data:
                        break
                    n += len(data)
                    if n > self.size:  # longer than the manifest says: stop before sending it
                        put(("end", ("sha256:" + h.hexdigest(), n)))
                        return
                    h.update(data)
                    if not put(("data", data)):
                        return
            put(("end", ("sha256:" + h.hexdigest(), n)))
        except BaseException as e:  # handed to the sending thread
            put(("error", e))

    def _stream(self, q: queue.Queue) -> Iterator[bytes]:
        held: bytes | None = None
        try:
            while True:
                try:
                    kind, value = q.get(timeout=1.0)
                except queue.Empty:
                    reader = self._thread
                    if (reader is None or not reader.is_alive()) and q.empty():
                        raise RuntimeError("blob reader stopped without a result") from None
                    continue
                if kind == "data":
                    if held is not None:
                        yield self._count(held)
                    held = value
                elif kind == "end":
                    got, n = value
                    if got != self.digest or n != self.size:
                        self.error = self._mismatch(got, n)
                        raise self.error
                    if held is not None:
                        yield self._count(held)
                    return
                else:
                    self.error = value
                    raise value
        finally:
            self._stop.set()


def _httpx():
    """httpx without its command-line module: httpx/__init__ imports httpx._main, which
    loads click, rich and pygments when they are installed (a third of httpx's import
    time). It falls back to a stub `main` when that import fails; nothing here uses it."""
    import sys

    if "httpx" in sys.modules:
        return sys.modules["httpx"]
    block = "httpx._main" not in sys.modules
    if block:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx
    finally:
        if block and sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]  # a later `import httpx._main` works as usual
    return httpx


def _transport(limits: Any) -> Any:
    """One transport for both schemes that builds the TLS one on first https use:
    loading the CA bundle costs ~60 ms of CPU, wasted on plain-HTTP registries. The
    plain one carries no verification settings because it never speaks TLS."""
    httpx = _httpx()

    class _ByScheme(httpx.BaseTransport):
        def __init__(self) -> None:
            self._plain: Any = None
            self._tls: Any = None
            self._lock = threading.Lock()

        def _get(self, tls: bool) -> Any:
            with self._lock:
                if tls:
                    if self._tls is None:
                        self._tls = httpx.HTTPTransport(limits=limits)  # verify=True
                    return self._tls
                if self._plain is None:
                    self._plain = httpx.HTTPTransport(limits=limits, verify=False)
                return self._plain

        def handle_request(self, request: Any) -> Any:
            return self._get(request.url.scheme == "https").handle_request(request)

        def close(self) -> None:
            for t in (self._plain, self._tls):
                if t is not None:
                    t.close()

    return _ByScheme()


def _registry_error(resp: Any) -> str:
    try:
        errs = resp.json().get("errors") or []
        if errs:
            e = errs[0]
            return f"{e.get('code', '')}: {e.get('message', '')}".strip(": ")
    except Exception:
        pass
    text = (resp.text or "").strip().replace("\n", " ")
    return text[:200] or resp.reason_phrase


def _registry_error_code(resp: Any) -> str:
    try:
        return ((resp.json().get("errors") or [{}])[0]).get("code", "")
    except Exception:
        return ""


class RegistryClient:
    """One repository on one registry. Thread-safe: blobs go up in parallel."""

    def __init__(
        self,
        ref: Reference,
        *,
        endpoint: str | None = None,
        credentials: auth.Credentials | None = None,
        preemptive_basic: bool = False,
        retry: RegistryRetry | None = None,
        timeout: float = 30.0,
        transfer_timeout: float = 600.0,
        concurrency: int = 4,
        actions: str = "pull,push",
    ) -> None:
        httpx = _httpx()

        self.ref = ref
        endpoint = endpoint or os.environ.get(ENV_ENDPOINT) or None
        self.base = (endpoint or f"{default_scheme(ref.api_host)}://{ref.api_host}").rstrip("/")
        self.creds = credentials
        self.retry = retry or RegistryRetry.from_env()
        self.actions = actions
        self._auth: str | None = credentials.basic() if (credentials and preemptive_basic) else None
        self._lock = threading.Lock()
        self._timeout = httpx.Timeout(
            timeout, read=timeout, write=transfer_timeout, pool=transfer_timeout
        )
        n = max(2, concurrency * 2 + 2)
        from apexrl import __version__

        self._http = httpx.Client(
            timeout=self._timeout,
            transport=_transport(httpx.Limits(max_connections=n, max_keepalive_connections=n)),
            headers={"User-Agent": f"apexrl/{__version__}"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- low level ---------------------------------------------------------------------

    def url(self, path: str) -> str:
        return f"{self.base}/v2/{self.ref.repository}/{path}"

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: Callable[[], Any] | bytes | None = None,
        ok: tuple[int, ...] = (200,),
        allow: tuple[int, ...] = (),
        stream: bool = False,
    ):
        """One attempt (plus one re-send after an auth challenge). Raises _Retryable for
        5xx/429/connection errors, RemoteError/AuthError for the rest."""
        httpx = _httpx()

        what = f"{method} {url}"
        for auth_round in range(2):
            h = dict(headers or {})
            with self._lock:
                if self._auth:
                    h["Authorization"] = self._auth
            body = content() if callable(content) else content
            try:
                req = self._http.build_request(method, url, headers=h, content=body)
                resp = self._http.send(
                    req, stream=stream, follow_redirects=method in ("GET", "HEAD")
                )
            except httpx.TimeoutException as e:
                raise _Retryable(f"{what}: timed out ({type(e).__name__})") from None
            except httpx.TransportError as e:
                raise _Retryable(f"{what}: {type(e).__name__}: {e}") from None
            if resp.status_code == 401 and auth_round == 0:
                if stream:
                    resp.read()
                if self._authenticate(resp):
                    continue
            break
        code = resp.status_code
        if code in ok or code in allow:
            return resp
        if stream:
            resp.read()
        msg = f"{what}: HTTP {code} {_registry_error(resp)}"
        if code == 429 or code >= 500:
            ra = resp.headers.get("Retry-After", "")
            raise _Retryable(msg, float(ra) if ra.replace(".", "", 1).isdigit() else None)
        if code in (401, 403):
            raise AuthError(msg, hint=self._auth_hint())
        raise RemoteError(msg, retryable=False)

    def _auth_hint(self) -> str:
        if self.ref.ecr:
            return (
                "check the AWS credentials (ECR get_authorization_token) and the repository policy"
            )
        return (
            "log in (`docker login`, ~/.docker/config.json) or set "
            f"{auth.ENV_USER} and {auth.ENV_PASSWORD}"
        )

    def _authenticate(self, resp: Any) -> bool:
        """Answer a 401 challenge. True when a new Authorization header is ready."""
        ch = Challenge.parse(resp.headers.get("WWW-Authenticate", ""))
        if ch.scheme == "basic" and not self.creds:
            raise AuthError(
                f"registry {self.ref.registry} asks for credentials and none were found",
                hint=self._auth_hint(),
            )
        new = authorization(
            ch,
            self.creds,
            repository=self.ref.repository,
            actions=self.actions,
            get_token=self._token_reply,
        )
        if new is None:
            if ch.scheme == "bearer" and ch.realm:
                raise AuthError(f"token service {ch.realm} answered without a token")
            return False
        with self._lock:
            if ch.scheme == "basic" and self._auth == new:
                return False
            self._auth = new
        return True

    def _token_reply(self, realm: str, query: dict[str, str], headers: dict[str, str]) -> Any:
        """The token service's JSON; failures classified as every registry call's are."""
        httpx = _httpx()

        try:
            r = self._http.get(realm, params=query, headers=headers, timeout=self._timeout)
        except httpx.TransportError as e:
            raise _Retryable(f"token request to {realm}: {type(e).__name__}: {e}") from None
        if r.status_code in (401, 403):
            raise AuthError(
                f"token request to {realm}: HTTP {r.status_code}", hint=self._auth_hint()
            )
        if r.status_code == 429 or r.status_code >= 500:
            raise _Retryable(f"token request to {realm}: HTTP {r.status_code}")
        if r.status_code != 200:
            raise RemoteError(f"token request to {realm}: HTTP {r.status_code}", retryable=False)
        return r.json()

    def call(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run `fn` with retries on retryable failures; RemoteError after the last."""
        last: _Retryable | None = None
        for attempt in range(self.retry.attempts):
            try:
                return fn()
            except _Retryable as e:
                last = e
                if attempt + 1 < self.retry.attempts:
                    time.sleep(self.retry.delay(attempt, e.retry_after))
        raise RemoteError(
            f"{what}: {last} (gave up after {self.retry.attempts} attempts)",
            retryable=True,
            hint=f"check that {self.base} is reachable; re-running resumes where it stopped",
        )

    # -- blobs --------------------------------------------------------------------------

    def blob_exists(self, digest: str, size: int | None = None) -> bool:
        def head() -> bool:
            r = self._send("HEAD", self.url(f"blobs/{digest}"), allow=(404,))
            if r.status_code == 404:
                return False
            length = r.headers.get("Content-Length")
            return size is None or length is None or int(length) == size

        return self.call(f"HEAD blob {digest[:19]}", head)

    def upload_blob(
        self,
        digest: str,
        size: int,
        opener: Callable[[], IO[bytes]],
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        """POST + one monolithic PUT ?digest= (what ECR handles reliably, docs/facts.md section 9).

        The body streams from a reader thread that hashes ahead of the socket; the
        last chunk goes out only once the content is known to match `digest`."""

        def attempt() -> None:
            r = self._send(
                "POST", self.url("blobs/uploads/"), headers={"Content-Length": "0"}, ok=(202,)
            )
            loc = r.headers.get("Location")
            if not loc:
                raise RemoteError(
                    "registry started an upload without a Location header", retryable=False
                )
            put_url = urljoin(self.base + "/", loc)
            put_url += ("&" if "?" in put_url else "?") + f"digest={digest}"
            stream = _BlobStream(digest, size, opener, on_bytes)
            try:
                resp = self._send(
                    "PUT",
                    put_url,
                    headers={
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(size),
                    },
                    content=stream.body,
                    ok=(201,),
                    allow=(400, 404),
                )
            except _Retryable:
                stream.rewind_progress()  # the retry resends
                raise
            finally:
                stream.close()
            if stream.error is not None:  # the body was cut short by a local fault
                raise stream.error
            if resp.status_code in (400, 404):
                code = _registry_error_code(resp)
                if code in ("BLOB_UPLOAD_UNKNOWN", "BLOB_UPLOAD_INVALID"):
                    # the upload session was lost (registry restarted): start again
                    stream.rewind_progress()
                    raise _Retryable(f"PUT blob {digest[:19]}: {code}")
                if code == "DIGEST_INVALID":
                    raise CorruptBlobError(
                        f"registry rejected blob {digest}: content does not match"
                    )
                raise RemoteError(
                    f"PUT blob {digest[:19]}: HTTP {resp.status_code} {_registry_error(resp)}",
                    retryable=False,
                )
            got = resp.headers.get("Docker-Content-Digest")
            if got and got != digest:
                raise RemoteError(
                    f"registry stored blob {digest} as {got}",
                    retryable=False,
                    hint="the registry or a proxy altered the upload",
                )

        self.call(f"upload blob {digest[:19]}", attempt)

    def download_blob(self, digest: str, dest: Path, size: int | None = None) -> None:
        """GET a blob into `dest` (atomically), verifying its digest."""
        from apexrl.artifacts.atomic import atomic_path

        def attempt() -> None:
            httpx = _httpx()

            with atomic_path(dest) as tmp:
                resp = self._send("GET", self.url(f"blobs/{digest}"), stream=True)
                h = hashlib.sha256()
                try:
                    with open(tmp, "wb") as fh:
                        for chunk in resp.iter_bytes(CHUNK):
                            h.update(chunk)
                            fh.write(chunk)
                except httpx.TransportError as e:
                    raise _Retryable(f"GET blob {digest[:19]}: {type(e).__name__}: {e}") from None
                finally:
                    resp.close()
                got = "sha256:" + h.hexdigest()
                if got != digest:
                    raise CorruptBlobError(f"blob {digest} from {self.ref.name} hashes to {got}")

        self.call(f"GET blob {digest[:19]}", attempt)

    # -- manifests ----------------------------------------------------------------------

    def manifest_digest(self, reference: str, media_type: str = MANIFEST_ACCEPT) -> str | None:
        """HEAD a manifest: its digest, or None when absent."""

        def head() -> str | None:
            r = self._send(
                "HEAD",
                self.url(f"manifests/{reference}"),
                headers={"Accept": media_type},
                allow=(404,),
            )
            if r.status_code == 404:
                return None
            return r.headers.get("Docker-Content-Digest") or ""

        return self.call(f"HEAD manifest {reference}", head)

    def put_manifest(self, reference: str, data: bytes, media_type: str) -> None:
        expected = oci.digest_bytes(data)

        def put() -> None:
            r = self._send(
                "PUT",
                self.url(f"manifests/{reference}"),
                headers={"Content-Type": media_type},
                content=data,
                ok=(200, 201),
            )
            got = r.headers.get("Docker-Content-Digest")
            if got and got != expected:
                raise RemoteError(
                    f"registry stored manifest {reference} as {got}, expected {expected}",
                    retryable=False,
                )

        self.call(f"PUT manifest {reference}", put)

    def get_manifest(self, reference: str) -> tuple[bytes, str]:
        def get() -> tuple[bytes, str]:
            r = self._send(
                "GET", self.url(f"manifests/{reference}"), headers={"Accept": MANIFEST_ACCEPT}
            )
            return r.content, r.headers.get("Content-Type", "").split(";")[0].strip()

        data, mt = self.call(f"GET manifest {reference}", get)
        if reference.startswith("sha256:") and oci.digest_bytes(data) != reference:
            raise CorruptBlobError(
                f"manifest {reference} from {self.ref.name} hashes to {oci.digest_bytes(data)}"
            )
        return data, mt


# --- push and pull ---------------------------------------------------------------------


@dataclass
class PushResult:
    ref: Reference  # with tag
    digest: str
    size: int  # bytes of config + layers + manifest
    uploaded_blobs: int
    uploaded_bytes: int
    skipped_blobs: int


def client_for(
    ref: Reference,
    *,
    endpoint: str | None = None,
    concurrency: int = 4,
    retries: int | None = None,
    timeout: float = 30.0,
    push: bool = True,
    create_repository: bool = True,
) -> RegistryClient:
    """A client with credentials: ECR via boto3 (repository created), else env/Docker config."""
    retry = RegistryRetry.from_env(retries)
    if ref.ecr:
        account, region = ref.ecr
        creds = auth.ecr_credentials(account, region)
        if push and create_repository:
            auth.ecr_ensure_repository(account, region, ref.repository)
        return RegistryClient(
            ref,
            endpoint=endpoint,
            credentials=creds,
            preemptive_basic=True,
            retry=retry,
            timeout=timeout,
            concurrency=concurrency,
            actions="pull,push" if push else "pull",
        )
    return RegistryClient(
        ref,
        endpoint=endpoint,
        credentials=auth.lookup(ref.registry),
        retry=retry,
        timeout=timeout,
        concurrency=concurrency,
        actions="pull,push" if push else "pull",
    )


def archive_blobs(src: oci.ImageSource) -> dict[str, oci.BlobRef]:
    """The image's distinct blobs, each checked present and of its manifest size
    (a torn archive is a local fault, not a remote one)."""
    blobs: dict[str, oci.BlobRef] = {}
    for b in src.blob_refs():
        blobs.setdefault(b.digest, b)
    for b in blobs.values():
        have = src._size(b.digest)
        if have is None:
            raise CorruptBlobError(f"{src.where}: blob {b.digest} is missing from the archive")
        if have != b.size:
            raise CorruptBlobError(
                f"{src.where}: blob {b.digest} is {have} bytes, manifest says {b.size}"
            )
    return blobs


def push_image(
    client: RegistryClient,
    src: oci.ImageSource,
    tag: str,
    *,
    concurrency: int = 4,
    on_bytes: Callable[[int], None] | None = None,
) -> PushResult:
    blobs = archive_blobs(src)
    digest = src.manifest_digest
    ref = client.ref.with_tag(tag)
    total = sum(b.size for b in blobs.values()) + len(src.manifest_bytes)
    # Fast path: an unchanged re-push is one HEAD when the tag already points at it.
    if client.manifest_digest(tag, src.manifest_media_type) == digest:
        if on_bytes:
            on_bytes(sum(b.size for b in blobs.values()))
        return PushResult(ref, digest, total, 0, 0, len(blobs))

    counts = {"up": 0, "bytes": 0, "skip": 0}
    lock = threading.Lock()

    def one(b: oci.BlobRef) -> None:
        if client.blob_exists(b.digest, b.size):
            with lock:
                counts["skip"] += 1
            if on_bytes:
                on_bytes(b.size)
            return
        client.upload_blob(b.digest, b.size, b.opener, on_bytes)
        with lock:
            counts["up"] += 1
            counts["bytes"] += b.size

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="push") as pool:
        futures = [pool.submit(one, b) for b in sorted(blobs.values(), key=lambda b: -b.size)]
        errors = []
        for f in futures:
            try:
                f.result()
            except BaseException as e:  # keep the others going; report the first
                errors.append(e)
        if errors:
            raise errors[0]
    if client.manifest_digest(digest, src.manifest_media_type) is None:
        client.put_manifest(digest, src.manifest_bytes, src.manifest_media_type)
    client.put_manifest(tag, src.manifest_bytes, src.manifest_media_type)
    return PushResult(ref, digest, total, counts["up"], counts["bytes"], counts["skip"])


def cache_dir() -> Path:
    root = os.environ.get("APEXRL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"), "apexrl"
    )
    return Path(root) / "blobs"


def pull_image(
    spec: str, *, endpoint: str | None = None, platform: str = "linux/amd64"
) -> oci.ImageSource:
    """Fetch an image's manifest, config and layers into the blob cache (verified)."""
    ref = parse_reference(spec)
    want_os, want_arch = platform.split("/", 1)
    blobs_dir = cache_dir() / "sha256"
    blobs_dir.mkdir(parents=True, exist_ok=True)
    with client_for(ref, endpoint=endpoint, push=False) as client:
        data, mt = client.get_manifest(ref.digest or ref.tag or "latest")
        doc = json.loads(data)
        if mt in oci.INDEX_TYPES or doc.get("mediaType") in oci.INDEX_TYPES or "manifests" in doc:
            pick = [
                d
                for d in doc.get("manifests") or []
                if (d.get("platform") or {}).get("os") == want_os
                and (d.get("platform") or {}).get("architecture") == want_arch
            ]
            if not pick:
                raise UsageError(f"{spec}: no {platform} image in its index")
            data, mt = client.get_manifest(pick[0]["digest"])
            doc = json.loads(data)
        mt = doc.get("mediaType") or mt
        if mt not in oci.MANIFEST_TYPES:
            raise UsageError(f"{spec}: unsupported manifest type {mt!r}")
        missing = []
        for d in [doc["config"], *doc.get("layers", [])]:
            p = blobs_dir / d["digest"].split(":", 1)[1]
            if not (p.is_file() and p.stat().st_size == int(d["size"])):
                missing.append((d["digest"], p, int(d["size"])))
        # several blobs in flight, as push sends them (each is written atomically)
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="pull") as pool:
            for f in [pool.submit(client.download_blob, *m) for m in missing]:
                f.result()

    def open_blob(digest: str) -> IO[bytes]:
        return open(blobs_dir / digest.split(":", 1)[1], "rb")  # noqa: SIM115

    def size_of(digest: str) -> int | None:
        p = blobs_dir / digest.split(":", 1)[1]
        return p.stat().st_size if p.is_file() else None

    return oci.ImageSource(spec, data, doc, mt, {}, open_blob, size_of)


def push_error_code(errors: list[BaseException], n_ok: int) -> ExitCode:
    if not errors:
        return ExitCode.OK
    if n_ok:
        return ExitCode.PARTIAL
    first = errors[0]
    return first.code if isinstance(first, ApexError) else ExitCode.CHECK_FAILED
