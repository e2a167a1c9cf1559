"""References, Docker config credentials, and the Bearer token flow."""

from __future__ import annotations

import base64
import http.server
import json
import threading

import pytest

from apexrl.errors import UsageError
from apexrl.images import auth
from apexrl.images.refs import parse_reference
from apexrl.images.registry_client import RegistryClient, RegistryRetry


@pytest.mark.parametrize(
    "text, registry, repo, tag, ecr",
    [
        ("python:3.12-slim", "docker.io", "library/python", "3.12-slim", None),
        ("ghcr.io/org/img", "ghcr.io", "org/img", None, None),
        ("localhost:5000/a/b:v1", "localhost:5000", "a/b", "v1", None),
        (
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/apex/worlds:w1",
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com",
            "apex/worlds",
            "w1",
            ("123456789012", "eu-west-1"),
        ),
    ],
)
def test_parse_reference(text, registry, repo, tag, ecr):
    r = parse_reference(text)
    assert (r.registry, r.repository, r.tag, r.ecr) == (registry, repo, tag, ecr)


@pytest.mark.parametrize("bad", ["", "UPPER/case", "a/b:bad tag", "a/b@sha256:zz", "h.io/a:-x"])
def test_bad_references_are_usage_errors(bad):
    with pytest.raises(UsageError):
        parse_reference(bad)


def test_docker_config_auths_and_env_precedence(tmp_path, monkeypatch):
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {"auths": {"https://reg.example:5000": {"auth": base64.b64encode(b"bob:pw1").decode()}}}
        )
    )
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv(auth.ENV_USER, raising=False)
    monkeypatch.delenv(auth.ENV_PASSWORD, raising=False)
    c = auth.lookup("reg.example:5000")
    assert (c.username, c.password) == ("bob", "pw1")
    assert "pw1" not in repr(c)
    assert auth.lookup("other.example") is None
    monkeypatch.setenv(auth.ENV_USER, "env-user")
    monkeypatch.setenv(auth.ENV_PASSWORD, "env-pw")
    assert auth.lookup("reg.example:5000").username == "env-user"


class _TokenRegistry(http.server.BaseHTTPRequestHandler):
    """A registry that wants a Bearer token from its own /token endpoint (which wants Basic)."""

    seen: list[tuple[str, str, str]] = []

    def do_GET(self):
        self._route()

    def do_HEAD(self):
        self._route()

    def _route(self):
        h = self.headers.get("Authorization", "")
        type(self).seen.append((self.command, self.path, h.split(" ")[0]))
        if self.path.startswith("/token"):
            ok = h == "Basic " + base64.b64encode(b"carol:pw").decode()
            assert "scope=repository%3Ateam%2Fw%3Apull%2Cpush" in self.path
            return self._send(200 if ok else 401, {"token": "tok-123"} if ok else {})
        if h != "Bearer tok-123":
            realm = f"http://127.0.0.1:{self.server.server_port}/token"
            return self._send(
                401,
                {"errors": [{"code": "UNAUTHORIZED"}]},
                {"WWW-Authenticate": f'Bearer realm="{realm}",service="test"'},
            )
        return self._send(404, {"errors": [{"code": "BLOB_UNKNOWN"}]})

    def _send(self, code, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def log_message(self, *a):
        pass


def test_bearer_token_flow():
    _TokenRegistry.seen = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _TokenRegistry)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        ref = parse_reference(f"127.0.0.1:{srv.server_port}/team/w")
        creds = auth.Credentials("carol", "pw", "test")
        with RegistryClient(ref, credentials=creds, retry=RegistryRetry(attempts=1)) as c:
            assert c.blob_exists("sha256:" + "b" * 64) is False
            assert c.blob_exists("sha256:" + "c" * 64) is False  # token reused
        kinds = [(m, p.split("?")[0].rsplit("/", 1)[-1][:6], a) for m, p, a in _TokenRegistry.seen]
        assert kinds == [
            ("HEAD", "sha256", ""),
            ("GET", "token", "Basic"),
            ("HEAD", "sha256", "Bearer"),
            ("HEAD", "sha256", "Bearer"),
        ]
    finally:
        srv.shutdown()
        srv.server_close()
