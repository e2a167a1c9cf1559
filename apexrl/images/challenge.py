"""Registry auth challenges, answered one way for both HTTP stacks.

A registry that wants credentials answers 401 with `WWW-Authenticate`: `Basic` (send
the credentials) or `Bearer realm=...,service=...,scope=...` (ask the token service at
the realm, with the credentials as Basic when there are any, for a token). The full
client (`RegistryClient`, httpx, with retries and classified errors) and the light
probe (`registry_probe.probe_manifest_digests`, the standard library, which gives up on anything
unusual) differ only in how they send the token request; what a challenge asks and
what answers it is here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apexrl.images.auth import Credentials

# get_token(realm, query, headers) -> the token service's JSON reply, or None
TokenRequest = Callable[[str, dict[str, str], dict[str, str]], Any]


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower case: "basic", "bearer", or another the registry named
    params: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, header: str) -> Challenge:
        scheme, _, rest = header.partition(" ")
        return cls(scheme.lower(), dict(re.findall(r'(\w+)="([^"]*)"', rest)))

    @property
    def realm(self) -> str | None:
        return self.params.get("realm") or None

    def token_query(self, repository: str, actions: str) -> dict[str, str]:
        """The token request's query: the service, and the scope the registry named (else
        the repository with `actions`)."""
        return {
            "service": self.params.get("service", ""),
            "scope": self.params.get("scope") or f"repository:{repository}:{actions}",
        }


def authorization(
    challenge: Challenge,
    creds: Credentials | None,
    *,
    repository: str,
    actions: str,
    get_token: TokenRequest,
) -> str | None:
    """The Authorization value that answers `challenge`: Basic from the credentials, or
    a Bearer token from the realm's token service. None when it cannot be answered (Basic
    without credentials, a Bearer without realm, another scheme, a reply without a token)."""
    if challenge.scheme == "basic":
        return creds.basic() if creds else None
    if challenge.scheme != "bearer" or not challenge.realm:
        return None
    headers = {"Authorization": creds.basic()} if creds else {}
    reply = get_token(challenge.realm, challenge.token_query(repository, actions), headers)
    token = (reply.get("token") or reply.get("access_token")) if isinstance(reply, dict) else None
    return f"Bearer {token}" if token else None
