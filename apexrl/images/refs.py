"""Image references (`host[:port]/repo[:tag][@digest]`) and digests."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from apexrl.errors import UsageError

# sends a reference's registry API calls to another base URL (CLI --registry-endpoint)
ENV_ENDPOINT = "APEXRL_REGISTRY_ENDPOINT"

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_REPO_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_ECR_HOST = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_digest(value: str, what: str = "digest") -> str:
    if not _DIGEST.match(value):
        raise UsageError(f"{what} {value!r} is not a sha256 digest (sha256:<64 hex>)")
    return value


def is_digest(value: str) -> bool:
    return bool(_DIGEST.match(value))


@dataclass(frozen=True)
class Reference:
    """A parsed image reference. `registry` is the host as written (docker.io for
    Docker Hub); `repository` is the path; `tag` and/or `digest` may be set."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def ecr(self) -> tuple[str, str] | None:
        """(account, region) when this is an ECR private registry reference."""
        m = _ECR_HOST.match(self.registry)
        return (m["account"], m["region"]) if m else None

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def name(self) -> str:
        """`registry/repository` without tag or digest."""
        return f"{self.registry}/{self.repository}"

    def with_tag(self, tag: str) -> Reference:
        return Reference(self.registry, self.repository, check_tag(tag), None)

    def with_digest(self, digest: str) -> Reference:
        return Reference(self.registry, self.repository, None, digest)

    def __str__(self) -> str:
        s = self.name
        if self.tag:
            s += f":{self.tag}"
        if self.digest:
            s += f"@{self.digest}"
        return s


def check_tag(tag: str) -> str:
    if not _TAG.match(tag):
        raise UsageError(
            f"tag {tag!r} is not valid",
            hint="tags are up to 128 of [A-Za-z0-9_.-] and do not start with '.' or '-'",
        )
    return tag


def default_scheme(host: str) -> str:
    """Loopback registries speak plain HTTP (like Docker's localhost rule); others HTTPS.
    APEXRL_REGISTRY_PLAIN_HTTP=1 forces HTTP for every host."""
    if os.environ.get("APEXRL_REGISTRY_PLAIN_HTTP", "").lower() in ("1", "true", "yes"):
        return "http"
    hostname = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0][1:]
    if hostname in ("localhost", "127.0.0.1", "::1") or hostname.startswith("127."):
        return "http"
    return "https"


def parse_reference(text: str, *, require_repo_only: bool = False) -> Reference:
    """Parse `[host[:port]/]repo[/more][:tag][@sha256:...]`.

    A first component without '.', ':' and not 'localhost' is a Docker Hub path
    (`python:3.12-slim` is `docker.io/library/python:3.12-slim`).
    """
    raw = text.strip()
    if not raw or any(c.isspace() for c in raw):
        raise UsageError(f"image reference {text!r} is empty or contains spaces")
    for scheme in ("https://", "http://", "docker://"):
        if raw.startswith(scheme):
            raw = raw[len(scheme) :]
    digest = None
    if "@" in raw:
        raw, digest = raw.split("@", 1)
        check_digest(digest, f"digest in reference {text!r}")
    tag = None
    last = raw.rsplit("/", 1)[-1]
    if ":" in last:
        raw, tag = raw.rsplit(":", 1)
        check_tag(tag)
    parts = raw.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry, repo_parts = parts[0], parts[1:]
    else:
        registry, repo_parts = DOCKER_HUB, parts
        if len(repo_parts) == 1:
            repo_parts = ["library", *repo_parts]
    for comp in repo_parts:
        if not _REPO_COMPONENT.match(comp):
            raise UsageError(
                f"image reference {text!r}: repository component {comp!r} is not valid",
                hint="repository names are lowercase letters, digits and separators . _ -",
            )
    if require_repo_only and (tag or digest):
        raise UsageError(
            f"{text!r} names a tag or digest; give REGISTRY/REPO only",
            hint="set the tag with --tag",
        )
    return Reference(registry, "/".join(repo_parts), tag, digest)
