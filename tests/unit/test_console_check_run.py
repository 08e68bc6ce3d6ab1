"""The operation page's check run (hookledger/console/check_run.py): which run the outbox
names, and what the page says when GitHub answers, refuses, or has no App here."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from hookledger.console.check_run import view
from shared.github import GitHubUnavailable
from shared.github.checks import CheckRun
from shared.ledger import Operation, OutboxItem

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PAYLOAD = {
    "kind": "github-check-run",
    "role": "start",
    "repo": "o/r",
    "sha": "abc",
    "external_id": "sub-1",
    "installation_id": 7,
}
RUN = CheckRun(7001, "hookledger review", "abc", "sub-1", "completed", "success", 3, "https://x/1")


def _operation(*payloads: Any) -> Operation:
    op = Operation(
        name="batches/a",
        doc_id="a",
        kind="github-review",
        status="succeeded",
        submitted_at=T0,
        attempts=0,
        next_check_at=None,
        writeback_done=True,
        context={"sha": "abc"},
    )
    items = tuple(
        OutboxItem(operation=op.name, index=i, idempotency_key=f"k{i}", payload=p)
        for i, p in enumerate(payloads)
    )
    return dataclasses.replace(op, outbox=items)


def _refuses(*_: Any) -> CheckRun:
    raise GitHubUnavailable("o/r@abc: check runs: timed out")


@pytest.mark.parametrize(
    ("name", "find", "run", "error"),
    [
        ("GitHub shows the run", lambda *_: RUN, RUN, None),
        ("GitHub has none yet", lambda *_: None, None, "not on GitHub (yet)"),
        ("GitHub does not answer", _refuses, None, "GitHub did not answer: o/r@abc"),
        ("no App configured", None, None, "no GitHub App configured here"),
    ],
)
def test_the_page_shows_the_run_or_why_not(name: str, find: Any, run: Any, error: Any) -> None:
    comment = {"kind": "github-comment", "repo": "o/r"}
    shown = view(_operation(comment, PAYLOAD), find)
    assert shown is not None, name
    assert (shown.repo, shown.sha, shown.external_id) == ("o/r", "abc", "sub-1"), name
    assert shown.run == run, name
    assert (shown.error or "").startswith(error or ""), name
    assert (shown.error is None) == (error is None), name


def test_an_operation_without_a_check_run_item_shows_no_section() -> None:
    asked: list[Any] = []
    assert view(_operation({"kind": "github-comment"}), lambda *a: asked.append(a)) is None
    assert asked == []  # GitHub is not even asked


def test_the_run_is_asked_for_by_the_items_repo_sha_external_id_and_installation() -> None:
    asked: list[Any] = []
    view(_operation(PAYLOAD), lambda *a: asked.append(a))
    assert asked == [("o/r", "abc", "sub-1", 7)]
