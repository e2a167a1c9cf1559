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
# where a Vertex AI judge runs: settings, not secrets (passed on, never redacted)
VERTEX_ENV = ("GOOGLE_APPLICATION_CREDENTIALS", "VERTEXAI_PROJECT", "VERTEXAI_LOCATION")
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


# Credential shapes redacted wherever they appear, set in the environment or not
# (published files, logs). (name, regex); the whole match is replaced, or only the
# group named `v` when the pattern has one (the key name stays readable). No word
# boundary on the left: a token glued to a prefix (`MYKEY_hf_...`) is still a token;
# `GLUED_NEEDS_MIXED_CASE` keeps words out (below).
CREDENTIAL_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----[\s\S]*?"
        r"-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----",
    ),
    (
        "aws-access-key-id",
        r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Za-z0-9])",
    ),
    (
        "aws-secret-access-key",
        r"(?i)(?<![A-Za-z0-9])aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?"
        r"(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    ),
    ("hf-token", r"hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9])"),
    ("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    (
        "github-token",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})(?![A-Za-z0-9])",
    ),
    ("google-api-key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    ("slack-token", r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("bearer-token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{20,}"),
    ("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
)

# A match of these glued on its left to a letter, digit or '_' counts only when it
# looks random: a run of 16 or more letters and digits mixing upper and lower case (and,
# except Hub tokens, which are letters only, digits in two places or more).
# `risk-adjusted-return-on-capital` holds `sk-` plus 20 characters, `task-<uuid>` and
# `mask-ProjectPlan2024` too, and none is a key.
GLUED_NEEDS_MIXED_CASE = frozenset(
    ("hf-token", "anthropic-key", "openai-key", "github-token", "google-api-key", "slack-token",
     "jwt")
)  # fmt: skip
GLUED_NEEDS_DIGITS = GLUED_NEEDS_MIXED_CASE - {"hf-token"}
