"""What apexrl reads from the host, one way each: numbers from environment variables
(limits and knobs), the bubblewrap program and the CA bundle (`ssl_context`).

`env_int`: unset or empty gives the default. A limit that can be lifted (`lift=True`,
the local sandbox's) reads "0", "off", "none" or "unlimited" as no limit (None); one
that cannot (the archive extractor's, which stand between apexrl and hostile data)
refuses them, as anything that is not a number is refused, naming the variable.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import Any

from apexrl.errors import ApexError

NO_LIMIT = ("0", "off", "none", "unlimited")
BWRAP_INSTALL = "Debian/Ubuntu: apt-get install bubblewrap"


def env_int(name: str, default: int | None, *, lift: bool) -> int | None:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in NO_LIMIT:
        if lift:
            return None
        raise ApexError(
            f"{name}={raw!r}: this limit cannot be lifted", hint="unset it or give a number"
        )
    try:
        return int(float(raw))
    except ValueError:
        raise ApexError(
            f"{name}={raw!r} is not a number", hint="unset it or give a number"
        ) from None


def find_bwrap(path: str | None = None) -> str | None:
    """bubblewrap on PATH (or on `path`, a PATH string), else None."""
    return shutil.which("bwrap", path=path)


@functools.cache
def ssl_context() -> Any:
    """One default SSL context per process (loading the CA bundle costs ~60 ms): the MCP
    clients of the agent and the gateway's readiness checks need one, even for http://."""
    import ssl

    return ssl.create_default_context()
