"""The light probe: is a tag already there? HEAD requests with the standard library only.

It lets an unchanged re-push finish without loading the full HTTP client (httpx and its
h11/h2/certifi stack, apexrl.images.registry_client): `image push` asks here first and
falls back to the normal push when this cannot answer for sure. Auth challenges are
answered by the same rule as the full client's (apexrl.images.challenge).
"""

from __future__ import annotations

import json
import os
from typing import Any

from apexrl.images import auth
from apexrl.images.challenge import Challenge, authorization
from apexrl.images.refs import ENV_ENDPOINT, Reference, default_scheme

_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def probe_manifest_digests(
    ref: Reference,
    wanted: list[tuple[str, str]],
    *,
    endpoint: str | None = None,
    timeout: float = 30.0,
) -> list[str | None] | None:
    """HEAD each (reference, media type) in `wanted` with the standard library only, on
    one kept-alive connection: the registry's digest for each (None where absent), or
    None for the whole when this light path cannot answer for sure.

    It lets an unchanged re-push finish without loading the full HTTP client (httpx,
    its h11/h2/certifi stack): the CLI checks first and falls back to the normal push
    on None. It answers only plain cases: no proxy in the environment, no redirects,
    anonymous access or one Basic/Bearer challenge, every answer 200 or 404. Anything
    else (errors, timeouts, 5xx, 429, other challenges, ECR, which needs boto3 for its
    token) returns None, and the normal client handles it with its retries and errors.
    """
    import http.client
    from urllib.parse import urlsplit

    if ref.ecr or any(os.environ.get(k) for k in _PROXY_ENV):
        return None
    base = (
        endpoint
        or os.environ.get(ENV_ENDPOINT)
        or f"{default_scheme(ref.api_host)}://{ref.api_host}"
    ).rstrip("/")
    u = urlsplit(base)
    if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
        return None
    t = min(timeout, 10.0)  # a hung registry costs at most this before the normal path
    try:
        if u.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                u.hostname, u.port, timeout=t, context=_ssl_context()
            )
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=t)
    except Exception:
        return None
    from apexrl import __version__

    headers = {"User-Agent": f"apexrl/{__version__}"}
    out: list[str | None] = []
    try:
        for reference, media_type in wanted:
            path = f"{u.path}/v2/{ref.repository}/manifests/{reference}"
            h = {**headers, "Accept": media_type}
            status, resp_headers = _head(conn, path, h)
            if status == 401 and "Authorization" not in headers:
                token = _probe_auth(ref, resp_headers.get("WWW-Authenticate", ""), t)
                if token is None:
                    return None
                headers["Authorization"] = token
                h["Authorization"] = token
                status, resp_headers = _head(conn, path, h)
            if status == 404:
                out.append(None)
            elif status == 200:
                got = resp_headers.get("Docker-Content-Digest")
                if not got:
                    return None
                out.append(got)
            else:
                return None
    except Exception:  # any failure: the normal client decides, with its retries
        return None
    finally:
        conn.close()
    return out


def _head(conn: Any, path: str, headers: dict[str, str]) -> tuple[int, Any]:
    conn.request("HEAD", path, headers=headers)
    resp = conn.getresponse()
    resp.read()
    return resp.status, resp.headers


def _ssl_context():
    """What httpx verifies against: SSL_CERT_FILE / SSL_CERT_DIR, else certifi's bundle."""
    import ssl

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _probe_auth(ref: Reference, challenge: str, timeout: float) -> str | None:
    """An Authorization value for one Basic or Bearer challenge, or None."""
    from urllib.parse import urlsplit

    ch = Challenge.parse(challenge)
    if ch.scheme == "bearer" and ch.realm:
        realm = urlsplit(ch.realm)
        if realm.scheme != "https" and realm.hostname not in ("localhost", "127.0.0.1", "::1"):
            return None

    def get_token(url: str, query: dict[str, str], headers: dict[str, str]) -> Any:
        import http.client
        from urllib.parse import urlencode

        realm = urlsplit(url)
        path = (realm.path or "/") + "?" + (realm.query + "&" if realm.query else "")
        path += urlencode(query)
        cls = http.client.HTTPSConnection if realm.scheme == "https" else http.client.HTTPConnection
        kw = {"context": _ssl_context()} if realm.scheme == "https" else {}
        conn = cls(realm.hostname, realm.port, timeout=timeout, **kw)
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            if resp.status != 200:
                return None
        finally:
            conn.close()
        return json.loads(body)

    creds = auth.lookup(ref.registry)
    return authorization(
        ch, creds, repository=ref.repository, actions="pull,push", get_token=get_token
    )
