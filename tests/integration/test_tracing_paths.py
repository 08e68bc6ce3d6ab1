"""Tracing on the request paths: the trace crosses Cloud Tasks (task headers and envelope),
and a worker attempt's trace is kept, whatever the ratio, when it fails or goes dead.

The ingress is the real app (functions-framework's loader, `FUNCTION_TARGET=ingress`, so
`runtime.check_startup` configures tracing as deployed) on a paused queue of the local
Cloud Tasks emulator; the worker runs in-process on the Firestore emulator.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared import handlers, tracing
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GITHUB_SECRET, Config
from shared.entrypoints.worker import Worker
from shared.handlers import Done, PermanentError, handler
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.ledger import Ledger
from shared.signatures import sign_github
from shared.tracing.otel import OtelTracer
from shared.tracing.store import SpanFileWriter, read_spans
from tests.integration.test_ingress import PUSH, Harness, ingress_harness

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def untraced_after() -> Iterator[None]:
    """Whatever a test configures, the process traces nothing after it."""
    yield
    tracing.configure(Config())


@pytest.fixture
def traced_ingress(
    cloudtasks_emulator, monkeypatch, tmp_path: Path, untraced_after
) -> Iterator[Harness]:
    env = {"FUNCTION_TARGET": "ingress", "TRACING": "file", "TRACE_DIR": str(tmp_path)}
    yield from ingress_harness(cloudtasks_emulator, monkeypatch, {**env, "TRACE_SAMPLE_RATIO": "1"})


def test_the_hand_off_carries_the_trace_in_the_task_headers_and_the_envelope(
    traced_ingress: Harness, tmp_path: Path
) -> None:
    headers = {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "traced-push-1",
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, PUSH),
        "Content-Type": "application/json",
        # What Cloud Run hands the function: the caller's (the platform's) trace.
        "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01",
    }
    answer = traced_ingress.client.post("/github", data=PUSH, headers=headers)
    assert answer.status_code == 202, answer.get_json()

    [task] = traced_ingress.tasks()
    task_parent = tracing.parse_traceparent(task.http_request.headers["traceparent"])
    envelope = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).open(task.http_request.body)
    envelope_parent = tracing.parse_traceparent(envelope.headers["traceparent"])
    spans = {span.name: span for span in read_spans(tmp_path)}
    request, hand_off, create = (
        spans["ingress.request"],
        spans["ingress.hand_off"],
        spans["tasks.create_task"],
    )
    assert (request.trace_id, request.parent_id) == (CALLER_TRACE, CALLER_SPAN)
    assert request.kind == "server" and request.service == "hookledger-ingress"
    assert request.attributes["hookledger.delivery_id"] == "traced-push-1"
    assert request.attributes["http.response.status_code"] == 202
    assert spans["ingress.verify"].parent_id == request.span_id
    # The envelope names the hand-off (signed with the body); the task's header the
    # CreateTask call inside it (Cloud Tasks forwards it; Cloud Run may re-parent it).
    assert envelope_parent == (CALLER_TRACE, hand_off.span_id, True)
    assert task_parent == (CALLER_TRACE, create.span_id, True)
    assert create.kind == "producer" and create.attributes["hookledger.created"] == "created"


@pytest.fixture
def registry() -> Iterator[None]:
    saved = handlers.snapshot()
    yield
    handlers.restore(saved)


def _worker_run(
    firestore_client, store: Path, delivery: str, ratio: float, retry_count: int = 3
) -> int:
    """One attempt of `delivery` (the handler acts on its name) with tracing at `ratio`, as
    Cloud Tasks' retry `retry_count` (3 is the worker's limit: a retryable failure is dead);
    its answer's status."""
    worker = Worker(
        Config(worker_max_retries=3),
        sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]),
        ledger=Ledger(firestore_client),
        services=lambda name: None,
    )
    body = b'{"issue": "%s"}' % delivery.encode()  # one body under two ids is a replay
    envelope = Envelope("github", "issues", delivery, datetime.now(UTC), {}, body)
    sealed = EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)
    tracer = OtelTracer("hookledger-worker", "demo-p", ratio, SpanFileWriter(store, "w"))
    with tracing.installed(tracer):
        retry = {"X-CloudTasks-TaskRetryCount": str(retry_count)}
        return worker.handle("POST", "/", retry, sealed).status


def test_sampled_out_traces_are_dropped_but_dead_and_retried_ones_kept(
    firestore_client, registry, tmp_path: Path
) -> None:
    @handler("github", "issues")
    def by_name(event, ctx):
        if event.delivery_id.startswith("dead"):
            raise PermanentError("issue payload has no number")
        if event.delivery_id.startswith("retry"):
            raise RuntimeError("upstream hiccup")
        return Done("labelled")

    assert _worker_run(firestore_client, tmp_path, "done-1", ratio=0.0) == 200
    assert read_spans(tmp_path) == []  # sampled out: recorded, then dropped
    # A redelivery finds its record there: an answer, not an error that would keep the trace.
    assert _worker_run(firestore_client, tmp_path, "done-1", ratio=0.0) == 200
    assert read_spans(tmp_path) == []

    assert _worker_run(firestore_client, tmp_path, "dead-1", ratio=0.0) == 200
    [dead] = [s for s in read_spans(tmp_path) if s.name == "worker.attempt"]
    assert dead.attributes["hookledger.outcome"] == "dead" and dead.status == "error"
    assert dead.attributes["hookledger.keep"] is True and not dead.sampled
    assert "issue payload has no number" in (dead.error or "")
    # The attempt's commits are kept with it: the whole local trace, not the root alone.
    assert any(s.parent_id == dead.span_id for s in read_spans(tmp_path, [dead.trace_id]))

    assert _worker_run(firestore_client, tmp_path, "retry-1", ratio=0.0, retry_count=0) == 503
    retried = [s for s in read_spans(tmp_path) if s.attributes.get("hookledger.outcome") == "retry"]
    assert len(retried) == 1 and retried[0].status == "error"
    assert retried[0].attributes["cloudtasks.retry_count"] == 0
