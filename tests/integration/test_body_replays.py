"""A GitHub body seen before is a duplicate whatever its delivery id (issue 33, point 3).

GitHub signs the body only: no timestamp, and `X-GitHub-Delivery` is unsigned, so anyone
holding one signed body can send it again under a fresh id. The ingress names the task
after the body and answers `duplicate` while Cloud Tasks keeps the name (about an hour);
past that, the ledger knows the body by its SHA-256, recorded in the same commit as the
first delivery that carried it, for the deliveries' retention (14 days), and for ever for
an installation event (docs/architecture.md, "Replays"). A redelivery keeps its id and is
run as before: lease, retry, duplicate once finished.

Every scenario runs the real worker (or the ledger) on the emulator, with the ledger's
clock injected; `expire` stands in for Firestore's TTL, which the emulator does not run.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore

import shared.handlers.builtin  # noqa: F401  (registers the installation handler)
from local.fakes import FakeClock
from shared import handlers
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.entrypoints.worker import Worker
from shared.handlers import ClaimRequest, Done, handler
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.ledger import Ledger
from tests.integration.test_installations import REPO, history

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
# GitHub's published "Re-run" example, byte for byte: the body the replay re-sends.
RERUN = (FIXTURES / "check_run-rerequested.payload.json").read_bytes()
LEASE = timedelta(minutes=10)
RETENTION = timedelta(days=14)
# Probes register on events of their own: replacing a built-in handler (check_run, push)
# would leave its claims pointing at the probe after `handlers.restore`.
RERUN_PROBE, PUSH_PROBE = "probe_rerun", "probe_push"


@pytest.fixture
def worker(firestore_client: Any, clock: FakeClock) -> Iterator[tuple[Worker, Ledger]]:
    saved = handlers.snapshot()
    ledger = Ledger(firestore_client, clock=clock)
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
    yield (
        Worker(Config(), sealer=sealer, ledger=ledger, services=lambda name: None, clock=clock),
        ledger,
    )
    handlers.restore(saved)


def sealed(event: str, body: bytes, delivery: str, received_at: datetime) -> bytes:
    envelope = Envelope("github", event, delivery, received_at, {}, body)
    return EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)


def run(worker: Worker, event: str, body: bytes, delivery: str, received_at: datetime) -> Any:
    envelope = sealed(event, body, delivery, received_at)
    reply = worker.handle("POST", "/", {"X-CloudTasks-TaskRetryCount": "0"}, envelope)
    assert reply.status == 200, reply.body
    return reply.body


def expire(client: Any, now: datetime) -> None:
    """What Firestore's TTL would have deleted by `now`: every document whose `expire_at`
    (each collection's TTL field, terraform/firestore_indexes.json) has passed."""
    for collection in client.collections():
        query = collection.where(filter=firestore.FieldFilter("expire_at", "<=", now))
        for snapshot in query.stream():
            snapshot.reference.delete()


def replay_warnings(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [
        dict(getattr(r, "hookledger_fields", {}))
        for r in caplog.records
        if r.levelno == logging.WARNING and getattr(r, "hookledger_fields", {}).get("duplicate_of")
    ]


# ------------------------------------------------------------------------- the ledger


def test_a_body_recorded_under_one_delivery_id_is_recorded_a_duplicate_under_another(ledger):
    first = ledger.deliveries.record(
        "github", "d-1", "check_run", RERUN, attempt="a-1", lease_for=LEASE
    )
    ledger.deliveries.end_attempt("github", "d-1", "a-1", "done")

    again = ledger.deliveries.record(
        "github", "d-2", "check_run", RERUN, attempt="a-2", lease_for=LEASE
    )

    assert first.new and not first.delivery.finished
    assert again.delivery.finished and not again.busy, again
    assert again.duplicate_of == "d-1"
    stored = ledger.deliveries.get("github", "d-2")
    assert (stored.status, stored.lease) == ("ignored", None)
    assert "d-1" in stored.last_error
    assert ledger.deliveries.get("github", "d-1").status == "done"  # the first is untouched


def test_a_claim_checked_body_is_known_by_the_digest_the_envelope_sealed(ledger):
    digest = hashlib.sha256(RERUN).hexdigest()
    for delivery in ("d-1", "d-2"):  # the body itself stayed in the claim store
        recorded = ledger.deliveries.record(
            "github",
            delivery,
            "push",
            payload_ref=f"github:{delivery}",
            attempt=f"a-{delivery}",
            lease_for=LEASE,
            body_sha256=digest,
        )

    assert (recorded.delivery.status, recorded.duplicate_of) == ("ignored", "d-1")


def test_a_redelivery_keeps_its_id_and_its_lease_and_retry_semantics(ledger, clock):
    """Same id, same body (GitHub's "Redeliver", a Cloud Tasks retry): as before the
    digest, whatever its body's marker says."""
    record = ledger.deliveries.record
    first = record("github", "d-1", "check_run", RERUN, attempt="a-1", lease_for=LEASE)
    running = record("github", "d-1", "check_run", RERUN, attempt="a-2", lease_for=LEASE)
    clock.advance(LEASE.total_seconds() + 1)
    taken = record("github", "d-1", "check_run", RERUN, attempt="a-3", lease_for=LEASE)
    ledger.deliveries.end_attempt("github", "d-1", "a-3", "done")
    finished = record("github", "d-1", "check_run", RERUN, attempt="a-4", lease_for=LEASE)

    assert first.new and first.delivery.lease.attempt == "a-1"
    assert running.busy and running.delivery.lease.attempt == "a-1"
    assert not taken.busy and not taken.delivery.finished
    assert taken.delivery.lease.attempt == "a-3"
    assert (finished.delivery.status, finished.busy) == ("done", False)


def test_another_source_keeps_deduping_by_id_alone(ledger):
    """Gemini signs its id with the body: two ids with one body are two deliveries."""
    body = b'{"type":"batch.succeeded","data":{"id":"batches/x"}}'
    ledger.deliveries.record("gemini", "msg_1", "batch.succeeded", body)
    second = ledger.deliveries.record("gemini", "msg_2", "batch.succeeded", body)

    assert second.new and second.delivery.status == "queued"


# ------------------------------------------------------------------------- the worker


def test_a_replayed_rerequested_body_runs_no_handler_and_is_answered_duplicate(
    worker, clock, caplog
):
    worker, _ = worker
    runs: list[str] = []

    @handler("github", RERUN_PROBE)
    def rerun(event, ctx):  # stands in for the re-run: a new billed batch per run
        runs.append(event.delivery_id)
        return Done("a new batch")

    caplog.set_level(logging.INFO, logger="hookledger")
    t0 = clock()
    assert run(worker, RERUN_PROBE, RERUN, "d-1", t0)["status"] == "done"
    # Two hours on, the task name is free again: the captured body under a fresh id.
    clock.advance(2 * 3600)
    reply = run(worker, RERUN_PROBE, RERUN, "d-2", clock())

    assert (reply["status"], reply["delivery_id"]) == ("duplicate", "d-2")
    assert runs == ["d-1"]
    [warning] = replay_warnings(caplog)
    assert (warning["delivery_id"], warning["duplicate_of"]) == ("d-2", "d-1")
    assert warning["body_sha256"] == hashlib.sha256(RERUN).hexdigest()


def test_a_replayed_push_body_claims_nothing_and_is_answered_duplicate(worker, clock):
    """The push's path: its delivery and its submission's claim in one commit."""
    worker, ledger = worker
    runs: list[str] = []
    body = b'{"ref":"refs/heads/main","after":"abc"}'

    def claims(raw: bytes, ctx: Any) -> ClaimRequest:
        return ClaimRequest("hookledger:test:o/r@abc")

    @handler("github", PUSH_PROBE, claims=claims)
    def push(event, ctx):
        runs.append(event.delivery_id)
        return Done("a batch")

    assert run(worker, PUSH_PROBE, body, "d-1", clock())["status"] == "done"
    clock.advance(2 * 3600)
    assert run(worker, PUSH_PROBE, body, "d-2", clock())["status"] == "duplicate"

    assert runs == ["d-1"]
    assert ledger.submissions.get("hookledger:test:o/r@abc").claimed_by == "d-1"


def test_a_body_is_a_duplicate_for_the_retention_window_not_longer(worker, clock, firestore_client):
    worker, _ = worker
    runs: list[str] = []

    @handler("github", RERUN_PROBE)
    def rerun(event, ctx):
        runs.append(event.delivery_id)
        return Done("a new batch")

    run(worker, RERUN_PROBE, RERUN, "d-1", clock())
    clock.advance((RETENTION - timedelta(days=1)).total_seconds())
    expire(firestore_client, clock())
    assert run(worker, RERUN_PROBE, RERUN, "d-2", clock())["status"] == "duplicate"

    clock.advance(timedelta(days=2).total_seconds())  # past the first delivery's TTL
    expire(firestore_client, clock())
    assert run(worker, RERUN_PROBE, RERUN, "d-3", clock())["status"] == "done"
    assert runs == ["d-1", "d-3"]


# ------------------------------------------------------------------- installations


def removed_then_added(worker: Worker, number: int, t0: datetime) -> tuple[bytes, Any]:
    """The issue's history: a repository removed, then added back; GitHub left
    `updated_at` as it was (its own examples do), so receipt order decided."""
    removed = history("installation_repositories-removed.payload.json", number, 5, [REPO])
    added = history("installation_repositories-added.payload.json", number, 5, [REPO])
    created = history("installation-created.payload.json", number, 0)
    assert run(worker, "installation", created, "d-c", t0)["status"] == "done"
    step = timedelta(seconds=1)
    assert run(worker, "installation_repositories", removed, "d-r", t0 + step)["status"] == "done"
    assert run(worker, "installation_repositories", added, "d-a", t0 + 2 * step)["status"] == "done"
    return removed, added


def test_a_replayed_removed_body_changes_no_installation(worker, clock, caplog):
    worker, ledger = worker
    number, t0 = 4_242_001, datetime(2026, 1, 1, tzinfo=UTC)
    removed, _ = removed_then_added(worker, number, t0)
    before = ledger.installations.get(number)
    assert before.refusal(REPO) is None

    caplog.set_level(logging.INFO, logger="hookledger")
    clock.advance(2 * 3600)
    later = t0 + timedelta(hours=2)
    reply = run(worker, "installation_repositories", removed, "d-r2", later)

    assert (reply["status"], reply["delivery_id"]) == ("duplicate", "d-r2")
    assert ledger.installations.get(number) == before  # its pushes are still reviewed
    assert [(w["delivery_id"], w["duplicate_of"]) for w in replay_warnings(caplog)] == [
        ("d-r2", "d-r")
    ]


def test_an_installation_body_stays_a_duplicate_past_the_retention_window(
    worker, clock, firestore_client
):
    """An installation's order cannot be rebuilt from GitHub's signed times (it reuses
    `updated_at`), so its events' bodies are kept as long as the installation is."""
    worker, ledger = worker
    number, t0 = 4_242_002, datetime(2026, 1, 1, tzinfo=UTC)
    removed, _ = removed_then_added(worker, number, t0)
    before = ledger.installations.get(number)

    clock.advance((RETENTION + timedelta(days=30)).total_seconds())
    expire(firestore_client, clock())
    later = t0 + RETENTION + timedelta(days=30)
    reply = run(worker, "installation_repositories", removed, "d-r3", later)

    assert reply["status"] == "duplicate"
    assert ledger.installations.get(number) == before


def test_a_claim_checked_body_replayed_under_another_id_is_a_duplicate_at_the_worker(
    firestore_client, clock
):
    """A body over the claim threshold travels by reference: the worker marks it by the
    digest the envelope sealed, so its replay under a new id runs nothing."""
    from local.fakes import MemoryPayloadStore

    saved = handlers.snapshot()
    store = MemoryPayloadStore()
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY], payloads=store, payload_threshold_bytes=1)
    ledger = Ledger(firestore_client, clock=clock)
    worker = Worker(
        Config(),
        sealer=sealer,
        ledger=ledger,
        services={"payloads": store}.__getitem__,
        clock=clock,
    )
    runs: list[str] = []

    @handler("github", RERUN_PROBE)
    def probe(event, ctx):
        runs.append(event.delivery_id)
        return Done("ran")

    try:
        answers = []
        for delivery in ("big-1", "big-2"):
            envelope = Envelope("github", RERUN_PROBE, delivery, clock(), {}, RERUN)
            reply = worker.handle("POST", "/", {}, sealer.seal(envelope))
            answers.append(reply.body["status"])
    finally:
        handlers.restore(saved)

    assert answers == ["done", "duplicate"]
    assert runs == ["big-1"]
    stored = ledger.deliveries.get("github", "big-2")
    assert stored.status == "ignored" and "big-1" in stored.last_error
