"""What a GitHub event is about: its App installation, its repository, its issue or pull.

Read from the payload as GitHub documents every webhook ("Webhook events and payloads":
`installation.id` on an App's deliveries, `repository.full_name`, `issue.number`,
`pull_request.number`). A handler's GitHub calls default to it (`HandlerContext.for_event`),
and the operations it submits keep it in their context (`SUBJECT_FIELD`), so their
outbox deliverers get it too, without the app carrying it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The context field an operation submitted for an event keeps the event's subject in.
SUBJECT_FIELD = "subject"


@dataclass(frozen=True)
class Subject:
    """The installation, repository ("owner/name") and issue or pull number of an event;
    None for what it does not name (a Gemini event names none)."""

    installation_id: int | None = None
    repository: str | None = None
    number: int | None = None

    @classmethod
    def of_payload(cls, payload: Any) -> Subject:
        if not isinstance(payload, Mapping):
            return cls()
        installation = _field(payload, "installation", "id")
        repository = _field(payload, "repository", "full_name")
        number = _field(payload, "issue", "number") or _field(payload, "pull_request", "number")
        if number is None and isinstance(payload.get("number"), int):
            number = payload["number"]  # e.g. a pull_request event's top-level `number`
        return cls(
            installation if isinstance(installation, int) else None,
            repository if isinstance(repository, str) and "/" in repository else None,
            number if isinstance(number, int) and not isinstance(number, bool) else None,
        )

    @classmethod
    def of_stored(cls, stored: Any) -> Subject:
        """The subject as `stored()` wrote it (an operation's context, an outbox item)."""
        if not isinstance(stored, Mapping):
            return cls()
        installation, number = stored.get("installation_id"), stored.get("number")
        repository = stored.get("repository")
        return cls(
            installation if isinstance(installation, int) else None,
            repository if isinstance(repository, str) else None,
            number if isinstance(number, int) else None,
        )

    def stored(self) -> dict[str, Any]:
        """The fields it names, for a Firestore document ({} when it names none)."""
        fields = {
            "installation_id": self.installation_id,
            "repository": self.repository,
            "number": self.number,
        }
        return {name: value for name, value in fields.items() if value is not None}

    def params(self) -> dict[str, Any]:
        """Default path parameters of GitHub's operations: owner, repo, issue_number and
        pull_number (an issue's number is also its pull request's, as on GitHub)."""
        params: dict[str, Any] = {}
        if self.repository is not None:
            params["owner"], _, params["repo"] = self.repository.partition("/")
        if self.number is not None:
            params["issue_number"] = params["pull_number"] = self.number
        return params

    def __bool__(self) -> bool:
        return bool(self.stored())


def _field(payload: Mapping[str, Any], outer: str, inner: str) -> Any:
    value = payload.get(outer)
    return value.get(inner) if isinstance(value, Mapping) else None
