"""Registry auth challenges (apexrl.images.challenge): what a `WWW-Authenticate` asks and
what answers it, the one rule the full client and the light probe share."""

from __future__ import annotations

import pytest

from apexrl.errors import AuthError
from apexrl.images.auth import Credentials
from apexrl.images.challenge import Challenge, authorization

CREDS = Credentials("alice", "s3cret", "test")


def answer(header: str, creds: Credentials | None, reply=None, actions: str = "pull,push"):
    asked: list[tuple] = []

    def get_token(realm, query, headers):
        asked.append((realm, query, headers))
        return reply

    got = authorization(
        Challenge.parse(header), creds, repository="w/r", actions=actions, get_token=get_token
    )
    return got, asked


def test_basic_sends_the_credentials_or_nothing():
    assert answer('Basic realm="x"', CREDS) == (CREDS.basic(), [])
    assert answer('Basic realm="x"', None) == (None, [])


def test_bearer_asks_the_realm_with_the_registrys_scope_else_the_repository():
    header = 'Bearer realm="https://auth.example/token",service="reg",scope="repository:w/r:pull"'
    got, asked = answer(header, CREDS, {"token": "t1"})
    assert got == "Bearer t1"
    assert asked == [
        (
            "https://auth.example/token",
            {"service": "reg", "scope": "repository:w/r:pull"},
            {"Authorization": CREDS.basic()},
        )
    ]
    got, asked = answer('bearer realm="https://a/t"', None, {"access_token": "t2"}, "pull")
    assert got == "Bearer t2"
    assert asked[0][1:] == ({"service": "", "scope": "repository:w/r:pull"}, {})


@pytest.mark.parametrize(
    ("header", "reply"),
    [
        ('Bearer realm="https://a/t"', {}),  # no token in the reply
        ('Bearer realm="https://a/t"', None),  # the probe's transport gave up
        ('Bearer realm="https://a/t"', ["token"]),  # not an object
        ('Bearer service="reg"', {"token": "t"}),  # no realm to ask
        ('Negotiate realm="x"', {"token": "t"}),  # a scheme registries do not use
        ("", {"token": "t"}),
    ],
)
def test_what_cannot_be_answered_is_none(header, reply):
    assert answer(header, CREDS, reply)[0] is None


def test_the_full_client_names_a_token_service_without_a_token(monkeypatch):
    """RegistryClient answers through the same rule and says why when it cannot."""
    from apexrl.images.refs import parse_reference
    from apexrl.images.registry_client import RegistryClient

    class Resp:
        headers = {"WWW-Authenticate": 'Bearer realm="https://auth.example/token"'}

    with RegistryClient(parse_reference("reg.example/w/r")) as c:
        monkeypatch.setattr(c, "_token_reply", lambda realm, query, headers: {"token": "t"})
        assert c._authenticate(Resp()) and c._auth == "Bearer t"
        monkeypatch.setattr(c, "_token_reply", lambda realm, query, headers: {})
        with pytest.raises(AuthError, match="answered without a token"):
            c._authenticate(Resp())
    with RegistryClient(parse_reference("reg.example/w/r")) as c:
        Resp.headers = {"WWW-Authenticate": 'Basic realm="x"'}
        with pytest.raises(AuthError, match="asks for credentials"):
            c._authenticate(Resp())
