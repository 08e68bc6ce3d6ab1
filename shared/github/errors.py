"""The GitHub clients' errors (every message names the repository, and the file path or
commit):

    GitHubError
    ├── GitHubUnavailable   timeout, connection error, 408, 429, 5xx or a rate-limit 403
    │                       (`shared.retry`, `github_rate_limits`), too little time left
    │                       before a deadline, or the caller's ownership lost: worth a retry
    └── GitHubRejected      any other 4xx (missing file, bad credentials) or input we
                            refuse to send: a retry will not help

`OwnershipLost` (a `GitHubUnavailable`) is in `transport.py`, beside `Ownership`.
"""

from __future__ import annotations

from shared.errors import HookledgerError, PermanentError, TransientError


class GitHubError(HookledgerError):
    """Base of the GitHub client's errors; `status` is GitHub's HTTP answer, when there was
    one (None for a timeout, a connection error, or input refused before sending)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubUnavailable(GitHubError, TransientError):
    """Transient: a retry may succeed; `retry_after_s` is the wait GitHub asked for
    (`retry-after`, or until a primary rate limit resets), None when it asked none."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.retry_after_s = retry_after_s


class GitHubRejected(GitHubError, PermanentError):
    """Permanent: GitHub answered a 4xx that will not change, or the input was refused."""
