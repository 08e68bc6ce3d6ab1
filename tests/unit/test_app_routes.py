"""`App.on`: GitHub events by name and action, one registered handler per event; every
app handler's context bound to its event (`HandlerContext.for_event`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from shared import api, handlers
from shared.config import Config
from shared.events.subject import Subject
from shared.handlers.context import ClientFactories, HandlerContext
from tests.memory_ledger import MemoryLedger


@pytest.fixture
def app() -> Iterator[api.App]:
    saved = handlers.snapshot()
    yield api.App(f"routes-{uuid.uuid4().hex[:8]}", module="tests.unit.test_app_routes")
    handlers.restore(saved)


def _event(payload: dict[str, Any], event_type: str = "issues") -> api.Event:
    body = json.dumps(payload).encode()
    return api.Event("github", event_type, "d-1", datetime(2026, 1, 1, tzinfo=UTC), body)


def _context() -> HandlerContext:
    ledger: Any = MemoryLedger(lambda: datetime(2026, 1, 1, tzinfo=UTC))
    return HandlerContext(Config(), ClientFactories.from_lookup(ledger, {}.__getitem__))


ISSUE = {
    "action": "opened",
    "issue": {"number": 7},
    "repository": {"full_name": "octo/hello"},
    "installation": {"id": 42},
}


def test_an_action_no_route_takes_is_refused_at_the_ingress(app: api.App) -> None:
    @app.on("issues.opened", "issues.reopened")
    def opened(event: api.Event, ctx: api.Context) -> api.Outcome:
        return api.Done("opened")

    assert handlers.refusal("github", "issues", {"action": "opened"}) is None
    assert handlers.refusal("github", "issues", {"action": "reopened"}) is None
    assert handlers.refusal("github", "issues", {"action": "closed"}) == (
        "issues.closed is not handled"
    )
    assert not handlers.handled("github", "pull_request")


def test_actions_of_one_event_route_to_their_functions(app: api.App) -> None:
    @app.on("issues.opened")
    def opened(event: api.Event, ctx: api.Context) -> api.Outcome:
        return api.Done(f"opened #{ctx.subject.number}")

    @app.on("issues.closed")
    def closed(event: api.Event, ctx: api.Context) -> api.Outcome:
        return api.Done("closed")

    [registration] = handlers.registrations("github", "issues")
    run = registration.fn
    assert run(_event(ISSUE), _context().for_app(app.name)) == api.Done("opened #7")
    assert run(_event({**ISSUE, "action": "closed"}), _context()) == api.Done("closed")
    ignored = run(_event({**ISSUE, "action": "edited"}), _context())
    assert ignored == api.Ignored("issues.edited is not handled")


def test_a_route_refusing_is_asked_after_its_action(app: api.App) -> None:
    @app.on("issues", refuses=lambda event, p: None if p.get("issue") else "no issue")
    def any_issue(event: api.Event, ctx: api.Context) -> api.Outcome:
        return api.Done("seen")

    assert handlers.refusal("github", "issues", {"action": "deleted"}) == "no issue"
    assert handlers.refusal("github", "issues", ISSUE) is None


def test_two_functions_for_one_action_is_an_error_naming_it(app: api.App) -> None:
    @app.on("issues.opened")
    def first(event: api.Event, ctx: api.Context) -> api.Outcome:
        return api.Done("1")

    with pytest.raises(api.AppError, match=r"routes 'issues\.opened' to two functions"):

        @app.on("issues.opened")
        def second(event: api.Event, ctx: api.Context) -> api.Outcome:
            return api.Done("2")

    with pytest.raises(api.AppError, match=r"is not an event or event\.action"):
        app.on("issues.")(first)


def test_a_handlers_context_is_bound_to_its_event(app: api.App) -> None:
    seen: list[Subject] = []

    @app.handler("github", "issue_comment")
    def comment(event: api.Event, ctx: api.Context) -> api.Outcome:
        seen.append(ctx.subject)
        return api.Done("ok")

    [registration] = handlers.registrations("github", "issue_comment")
    registration.fn(_event(ISSUE, "issue_comment"), _context())
    assert seen == [Subject(42, "octo/hello", 7)]


def test_a_subject_is_read_as_github_documents_its_payloads() -> None:
    pull = {"number": 3, "pull_request": {"number": 3}, "repository": {"full_name": "o/r"}}
    assert Subject.of_payload(pull) == Subject(None, "o/r", 3)
    assert Subject.of_payload({"repository": {"full_name": 5}}) == Subject()
    assert Subject.of_payload([1]) == Subject()
    subject = Subject(42, "octo/hello", 7)
    assert Subject.of_stored(subject.stored()) == subject
    assert subject.params() == {
        "owner": "octo",
        "repo": "hello",
        "issue_number": 7,
        "pull_number": 7,
    }
    gemini = api.Event("gemini", "batch.succeeded", "g", datetime(2026, 1, 1, tzinfo=UTC), b"{")
    assert gemini.subject == Subject() and not gemini.subject


def test_a_body_nested_deeper_than_json_reads_is_permanent_not_retried_for_ever() -> None:
    # The ingress takes bodies nested up to 1,024 levels (simdjson, orjson); json stops
    # sooner. Such a body is not JSON to a handler: a PermanentError (dead), never a
    # RecursionError that the worker would retry.
    deep = b'{"a": ' + b"[" * 1_020 + b"]" * 1_020 + b"}"
    event = api.Event("github", "push", "d-deep", datetime(2026, 1, 1, tzinfo=UTC), deep)
    with pytest.raises(api.PermanentError, match="d-deep: body is not JSON"):
        event.json()
    assert event.action is None and event.subject == Subject()
