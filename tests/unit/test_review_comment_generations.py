"""The review comment follows the push's current generation (docs/architecture.md, "Re-run"):
only the current operation's item publishes, and one whose write raced a re-run becoming
current publishes again from the ledger, so the comment never keeps the older review."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from apps.review import comments
from shared.errors import PermanentError
from shared.github import PublishResult
from shared.ledger import Operation, OutboxItem, Submission

REPO, SHA = "octo/docs", "abc123"
PUSH_TAG = "hookledger:review:octo/docs@abc123"
FIRST, SECOND, THIRD = "batches/first", "batches/second", "batches/third"


def operation(name: str) -> Operation:
    return Operation(
        name=name,
        doc_id=name.replace("/", "_"),
        kind="github-review",
        status="succeeded",
        submitted_at=datetime(2026, 12, 1, tzinfo=UTC),
        attempts=0,
        next_check_at=None,
        writeback_done=False,
        context={"repo": REPO, "sha": SHA},
        submission=PUSH_TAG,
    )


@dataclass
class Ledger:
    """The reads the deliverer makes: operations, the push's submission, its reviews."""

    current: str
    review: str = "first look"

    @property
    def operations(self) -> Any:
        return SimpleNamespace(get=operation)

    @property
    def submissions(self) -> Any:
        def get(tag: str) -> Submission:
            assert tag == PUSH_TAG
            return Submission(PUSH_TAG, FIRST, None, None, current=self.current)

        return SimpleNamespace(get=get)

    @property
    def results(self) -> Any:
        return SimpleNamespace(
            find=lambda collection, *args, **equals: [{"path": "docs/a.md", "text": self.review}]
        )


@dataclass
class Comments:
    """Records each publish's body; `during` runs inside the n-th publish (a re-run
    becoming current while it writes)."""

    during: dict[int, Any] = field(default_factory=dict)
    bodies: list[str] = field(default_factory=list)

    def publish_once(self, repo: str, sha: str, marker: str, body: str, **_: Any) -> Any:
        self.bodies.append(body)
        self.during.get(len(self.bodies), lambda: None)()
        return PublishResult(7, created=len(self.bodies) == 1)


def deliver(name: str, ledger: Ledger, published: Comments) -> None:
    item = OutboxItem(name, 1, f"{name}:1", comments.item(REPO, SHA, name))
    comments.publish_reviews(item, SimpleNamespace(ledger=ledger, comments=published))


def test_the_current_generation_publishes_once() -> None:
    published = Comments()
    deliver(SECOND, Ledger(current=SECOND, review="second look"), published)
    [body] = published.bodies
    assert "second look" in body


def test_an_older_generations_item_writes_nothing() -> None:
    published = Comments()
    deliver(FIRST, Ledger(current=SECOND, review="second look"), published)
    assert published.bodies == []


def test_a_rerun_current_during_the_write_is_published_again_from_the_ledger() -> None:
    ledger = Ledger(current=FIRST)

    def rerun_settles() -> None:  # the re-run's own comment went out before our write landed
        ledger.current, ledger.review = SECOND, "second look"

    published = Comments(during={1: rerun_settles})
    deliver(FIRST, ledger, published)

    assert ["first look" in b for b in published.bodies] == [True, False]
    assert "second look" in published.bodies[-1]


def test_a_generation_that_keeps_changing_stops_after_a_bound() -> None:
    ledger = Ledger(current=FIRST)
    names = iter([SECOND, THIRD] * comments.MAX_GENERATIONS)

    def another_rerun() -> None:
        ledger.current = next(names)

    published = Comments(during=dict.fromkeys(range(1, 20), another_rerun))
    deliver(FIRST, ledger, published)
    assert len(published.bodies) == comments.MAX_GENERATIONS


def test_an_item_whose_operation_is_not_recorded_is_given_up() -> None:
    ledger = SimpleNamespace(operations=SimpleNamespace(get=lambda name: None))
    item = OutboxItem(FIRST, 1, "k", comments.item(REPO, SHA, FIRST))
    with pytest.raises(PermanentError, match="not recorded"):
        comments.publish_reviews(item, SimpleNamespace(ledger=ledger, comments=Comments()))
