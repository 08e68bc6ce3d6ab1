"""One push, one trace: ingress → Cloud Tasks → worker attempts → Gemini → reconcile → outbox.

The whole pipeline runs as real processes (simulator, ingress, worker, reconcile under
functions-framework, the Firestore and Cloud Tasks emulators) with `TRACING=file`: each
process writes its spans to the local store, read back here as the console reads them
(shared/tracing/store.py). The first worker attempt fails on purpose (GitHub answers
502), and the completion webhook is dropped, so reconcile settles the batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from local.functions_server import start_function
from local.processes import Service, ServiceError, free_port
from shared.tracing import trace_id_of
from shared.tracing.store import StoredSpan, read_spans, traces_with
from tests.plugins.pipeline import (
    PipelineStack,
    pipeline_stack,
    push_payload,
)
from tests.waiting import wait_until

DELIVERY = "trace-push-1"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def traced(firestore_emulator, cloudtasks_emulator_fast, trace_dir) -> Iterator[PipelineStack]:
    env = {
        "TRACING": "file",
        "TRACE_DIR": str(trace_dir),
        "TRACE_SAMPLE_RATIO": "1",
        "GITHUB_COMMENTS": "true",  # the settlement's outbox item: one commit comment
        "RECONCILE_GRACE_S": "0",  # reconcile may check the batch as soon as it is registered
    }
    try:
        with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast, env) as running:
            yield running
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def reconcile(traced: PipelineStack) -> Iterator[tuple[str, Service]]:
    """The reconcile function beside the stack, called without a token as `make run` does."""
    port = free_port()
    service = start_function("reconcile", port, {**traced.env, "OIDC_AUDIENCE": ""})
    try:
        yield f"http://127.0.0.1:{port}/", service
    finally:
        service.stop()


def _operation(client) -> dict[str, Any] | None:
    found = [doc.to_dict() for doc in client.collection("operations").stream()]
    return found[0] if found else None


def _pushed(stack: PipelineStack, firestore_client, delivery: str) -> dict[str, Any]:
    """Push the files as `delivery`; the operation once its batch is registered."""
    assert stack.push(push_payload(), delivery=delivery).status_code == 202
    return wait_until(lambda: _operation(firestore_client), 60, "the batch registered", every=0.1)


def _settled(firestore_client) -> dict[str, Any]:
    """The operation once it is settled and its outbox (the comment) delivered."""

    def delivered() -> dict[str, Any] | None:
        op = _operation(firestore_client)
        done = op and op["status"] == "succeeded" and all(i["delivered_at"] for i in op["outbox"])
        return op if done else None

    return wait_until(delivered, 60, "the settlement and its comment", every=0.1)


@pytest.mark.slow
def test_a_push_settled_by_reconcile_is_one_trace_in_order(
    traced: PipelineStack, reconcile, trace_dir: Path, firestore_client
) -> None:
    reconcile_url, reconcile_service = reconcile
    traced.sim.reset()
    traced.put_files()
    traced.sim.github_fault("docs/intro.md", status=502, count=3)  # attempt 1 fails: 3 tries
    op = _pushed(traced, firestore_client, DELIVERY)

    traced.sim.complete(op["name"], state="succeeded", webhook="drop")
    answer = requests.post(reconcile_url, json={}, timeout=60)
    assert answer.status_code == 200, answer.text
    settled = _settled(firestore_client)
    assert settled["settled_by"] == "reconcile"

    [trace_id] = traces_with(trace_dir, delivery_id=DELIVERY)
    assert trace_id_of(settled["trace"]) == trace_id  # the operation stores its push's span

    def whole_trace() -> list[StoredSpan] | None:
        spans = read_spans(trace_dir, [trace_id])
        return spans if any(s.name == "outbox.deliver" for s in spans) else None

    spans = wait_until(whole_trace, 30, "the outbox delivery's span", every=0.1)
    by_id = {span.span_id: span for span in spans}
    named = _first_by_name(spans)

    ingress = named["ingress.request"]
    attempts = [s for s in spans if s.name == "worker.attempt"]
    create = named["gemini.batches.create"]
    check = named["reconcile.check"]
    settle = named["settle"]
    outbox = named["outbox.deliver"]

    # Every task attempt is in the trace, a child of the ingress's hand-off, with the task's
    # retry count: the first failed (GitHub 502), one did the work. How many more came
    # while the first still held the lease (`busy`) depends on the queue's timing.
    hand_off = named["ingress.hand_off"]
    assert hand_off.parent_id == ingress.span_id
    assert named["tasks.create_task"].parent_id == hand_off.span_id
    assert all(a.parent_id == hand_off.span_id for a in attempts)
    counts = [a.attributes["cloudtasks.retry_count"] for a in attempts]
    assert counts == sorted(set(counts)) and counts[0] == 0, counts
    outcomes = [a.attributes["hookledger.outcome"] for a in attempts]
    assert outcomes[0] == "retry" and attempts[0].status == "error", outcomes
    assert outcomes.count("done") == 1 and set(outcomes) <= {"retry", "busy", "done"}, outcomes
    [done] = [a for a in attempts if a.attributes["hookledger.outcome"] == "done"]
    assert _ancestor(create, done, by_id)

    # In that order: ingress, attempts, the Gemini create, the reconcile check, the outbox.
    order = [ingress, attempts[0], done, create, check, outbox]
    assert [s.start_ns for s in order] == sorted(s.start_ns for s in order), [s.name for s in order]

    # The reconcile check sits in the push's trace, linked to its run (another trace); the
    # settlement under it is linked to the push's span stored on the operation.
    assert check.service == "hookledger-reconcile"
    [(run_trace, _)] = [link for link in check.links if link[0] != trace_id]
    assert any(s.name == "reconcile.run" for s in read_spans(trace_dir, [run_trace]))
    stored_span = settled["trace"].split("-")[2]
    assert (trace_id, stored_span) in settle.links
    assert stored_span == done.span_id  # the attempt that registered the batch
    assert check.parent_id == done.span_id
    assert _ancestor(settle, check, by_id) and _ancestor(outbox, settle, by_id)
    assert settle.attributes["hookledger.settled_by"] == "reconcile"
    assert outbox.attributes["hookledger.outbox_kind"]
    assert any(s.name == "github.request" and _ancestor(s, outbox, by_id) for s in spans)
    assert any(s.name == "firestore.commit" and _ancestor(s, settle, by_id) for s in spans)

    # The logs of the three processes carry the trace in Cloud Logging's field.
    field = f"projects/demo-hookledger/traces/{trace_id}"
    for service in (traced.ingress, traced.worker, reconcile_service):
        lines = [json.loads(line) for line in _json_lines(service.output())]
        assert any(line.get("logging.googleapis.com/trace") == field for line in lines), service


def _first_by_name(spans: list[StoredSpan]) -> dict[str, StoredSpan]:
    named: dict[str, StoredSpan] = {}
    for span in spans:
        named.setdefault(span.name, span)
    return named


def _ancestor(span: StoredSpan, ancestor: StoredSpan, by_id: dict[str, StoredSpan]) -> bool:
    """Whether `ancestor` is above `span` in the tree."""
    parent = span.parent_id
    while parent is not None and parent in by_id:
        if parent == ancestor.span_id:
            return True
        parent = by_id[parent].parent_id
    return False


def _json_lines(output: str) -> Iterator[str]:
    for line in output.splitlines():
        start = line.find("{")
        if start >= 0 and line.rstrip().endswith("}"):
            yield line[start:]


@pytest.mark.slow
def test_a_webhook_settlement_sits_in_the_push_trace_linked_to_the_webhook_run(
    traced: PipelineStack, trace_dir: Path, firestore_client
) -> None:
    traced.sim.reset()
    traced.put_files()
    op = _pushed(traced, firestore_client, "trace-push-2")

    traced.sim.complete(op["name"], state="succeeded", webhook="send")
    settled = _settled(firestore_client)
    assert settled["settled_by"] == "webhook"
    push_trace = trace_id_of(settled["trace"])

    def settle_span() -> StoredSpan | None:
        """The settlement's span once the whole settling run is stored (it ends last)."""
        named = _first_by_name(read_spans(trace_dir, [push_trace]))
        return named.get("settle") if "outbox.deliver" in named else None

    settle = wait_until(settle_span, 30, "the settlement's span in the push's trace", every=0.1)
    assert settle.attributes["hookledger.settled_by"] == "webhook"
    assert settle.parent_id == settled["trace"].split("-")[2]  # under the push's run
    # Linked to the Gemini webhook's worker attempt: a trace of its own, started at the ingress.
    [(webhook_trace, webhook_span)] = [link for link in settle.links if link[0] != push_trace]
    webhook_spans = {s.span_id: s for s in read_spans(trace_dir, [webhook_trace])}
    attempt = webhook_spans[webhook_span]
    assert (attempt.name, attempt.attributes["hookledger.source"]) == ("worker.attempt", "gemini")
    assert any(
        s.name == "ingress.request" and s.attributes["hookledger.source"] == "gemini"
        for s in webhook_spans.values()
    )
