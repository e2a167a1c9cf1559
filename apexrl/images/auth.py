"""Registry credentials: environment, Docker config (auths, credsStore, credHelpers),
and ECR (boto3 `get_authorization_token`). Values are never logged."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from apexrl.errors import AuthError, RemoteError, UsageError

ENV_USER = "APEXRL_REGISTRY_USERNAME"
ENV_PASSWORD = "APEXRL_REGISTRY_PASSWORD"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str
    source: str  # where they came from (for messages; never the values)

    def __repr__(self) -> str:  # keep secrets out of tracebacks and logs
        return f"Credentials(username={self.username!r}, source={self.source!r})"

    def basic(self) -> str:
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode()


def docker_config_path() -> Path:
    root = os.environ.get("DOCKER_CONFIG")
    return Path(root) / "config.json" if root else Path.home() / ".docker" / "config.json"


def _host_keys(host: str) -> list[str]:
    keys = [host, f"https://{host}", f"http://{host}", f"https://{host}/v1/", f"https://{host}/v2/"]
    if host in ("docker.io", "registry-1.docker.io", "index.docker.io"):
        keys += ["https://index.docker.io/v1/", "index.docker.io", "docker.io"]
    return keys


def from_environment() -> Credentials | None:
    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    if user and password:
        return Credentials(user, password, f"${ENV_USER}/${ENV_PASSWORD}")
    return None


def from_docker_config(host: str, config: Path | None = None) -> Credentials | None:
    path = config or docker_config_path()
    if not path.is_file():
        return None
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise AuthError(
            f"{path}: unreadable Docker config ({e})", hint="fix or move the file"
        ) from None
    helper = (cfg.get("credHelpers") or {}).get(host) or cfg.get("credsStore")
    auths = cfg.get("auths") or {}
    for key in _host_keys(host):
        entry = auths.get(key)
        if not entry:
            continue
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            except ValueError:
                raise AuthError(
                    f"{path}: auths[{key!r}].auth is not base64 user:password"
                ) from None
            return Credentials(user, password, str(path))
        if entry.get("username") and entry.get("password"):
            return Credentials(entry["username"], entry["password"], str(path))
    if helper:
        return _from_helper(helper, host)
    return None


def _from_helper(helper: str, host: str) -> Credentials | None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", helper):
        raise AuthError(f"Docker config names an odd credential helper {helper!r}")
    exe = f"docker-credential-{helper}"
    try:
        proc = subprocess.run(
            [exe, "get"], input=host.encode(), capture_output=True, timeout=30, check=False
        )
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        raise AuthError(f"{exe} get timed out after 30 s") from None
    if proc.returncode != 0:
        return None  # "credentials not found" is a normal answer
    try:
        data = json.loads(proc.stdout)
        return Credentials(data["Username"], data["Secret"], exe)
    except (ValueError, KeyError):
        raise AuthError(f"{exe} get answered something that is not credentials JSON") from None


def lookup(host: str) -> Credentials | None:
    """Environment first, then the Docker config."""
    return from_environment() or from_docker_config(host)


# --- ECR -----------------------------------------------------------------------------


def _ecr_client(region: str):
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError(
            "pushing to ECR needs boto3, which is not installed",
            hint="pip install 'apexrl[aws]'",
        ) from None

    cfg = Config(
        connect_timeout=10,
        read_timeout=30,
        retries={"max_attempts": 5, "mode": "standard"},
    )
    # boto3 honours AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_ECR itself.
    return boto3.client("ecr", region_name=region, config=cfg)


def _boto_error(e: Exception, what: str) -> Exception:
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    if isinstance(e, NoCredentialsError | PartialCredentialsError):
        return AuthError(
            f"{what}: no AWS credentials",
            hint="set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE",
        )
    if isinstance(e, ClientError):
        code = e.response.get("Error", {}).get("Code", "")
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        msg = e.response.get("Error", {}).get("Message", str(e))
        if code in ("AccessDeniedException", "UnrecognizedClientException") or status in (401, 403):
            return AuthError(
                f"{what}: {code}: {msg}", hint="check the AWS credentials and IAM policy"
            )
        return RemoteError(f"{what}: {code}: {msg}", retryable=status >= 500 or status == 429)
    if isinstance(e, EndpointConnectionError):
        return RemoteError(
            f"{what}: {e}", retryable=True, hint="check AWS_ENDPOINT_URL and the network"
        )
    return RemoteError(f"{what}: {type(e).__name__}: {e}", retryable=False)


def ecr_credentials(account: str, region: str) -> Credentials:
    """Token from `get_authorization_token` (base64 `AWS:<password>`, valid 12 h)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        resp = _ecr_client(region).get_authorization_token(registryIds=[account])
    except (BotoCoreError, ClientError) as e:
        raise _boto_error(e, f"ECR get_authorization_token ({account}, {region})") from None
    data = (resp.get("authorizationData") or [{}])[0]
    try:
        user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    except (KeyError, ValueError):
        raise AuthError(
            "ECR returned an authorization token that is not base64 AWS:<password>"
        ) from None
    return Credentials(user, password, "ECR get_authorization_token")


def ecr_ensure_repository(account: str, region: str, repository: str) -> bool:
    """Create the repository when it is missing. Returns True when it was created."""
    from botocore.exceptions import BotoCoreError, ClientError

    client = _ecr_client(region)
    try:
        client.describe_repositories(registryId=account, repositoryNames=[repository])
        return False
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") != "RepositoryNotFoundException":
            raise _boto_error(e, f"ECR describe_repositories {repository}") from None
    except BotoCoreError as e:
        raise _boto_error(e, f"ECR describe_repositories {repository}") from None
    try:
        client.create_repository(registryId=account, repositoryName=repository)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "RepositoryAlreadyExistsException":
            return False  # created concurrently
        raise _boto_error(e, f"ECR create_repository {repository}") from None
    except BotoCoreError as e:
        raise _boto_error(e, f"ECR create_repository {repository}") from None
    return True
