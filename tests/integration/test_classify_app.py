"""The classify app end to end against the Firestore emulator and the Gemini simulator (real
google-genai): submit → the simulator completes the batch → settled by webhook or by
reconcile → one `classifications` document per item, exactly once; orphan adoption; the
`hookledger submit --app classify` command."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from apps.classify import COLLECTION, KIND, classify_tag, submit_items
from apps.classify.submit import generation_config, prompt
from shared.api import doc_id
from shared.clock import system_clock
from shared.config import Config
from shared.entrypoints import runtime
from shared.gemini import GeminiGateway
from shared.handlers.context import ClientFactories, HandlerContext
from shared.ledger import Ledger
from shared.reconcile import Reconciler, ReconcileSettings
from shared.settlement.settler import Settler
from tests.integration.test_cli import run

MODEL = "models/gemini-2.5-flash"
ITEMS = [
    {"id": "issue-1", "text": "The app crashes when I press save."},
    {"id": "issue-2", "text": "Please add a dark mode."},
    {"id": "issue-3", "text": "How do I export my data?"},
]
ANSWERS = {
    "issue-1": {"text": '{"label": "bug", "confidence": 0.93}'},
    "issue-2": {"text": '{"label": "wontfix", "confidence": 0.5}'},  # not a label
    "issue-3": {"error": {"code": 13, "message": "internal error"}},
}


@pytest.fixture
def gateway(simulator: Any) -> GeminiGateway:
    return GeminiGateway(simulator.genai())


@pytest.fixture
def ledger(firestore_client: Any) -> Ledger:
    return Ledger(firestore_client, grace=timedelta(0))


@pytest.fixture
def ctx(ledger: Ledger, gateway: GeminiGateway) -> HandlerContext:
    """The worker's context for the classify app, on this test's ledger and simulator."""
    clients = ClientFactories.from_lookup(ledger, {"gemini": gateway}.__getitem__)
    return HandlerContext(Config(), clients, clock=system_clock).for_app("classify")


def reconciler(ledger: Ledger, gateway: GeminiGateway, clock: Any = system_clock) -> Reconciler:
    settings = ReconcileSettings(grace_s=0, concurrency=4, budget_s=60, page_size=50)
    return Reconciler(ledger, gateway, clock, settings)


def past_min_age() -> Any:
    """Now plus 3 minutes: a batch created just before is old enough to adopt."""
    return system_clock() + timedelta(minutes=3)


def docs(client: Any) -> dict[str, dict[str, Any]]:
    """The `classifications` documents by item, each checked to sit at its id."""
    found: dict[str, dict[str, Any]] = {}
    for snap in client.collection(COLLECTION).stream():
        data = snap.to_dict()
        assert snap.id == doc_id(data["submission"], data["item"])
        assert data["item"] not in found
        found[data["item"]] = data
    return found


def complete(simulator: Any, name: str, webhook: str = "drop") -> None:
    simulator.control.complete(name, webhook=webhook, rows=ANSWERS)


def assert_the_three_documents(client: Any, name: str, submission: str) -> None:
    stored = docs(client)
    assert set(stored) == {"issue-1", "issue-2", "issue-3"}
    assert stored["issue-1"] == {
        "submission": submission,
        "item": "issue-1",
        "label": "bug",
        "confidence": 0.93,
        "status": "ok",
        "error": None,
        "operation": name,
    }
    assert stored["issue-2"]["status"] == "error" and stored["issue-2"]["label"] is None
    assert "'wontfix' is not one of" in stored["issue-2"]["error"]
    assert stored["issue-3"]["status"] == "error" and "internal error" in stored["issue-3"]["error"]
    assert {d["operation"] for d in stored.values()} == {name}


# --------------------------------------------------------------------------- submission


def test_one_batch_one_request_per_item_tagged_with_the_context(
    ctx: HandlerContext, ledger: Ledger, simulator: Any
) -> None:
    done = submit_items(ctx, ITEMS, submission_id="sub-a")

    assert done.created and done.items == 3 and done.submission == "sub-a"
    [batch] = simulator.control.batches()
    assert batch["name"] == done.operation
    assert batch["display_name"] == classify_tag("sub-a") == "hookledger:classify:sub-a"
    assert len(batch["requests"]) == 3
    for request, item in zip(batch["requests"], ITEMS, strict=True):
        assert (
            item["text"] in request["text"] and "bug, feature, question, other" in request["text"]
        )
        assert request["generation_config"]["responseMimeType"] == "application/json"
        schema = request["generation_config"]["responseSchema"]
        assert schema["properties"]["label"]["enum"] == ["bug", "feature", "question", "other"]
    record = ledger.operations.get(done.operation)
    assert record is not None and record.kind == KIND.name and record.pending
    assert record.context == {
        "keys": ["issue-1", "issue-2", "issue-3"],
        "submission": "sub-a",
        "labels": ["bug", "feature", "question", "other"],
    }
    assert record.submission == classify_tag("sub-a")


def test_submitting_twice_with_one_id_makes_one_batch(ctx: HandlerContext, simulator: Any) -> None:
    first = submit_items(ctx, ITEMS, submission_id="sub-b")
    second = submit_items(ctx, ITEMS, submission_id="sub-b")

    assert first.created and not second.created
    assert second.operation == first.operation
    assert second.detail == f"already submitted as {first.operation}"
    assert len(simulator.control.batches()) == 1


def test_bad_items_submit_nothing(ctx: HandlerContext, simulator: Any, ledger: Ledger) -> None:
    from apps.classify.submit import ItemError

    with pytest.raises(ItemError, match="item 2"):
        submit_items(ctx, [ITEMS[0], {"id": "issue-1", "text": "again"}], submission_id="sub-x")
    assert simulator.control.batches() == []
    assert ledger.submissions.get(classify_tag("sub-x")) is None


def test_a_failed_create_releases_the_claim_and_the_next_call_creates(
    ctx: HandlerContext, simulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shared.gemini import GeminiUnavailable

    real = ctx.gemini.create_batch
    calls: list[str] = []

    def failing(*args: Any, **kwargs: Any) -> str:
        calls.append(kwargs["display_name"])
        raise GeminiUnavailable("503 from Gemini")

    monkeypatch.setattr(ctx.gemini, "create_batch", failing)
    with pytest.raises(GeminiUnavailable):
        submit_items(ctx, ITEMS, submission_id="sub-f")
    monkeypatch.setattr(ctx.gemini, "create_batch", real)

    again = submit_items(ctx, ITEMS, submission_id="sub-f")  # the claim was released
    assert again.created and calls == [classify_tag("sub-f")]
    assert len(simulator.control.batches()) == 1


def test_a_rerun_after_a_crash_between_create_and_register_registers_that_batch(
    ctx: HandlerContext, gateway: GeminiGateway, ledger: Ledger, simulator: Any
) -> None:
    """The CLI died after creating: its claim (same event, same attempt) is found stale,
    the tagged batch listed and registered; no second batch."""
    tag = classify_tag("sub-c")
    now = system_clock()
    context = {"keys": [i["id"] for i in ITEMS], "submission": "sub-c", "labels": ["bug"]}
    ledger.submissions.claim(
        tag, delivery_id="cli-sub-c", attempt="cli-sub-c:direct",
        lease_until=now + timedelta(minutes=10), now=now, context=context,
    )  # fmt: skip
    orphan = gateway.create_batch(MODEL, [(i["id"], i["text"]) for i in ITEMS], display_name=tag)

    done = submit_items(ctx, ITEMS, submission_id="sub-c")

    assert not done.created and done.operation == orphan
    assert done.detail == f"already submitted as {orphan}"
    assert len(simulator.control.batches()) == 1
    record = ledger.operations.get(orphan)
    assert record is not None and record.kind == KIND.name
    assert record.context["keys"] == ["issue-1", "issue-2", "issue-3"]


# --------------------------------------------------------------------------- settlement


def test_settled_by_webhook_writes_one_document_per_item_once(
    ctx: HandlerContext, ledger: Ledger, gateway: GeminiGateway, simulator: Any,
    firestore_client: Any,
) -> None:  # fmt: skip
    name = submit_items(ctx, ITEMS, submission_id="sub-w").operation
    assert name is not None
    complete(simulator, name)

    outcome = Settler(ledger, gateway).settle(name, "webhook")

    assert (outcome.result, outcome.status) == ("settled", "succeeded")
    record = ledger.operations.get(name)
    assert record is not None and record.settled_by == "webhook" and record.writeback_done
    assert_the_three_documents(firestore_client, name, "sub-w")
    times = {s.id: s.update_time for s in firestore_client.collection(COLLECTION).stream()}

    again = Settler(ledger, gateway).settle(name, "webhook")
    by_reconcile = reconciler(ledger, gateway).run()

    assert again.result == "already_settled"
    assert by_reconcile.settled == 0
    assert {s.id: s.update_time for s in firestore_client.collection(COLLECTION).stream()} == times


def test_settled_by_reconcile_writes_one_document_per_item_once(
    ctx: HandlerContext, ledger: Ledger, gateway: GeminiGateway, simulator: Any,
    firestore_client: Any,
) -> None:  # fmt: skip
    name = submit_items(ctx, ITEMS, submission_id="sub-r").operation
    assert name is not None
    running = reconciler(ledger, gateway).run()
    assert running.settled == 0 and docs(firestore_client) == {}
    complete(simulator, name)
    ledger.operations.defer(name, system_clock() - timedelta(seconds=1), 1)  # due now

    report = reconciler(ledger, gateway).run()

    assert report.settled == 1, report
    record = ledger.operations.get(name)
    assert record is not None and record.settled_by == "reconcile"
    assert_the_three_documents(firestore_client, name, "sub-r")
    assert Settler(ledger, gateway).settle(name, "webhook").result == "already_settled"
    assert len(docs(firestore_client)) == 3


def test_a_failed_batch_gives_every_item_an_error_document(
    ctx: HandlerContext, ledger: Ledger, gateway: GeminiGateway, simulator: Any,
    firestore_client: Any,
) -> None:  # fmt: skip
    name = submit_items(ctx, ITEMS, submission_id="sub-e").operation
    assert name is not None
    simulator.control.complete(
        name, state="failed", webhook="drop", error={"code": 8, "message": "quota exhausted"}
    )
    assert Settler(ledger, gateway).settle(name, "webhook").status == "failed"
    stored = docs(firestore_client)
    assert set(stored) == {"issue-1", "issue-2", "issue-3"}
    assert {d["status"] for d in stored.values()} == {"error"}
    assert all("quota exhausted" in d["error"] for d in stored.values())


# --------------------------------------------------------------------------- adoption


def test_an_orphan_batch_is_adopted_by_reconcile_and_settled_with_its_write_back(
    ledger: Ledger, gateway: GeminiGateway, simulator: Any, firestore_client: Any
) -> None:
    """Created, never registered (its creator died after claiming): reconcile adopts it
    from its tag, once its rows name the items (this claim names none)."""
    labels = ["bug", "feature", "question", "other"]
    now = system_clock()
    ledger.submissions.claim(
        classify_tag("sub-o"), delivery_id="d", attempt="dead", lease_until=now, now=now
    )
    orphan = gateway.create_batch(
        MODEL,
        [(i["id"], prompt(i["text"], labels)) for i in ITEMS],
        display_name=classify_tag("sub-o"),
        generation_config=generation_config(labels),
    )
    running = reconciler(ledger, gateway, past_min_age).run()
    assert running.adopted == 0 and ledger.operations.get(orphan) is None  # no keys yet

    complete(simulator, orphan)
    report = reconciler(ledger, gateway, past_min_age).run()

    assert report.adopted == 1 and report.settled == 1, report
    record = ledger.operations.get(orphan)
    assert record is not None and record.kind == KIND.name and record.settled_by == "reconcile"
    assert record.context["keys"] == ["issue-1", "issue-2", "issue-3"]
    assert record.context["submission"] == "sub-o"
    assert_the_three_documents(firestore_client, orphan, "sub-o")
    again = reconciler(ledger, gateway, past_min_age).run()
    assert again.adopted == 0 and again.settled == 0 and len(docs(firestore_client)) == 3


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def cli(firestore_client: Any, simulator: Any) -> Iterator[Any]:
    os.environ.update(
        {
            "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
            "GEMINI_BASE_URL": simulator.url,
            "GEMINI_API_KEY": "sim-key",
            "HTTP_TIMEOUT_S": "5",
            "HOOKLEDGER_APPS": "apps.review,apps.classify",
        }
    )
    runtime.reset()
    yield firestore_client
    runtime.reset()


def items_file(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_the_cli_submits_once_per_id(cli: Any, simulator: Any, tmp_path: Path, capsys) -> None:
    path = items_file(tmp_path, [json.dumps(i) for i in ITEMS])
    argv = ("submit", "--app", "classify", "--input", path, "--id", "cli-1")

    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    data = json.loads(out)
    [batch] = simulator.control.batches()
    assert data == {
        "operation": batch["name"],
        "submission": "cli-1",
        "items": 3,
        "created": True,
    }
    assert batch["display_name"] == "hookledger:classify:cli-1"
    record = Ledger(cli).operations.get(batch["name"])
    assert record is not None and record.kind == KIND.name

    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert out.strip() == f"submission cli-1: already submitted as {batch['name']}"
    assert len(simulator.control.batches()) == 1


def test_the_cli_names_a_bad_line_and_submits_nothing(
    cli: Any, simulator: Any, tmp_path: Path, capsys
) -> None:
    bad_json = items_file(tmp_path, [json.dumps(ITEMS[0]), '{"id": "x", "text"'])
    code, out, err = run(capsys, "submit", "--app", "classify", "--input", bad_json)
    assert (code, out) == (1, "")
    assert err.startswith("hookledger: error:") and "items.jsonl:2: not valid JSON" in err

    no_text = items_file(tmp_path, [json.dumps(ITEMS[0]), "", json.dumps({"id": "x"})])
    code, out, err = run(capsys, "submit", "--app", "classify", "--input", no_text)
    assert (code, out) == (1, "")
    assert "items.jsonl:3: (id 'x') needs a non-empty string \"text\"" in err
    assert simulator.control.batches() == []


@pytest.mark.parametrize(
    "argv",
    [
        ["submit", "--app", "classify", "--prompt", "p"],
        ["submit", "--kind", "k", "--input", "items.jsonl"],
        ["submit", "--app", "nosuchapp", "--input", "items.jsonl"],
        ["submit", "--app", "review", "--input", "items.jsonl"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_mismatched_submit_arguments_exit_2(cli: Any, capsys, argv: list[str]) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("hookledger: error:")
