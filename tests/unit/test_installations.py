"""GitHub App installation events: what GitHub's published payloads say (parsed from the
fixtures as published), and the ledger's rules for them (`merged`, `refusal`), pure."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.github.installations import (
    InstallationEvent,
    installation_id,
    parse_installation_event,
)
from shared.ledger.installations import installation_from, merged, order_of
from tests.ledger_parts import installation_event

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_bytes())


# ------------------------------------------------------------------ GitHub's payloads

# (name, event, fixture, expected facts) for each published example
PUBLISHED = [
    (
        "created: selected, with its repositories, Unix seconds",
        "installation",
        "installation-created.payload.json",
        dict(
            installation_id=957387,
            account="Codertocat",
            suspended=False,
            deleted=False,
            repository_selection="selected",
            repositories=("Codertocat/Hello-World",),
            updated_at=datetime(2019, 5, 15, 15, 19, 51, tzinfo=UTC),
        ),
    ),
    (
        "suspend: suspended_at set, RFC 3339 with an offset, no repositories",
        "installation",
        "installation-suspend.payload.json",
        dict(
            installation_id=16598467,
            suspended=True,
            repository_selection="all",
            repositories=None,
            updated_at=datetime(2021, 4, 29, 2, 32, 50, tzinfo=UTC),
        ),
    ),
    (
        "unsuspend: suspended_at null",
        "installation",
        "installation-unsuspend.payload.json",
        dict(installation_id=16598467, suspended=False, deleted=False),
    ),
    (
        "deleted",
        "installation",
        "installation-deleted.payload.json",
        dict(installation_id=2, account="octocat", deleted=True),
    ),
    (
        "new_permissions_accepted: its own selection and list",
        "installation",
        "installation-new_permissions_accepted.payload.json",
        dict(
            installation_id=957387,
            repository_selection="all",
            repositories=("Codertocat/Hello-World",),
        ),
    ),
    (
        "added: says nothing of the status",
        "installation_repositories",
        "installation_repositories-added.payload.json",
        dict(
            installation_id=957387,
            suspended=None,
            repository_selection="selected",
            repositories=None,
            added=("Codertocat/Space",),
            removed=(),
        ),
    ),
    (
        "removed",
        "installation_repositories",
        "installation_repositories-removed.payload.json",
        dict(installation_id=2, added=(), removed=("octocat/Hello-World",)),
    ),
]


@pytest.mark.parametrize(("name", "event", "name_of_fixture", "expected"), PUBLISHED)
def test_each_published_example_parses_to_its_facts(name, event, name_of_fixture, expected):
    facts = parse_installation_event(event, fixture(name_of_fixture))

    assert facts is not None, name
    assert {key: getattr(facts, key) for key in expected} == expected, name


def test_an_undocumented_action_is_not_recorded_and_a_malformed_payload_is_refused() -> None:
    payload = fixture("installation-created.payload.json")

    assert parse_installation_event("installation", {**payload, "action": "renamed"}) is None
    assert parse_installation_event("installation_repositories", payload) is None
    for broken, what in (
        ({**payload, "installation": {"account": {"login": "x"}}}, "installation.id"),
        ({**payload, "repositories": [{"name": "no-owner"}]}, "full_name"),
        ([], "not an object"),
    ):
        with pytest.raises(ValueError, match=what):
            parse_installation_event("installation", broken)


def test_a_push_names_its_installation_only_when_sent_to_an_app() -> None:
    assert installation_id(fixture_push("push-with-installation.payload.json")) == 1
    assert installation_id(fixture_push("push-payload.json")) is None
    assert installation_id({"installation": {"id": True}}) is None


def fixture_push(name: str) -> Any:
    return json.loads((FIXTURES / name).read_bytes())


# ------------------------------------------------------------------ the ledger's rules


def apply(stored: Any, event: InstallationEvent, seconds: float, delivery: str) -> Any:
    """`merged` as the ledger runs it: the event received at T0 + `seconds`."""
    doc = merged(stored, event, received_at=T0 + timedelta(seconds=seconds), delivery_id=delivery)
    return doc if doc is None else {**doc, "delivery_id": delivery}


def at(minute: int) -> datetime:
    return datetime(2021, 4, 29, 2, minute, tzinfo=UTC)


def created(**facts: Any) -> InstallationEvent:
    return installation_event(7, updated_at=at(0), **facts)


def delta(minute: int, added: tuple[str, ...] = (), removed: tuple[str, ...] = ()) -> Any:
    return replace(
        created(),
        action="added" if added else "removed",
        suspended=None,
        repositories=None,
        added=added,
        removed=removed,
        updated_at=at(minute),
    )


def status_event(minute: int, suspended: bool) -> InstallationEvent:
    return replace(
        created(),
        action="suspend" if suspended else "unsuspend",
        suspended=suspended,
        repositories=None,
        updated_at=at(minute),
    )


def test_the_order_sorts_by_payload_time_then_receipt_then_delivery() -> None:
    early, late = at(0), at(1)
    orders = [
        order_of(early, T0 + timedelta(seconds=9), "z"),
        order_of(late, T0, "a"),
        order_of(early, T0, "b"),
        order_of(early, T0, "a"),
    ]
    assert sorted(orders) == [orders[3], orders[2], orders[0], orders[1]]


def test_a_duplicate_and_an_older_event_change_nothing() -> None:
    doc = apply(None, created(), 0, "d-created")
    suspended = apply(doc, status_event(5, True), 1, "d-suspend")
    resumed = apply(suspended, status_event(9, False), 2, "d-unsuspend")

    assert apply(doc, created(), 0, "d-created") is None  # the same delivery again
    assert apply(resumed, status_event(5, True), 3, "d-suspend") is None  # late: t5 < t9
    assert installation_from(resumed).status == "active"


def test_on_equal_payload_times_the_later_received_wins() -> None:
    doc = apply(None, created(), 0, "d-created")
    suspended = apply(doc, status_event(0, True), 1, "d-suspend")

    assert installation_from(suspended).status == "suspended"
    assert apply(suspended, status_event(0, False), 0.5, "d-unsuspend") is None


def test_a_replay_of_an_applied_delivery_keeps_its_original_order() -> None:
    # GitHub's own examples: `created` and a later `added` carry the same updated_at.
    doc = apply(None, created(), 0, "d-created")
    doc = apply(doc, delta(0, added=("octo-org/site",)), 1, "d-added")
    later = doc

    # `hookledger deliveries replay d-created` seals a new received_at: still a no-op,
    # where a new receipt time would win the tie and drop octo-org/site again.
    assert apply(later, created(), 60, "d-created") is None
    assert installation_from(later).covered == ("octo-org/handbook", "octo-org/site")


def test_changes_to_different_repositories_commute_and_each_one_is_last_writer_wins() -> None:
    events = [
        (delta(2, added=("octo-org/wiki",)), "d-1"),
        (delta(3, added=("octo-org/site",)), "d-2"),
        (delta(4, removed=("octo-org/wiki",)), "d-3"),
    ]
    results = []
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        doc = apply(None, created(), 0, "d-0")
        for index in order:
            event, delivery = events[index]
            doc = apply(doc, event, index + 1, delivery) or doc
        results.append(installation_from(doc).covered)
    assert results == [("octo-org/handbook", "octo-org/site")] * 3


def test_a_full_list_newer_than_a_mark_unmarks_what_it_leaves_out() -> None:
    doc = apply(None, created(), 0, "d-0")
    later = replace(created(), repositories=("octo-org/site",), updated_at=at(5))
    doc = apply(doc, later, 1, "d-1")

    stored = installation_from(doc)
    assert stored.covered == ("octo-org/site",)
    assert stored.refusal("octo-org/handbook") == (
        "octo-org/handbook was removed from installation 7"
    )


def test_deleted_is_final_whatever_arrives_after() -> None:
    doc = apply(None, created(), 0, "d-0")
    gone = apply(doc, replace(created(), deleted=True, updated_at=at(1)), 1, "d-1")

    assert apply(gone, status_event(9, False), 2, "d-2") is None
    assert installation_from(gone).status == "deleted"


# (name, events, repo, expected refusal or None)
REFUSALS = [
    ("active, covered", [created()], "octo-org/handbook", None),
    ("repo names compare case-insensitively", [created()], "Octo-Org/Handbook", None),
    (
        "active, not in the complete list",
        [created()],
        "octo-org/other",
        "octo-org/other is not among the repositories installation 7 covers",
    ),
    (
        "suspended",
        [created(), status_event(1, True)],
        "octo-org/handbook",
        "installation 7 is suspended",
    ),
    (
        "unsuspended",
        [created(), status_event(1, True), status_event(2, False)],
        "octo-org/handbook",
        None,
    ),
    (
        "removed",
        [created(), delta(1, removed=("octo-org/handbook",))],
        "octo-org/handbook",
        "octo-org/handbook was removed from installation 7",
    ),
    ("all repositories", [created(repository_selection="all")], "octo-org/other", None),
    (
        "only deltas seen: an unnamed repository is let through",
        [delta(1, removed=("octo-org/old",))],
        "octo-org/other",
        None,
    ),
    (
        "deleted",
        [created(), replace(created(), deleted=True, updated_at=at(1))],
        "octo-org/handbook",
        "installation 7 was deleted",
    ),
]


@pytest.mark.parametrize(("name", "events", "repo", "expected"), REFUSALS)
def test_which_pushes_an_installation_refuses(name, events, repo, expected) -> None:
    doc = None
    for number, event in enumerate(events):
        doc = apply(doc, event, number, f"d-{number}") or doc

    assert installation_from(doc).refusal(repo) == expected, name
