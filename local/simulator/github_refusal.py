"""The answer GitHub gives instead of the resource (400, 401, 403, 404, 422…): one
exception the GitHub routes raise; the GitHub API blueprint (`github_routes.py`) answers
it with its status, body and headers.
"""

from __future__ import annotations

REST_DOCS = "https://docs.github.com/rest"


class GitHubRefusal(Exception):
    """An answer GitHub gives instead of the resource: `status`, its JSON body, headers."""

    def __init__(
        self,
        status: int,
        message: str,
        documentation_url: str = REST_DOCS,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}
        self.body = {
            "message": message,
            "documentation_url": documentation_url,
            "status": str(status),
        }
