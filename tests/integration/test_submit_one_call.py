"""`ctx.submit`: one call for an exactly-once Gemini job (claim, create or join, release on
failure, register), against the Firestore emulator and the Gemini simulator (real
google-genai); and adoption from the claim's context for a kind with no `adopt`."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared import api, apps, handlers, kinds
from shared.config import Config
from shared.gemini import GeminiGateway, GeminiRefusedDeployment
from shared.handlers.context import ClientFactories, HandlerContext
from shared.ledger import Ledger
from shared.reconcile.adoption import register_orphan
from tests.unit.test_app_routes import ISSUE


@pytest.fixture(scope="module")
def labeller() -> Iterator[Any]:
    saved = handlers.snapshot()
    apps.load(["apps.labeller"])
    yield importlib.import_module("apps.labeller")
    handlers.restore(saved)


@pytest.fixture
def gateway(simulator: Any) -> GeminiGateway:
    return GeminiGateway(simulator.genai())


@pytest.fixture
def ledger(firestore_client: Any) -> Ledger:
    return Ledger(firestore_client, grace=timedelta(0))


@pytest.fixture
def ctx(ledger: Ledger, gateway: GeminiGateway, labeller: Any) -> HandlerContext:
    clients = ClientFactories.from_lookup(ledger, {"gemini": gateway}.__getitem__)
    return HandlerContext(Config(), clients).for_app("labeller")


def _event(delivery_id: str = "d-1", payload: dict[str, Any] = ISSUE) -> api.Event:
    issue = {**payload, "issue": {**payload["issue"], "title": "Crash on save", "body": "…"}}
    body = json.dumps(issue).encode()
    return api.Event("github", "issues", delivery_id, datetime.now(UTC), body)


def _tagged(simulator: Any, tag: str) -> list[dict[str, Any]]:
    return [b for b in simulator.control.batches() if b["display_name"] == tag]


def test_one_batch_however_often_the_event_runs(
    ctx: HandlerContext, ledger: Ledger, simulator: Any, labeller: Any
) -> None:
    first = labeller.label_issue(_event("d-1"), ctx.for_event(_event("d-1")))
    again = labeller.label_issue(_event("d-2"), ctx.for_event(_event("d-2")))
    tag = labeller.LABEL.make_tag("octo/hello#7")
    [batch] = _tagged(simulator, tag)
    assert isinstance(first, api.Submitted) and first.created
    assert first.operation == batch["name"]
    assert (again.created, again.operation) == (False, batch["name"])
    assert again.detail == f"already submitted as {batch['name']}"
    record = ledger.operations.get(batch["name"])
    assert record is not None and record.kind == "issue-label"
    # The core keeps the event's subject and the request keys beside the app's context.
    assert record.context["subject"] == {
        "installation_id": 42,
        "repository": "octo/hello",
        "number": 7,
    }
    assert record.context["keys"] == ["issue"]
    assert record.context["labels"] == ["bug", "feature", "question"]


def test_a_refused_create_gives_the_claim_back_and_the_next_run_creates(
    ctx: HandlerContext, simulator: Any, labeller: Any
) -> None:
    simulator.control.refuse_creates(status=403, count=1)
    event = _event("d-1")
    with pytest.raises(GeminiRefusedDeployment):
        labeller.label_issue(event, ctx.for_event(event))
    tag = labeller.LABEL.make_tag("octo/hello#7")
    assert _tagged(simulator, tag) == []
    # Not a stale claim waiting for its lease: the next attempt creates at once.
    retried = _event("d-1")
    done = labeller.label_issue(retried, ctx.for_event(retried))
    [batch] = _tagged(simulator, tag)
    assert done.created and done.operation == batch["name"]


def test_a_kind_that_shares_joins_its_group(
    ctx: HandlerContext, ledger: Ledger, simulator: Any
) -> None:
    shared_kind = api.OperationKind(
        "labeller-shared-probe",
        "labeller-shared-probe",
        sharing=lambda settings: api.Sharing(max_requests=2, window_s=3600),
    )
    kind = kinds.register(shared_kind, app="labeller")
    try:
        a, b = _event("d-a"), _event("d-b", {**ISSUE, "issue": {"number": 8}})
        with pytest.raises(api.Deferred, match=r"joined group .* as groups/"):
            ctx.for_event(a).submit(kind, "a", [("x", "1")], model="models/m")  # opened it
        second = ctx.for_event(b).submit(kind, "b", [("y", "2")], model="models/m")
        assert second.created and second.operation is not None
        assert second.operation.startswith("groups/")
        assert "sealed" in second.detail or "batches/" in second.detail, second.detail
        [batch] = [x for x in simulator.control.batches() if "group" in x["display_name"]]
        group = ledger.operations.get(batch["name"])
        assert group is not None and len(group.context["keys"]) == 2  # both items' requests
    finally:
        kinds._KINDS.pop(kind.name, None)
        kinds._BY_TAG.pop(kind.tag, None)


def test_a_kind_without_adopt_is_adopted_from_its_claim(
    ctx: HandlerContext, ledger: Ledger, gateway: GeminiGateway, labeller: Any
) -> None:
    """The handler died between the create and the register: reconcile registers the
    tagged batch with the context the claim stored, though the kind has no `adopt`."""
    event = _event("d-1")
    run = ctx.for_event(event).submission(labeller.LABEL, "octo/hello#7")
    context = {"issue": "octo/hello#7", "labels": ["bug"], "keys": ["issue"]}
    assert run.claim(context) is None
    tag = labeller.LABEL.make_tag("octo/hello#7")
    name = gateway.create_batch("models/gemini-2.5-flash", [("issue", "?")], display_name=tag)
    [summary] = [b for b in gateway.list_batches() if b.name == name]
    record = register_orphan(ledger, gateway, summary)
    assert record is not None and record.name == name
    assert record.context["labels"] == ["bug"] and record.kind == "issue-label"
