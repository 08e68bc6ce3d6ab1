"""What GitHub's `installation` and `installation_repositories` events say, and which
installation a push came from. Pure: no I/O.

The payloads as GitHub documents them ("Webhook events and payloads",
https://docs.github.com/en/webhooks/webhook-events-and-payloads#installation and
#installation_repositories; GitHub's example payloads from octokit/webhooks are in
tests/fixtures/github/):

- `installation`, `action` one of created, deleted, suspend, unsuspend,
  new_permissions_accepted: `installation` {`id`, `account.login`, `repository_selection`
  (all | selected), `suspended_at` (null unless suspended), `updated_at`, …} and, on
  created, deleted and new_permissions_accepted, `repositories` [{`full_name`, …}]: the
  repositories the installation can access;
- `installation_repositories`, `action` added or removed: the same `installation`, the
  new `repository_selection`, `repositories_added` and `repositories_removed`.

Every App webhook, a push included, carries `installation.id`; a push through a personal
token's hook has no `installation`. `installation.updated_at` is Unix seconds in some of
GitHub's payloads and RFC 3339 text in others (both in its own examples): either parses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

INSTALLATION = "installation"
INSTALLATION_REPOSITORIES = "installation_repositories"
# The actions each event documents; any other is answered `ignored`.
INSTALLATION_ACTIONS = frozenset(
    {"created", "deleted", "suspend", "unsuspend", "new_permissions_accepted"}
)
REPOSITORY_ACTIONS = frozenset({"added", "removed"})
SELECTIONS = frozenset({"all", "selected"})


@dataclass(frozen=True)
class InstallationEvent:
    """One event's facts (the ledger's `InstallationFacts`).

    `suspended` is read from the installation's `suspended_at` on an `installation` event
    and None on an `installation_repositories` one (it says nothing of the status);
    `repositories` is the full list an `installation` event carries, None when it carries
    none; `added` / `removed` are an `installation_repositories` event's changes.
    """

    installation_id: int
    action: str
    account: str | None
    deleted: bool
    suspended: bool | None
    repository_selection: str | None
    repositories: tuple[str, ...] | None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    updated_at: datetime | None = None


def installation_id(payload: Any) -> int | None:
    """The `installation.id` of an App webhook (a push); None without one (a personal
    token's hook) or when it is not a positive integer."""
    installation = payload.get("installation") if isinstance(payload, Mapping) else None
    value = installation.get("id") if isinstance(installation, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def parse_installation_event(event: str, payload: Any) -> InstallationEvent | None:
    """The facts of an `installation` / `installation_repositories` payload; None for an
    action neither documents. ValueError names what is missing or malformed."""
    if not isinstance(payload, Mapping):
        raise ValueError(f"{event} payload is not an object")
    if event not in (INSTALLATION, INSTALLATION_REPOSITORIES):
        raise ValueError(f"{event} is not an installation event")
    action = payload.get("action")
    if action not in (INSTALLATION_ACTIONS if event == INSTALLATION else REPOSITORY_ACTIONS):
        return None
    installation = payload.get("installation")
    if not isinstance(installation, Mapping):
        raise ValueError(f"{event}.{action} payload has no installation")
    number = installation_id(payload)
    if number is None:
        raise ValueError(f"{event}.{action} payload has no installation.id")
    account = installation.get("account")
    login = account.get("login") if isinstance(account, Mapping) else None
    selection = (
        payload.get("repository_selection") if event == INSTALLATION_REPOSITORIES else None
    ) or installation.get("repository_selection")
    common = {
        "installation_id": number,
        "action": action,
        "account": login if isinstance(login, str) and login else None,
        "repository_selection": selection if selection in SELECTIONS else None,
        "updated_at": _time(installation.get("updated_at")),
    }
    if event == INSTALLATION:
        listed = payload.get("repositories")
        return InstallationEvent(
            **common,
            deleted=action == "deleted",
            suspended=installation.get("suspended_at") is not None,
            repositories=_names(listed, "repositories") if listed is not None else None,
        )
    return InstallationEvent(
        **common,
        deleted=False,
        suspended=None,
        repositories=None,
        added=_names(payload.get("repositories_added") or [], "repositories_added"),
        removed=_names(payload.get("repositories_removed") or [], "repositories_removed"),
    )


def _names(repositories: Any, field: str) -> tuple[str, ...]:
    """The `full_name` of each repository object, in order, without repeats."""
    if not isinstance(repositories, list):
        raise ValueError(f"{field} is not a list")
    names: dict[str, None] = {}
    for repository in repositories:
        name = repository.get("full_name") if isinstance(repository, Mapping) else None
        if not isinstance(name, str) or name.count("/") != 1:
            raise ValueError(f"{field} has an entry without an owner/name full_name")
        names[name] = None
    return tuple(names)


def _time(value: Any) -> datetime | None:
    """Unix seconds or RFC 3339 text as an aware datetime; None when absent or unreadable
    (the ledger then orders the event by when it was received)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return None
