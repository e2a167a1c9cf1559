"""The one list of secrets apexrl knows of.

Everything that forwards environment variables (task.toml verifier env, Ray
runtime env, Modal secrets) and everything that redacts (logs, published
files) reads this list. Values are only ever read from the environment.
"""

from __future__ import annotations

import os

AWS_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
MODAL_KEYS = ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")
HF_KEYS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
JUDGE_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY")
WORLD_KEYS = ("FMP_API_KEY",)  # data APIs some worlds' tools call
REGISTRY_KEYS = ("APEXRL_REGISTRY_PASSWORD",)  # `image push` to a non-ECR registry

SECRET_ENV_KEYS: tuple[str, ...] = (
    AWS_KEYS + MODAL_KEYS + HF_KEYS + JUDGE_KEYS + WORLD_KEYS + REGISTRY_KEYS
)


def present(keys: tuple[str, ...] | list[str]) -> dict[str, bool]:
    """Which of `keys` are set (non-empty) in the environment. Never returns values."""
    return {k: bool(os.environ.get(k)) for k in keys}


def secret_values() -> list[str]:
    """Values of known secrets currently set, longest first (for redaction)."""
    values = {os.environ[k] for k in SECRET_ENV_KEYS if os.environ.get(k)}
    return sorted((v for v in values if len(v) >= 6), key=len, reverse=True)
