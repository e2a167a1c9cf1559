"""Exit codes and the one exception type user-facing errors travel in."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CHECK_FAILED = 1  # validation failed, bad input data, TITO mismatch, oracle < 100%
    USAGE = 2  # wrong arguments, missing input path
    AUTH = 3  # missing or rejected credentials
    REMOTE = 4  # remote or transient failure after retries
    PARTIAL = 5  # some records failed, the rest were written


class ApexError(Exception):
    """An error meant for the user: a message, what to do, and an exit code.

    The CLI prints these without a traceback (unless --debug).
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        code: ExitCode = ExitCode.CHECK_FAILED,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(ApexError):
    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code=ExitCode.USAGE)

    @classmethod
    def unknown(cls, what: str, name: object, choices: Iterable[str]) -> UsageError:
        """A name no table knows (an engine, an environment, a profile), with the names
        it does know as the hint."""
        return cls(f"unknown {what} {name!r}", hint=f"choose one of: {', '.join(choices)}")


class BadRecordError(ApexError):
    """One input record is invalid; `where` names file/line/field."""

    def __init__(self, where: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{where}: {message}", hint=hint, code=ExitCode.CHECK_FAILED)
        self.where = where
        self.detail = message


class RemoteError(ApexError):
    """A remote call failed. `retryable` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code=ExitCode.REMOTE)
        self.retryable = retryable


class AuthError(ApexError):
    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code=ExitCode.AUTH)
