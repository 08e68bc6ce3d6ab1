"""Reconcile against the official Firestore emulator and the simulator, via real google-genai."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from apps.review.kind import KIND as REVIEW_KIND
from apps.review.kind import review_tag
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared import kinds
from shared.clock import system_clock
from shared.gemini import GeminiError, GeminiGateway
from shared.handoff.tasks import TaskQueue, ensure_queue, make_client
from shared.kinds import OperationKind
from shared.ledger import Ledger, Operation
from shared.reconcile import (
    BACKOFF_CAP_S,
    ORPHAN_WINDOW,
    Reconciler,
    ReconcileSettings,
    RunReport,
    Sources,
    TaskPageEnqueuer,
    page_names,
    page_payload,
)
from shared.reconcile.settings import field_names
from shared.settlement.settler import settle_from_gemini
from tests.plugins.loopback import QuietHandler, Serve
from tests.waiting import wait_until

MODEL = "gemini-2.5-flash"
COUNTED = "reconcile-test"  # a kind whose write-back refuses to run twice


def _create_once(writes: Any, record: Operation, batch: Any) -> None:
    # `create` fails if the document exists: a second write-back could not commit.
    txn = writes.transaction
    txn.create(txn._client.collection("writebacks").document(record.doc_id), {"op": record.name})


kinds.register(OperationKind(name=COUNTED, tag=COUNTED, writeback=_create_once))


def count(client: Any, collection: str) -> int:
    return int(client.collection(collection).count().get()[0][0].value)


def statuses(ledger: Ledger, names: list[str]) -> dict[str, Operation]:
    return {name: ledger.operations.get(name) for name in names}  # type: ignore[misc]


@pytest.fixture
def gateway(simulator: Any) -> GeminiGateway:
    return GeminiGateway(simulator.genai())


def past_min_age() -> Any:
    """Now plus 3 minutes: batches created just before are past adoption's minimum age
    (grace 0 + the 2 min clock skew), so their creator is certainly done with them."""
    return system_clock() + timedelta(minutes=3)


def make_reconciler(
    ledger: Ledger, gateway: GeminiGateway, clock: Any = system_clock, **overrides: Any
) -> Reconciler:
    """A Reconciler with test defaults; `overrides` may name settings or collaborators."""
    options: dict[str, Any] = {
        "grace_s": 0,
        "concurrency": 8,
        "budget_s": 60,
        "stuck_after_s": 6 * 3600,
        "page_size": 50,
        "fanout_threshold": 10_000,
        **overrides,
    }
    names = field_names()
    settings = ReconcileSettings(**{k: v for k, v in options.items() if k in names})
    rest = {k: v for k, v in options.items() if k not in names}
    return Reconciler(ledger, gateway, clock, settings, **rest)


class Ticks:
    """An injected monotonic clock that moves only when told (thread-safe)."""

    def __init__(self) -> None:
        self._now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


class TimedGateway:
    """The real gateway, with a hook that runs before each `fetch` (a check's Gemini call)."""

    def __init__(self, gateway: GeminiGateway, before_fetch: Any) -> None:
        self._gateway = gateway
        self._before_fetch = before_fetch

    def fetch(self, name: str) -> Any:
        self._before_fetch(name)
        return self._gateway.fetch(name)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._gateway, attribute)


def submit(gateway: GeminiGateway, ledger: Ledger, count_: int, kind: str = COUNTED) -> list[str]:
    """`count_` one-row batches in the simulator, each registered in the ledger."""

    def one(index: int) -> str:
        name = gateway.create_batch(MODEL, [(f"f{index}.md", "text")], display_name=f"t{index}")
        ledger.operations.register(
            name, kind, {"repo": "o/r", "sha": f"s{index}", "paths": [f"f{index}.md"]}
        )
        return name

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(count_)))


def claimed_then_died(ledger: Ledger, tag: str, context: dict[str, Any] | None = None) -> None:
    """The push's claim, as its worker took it before the create; its lease ended now."""
    now = system_clock()
    ledger.submissions.claim(
        tag, delivery_id="d", attempt="dead-run", lease_until=now, now=now, context=context
    )


def counting_listing(gateway: GeminiGateway) -> list[str]:
    """Wrap `gateway.list_batches`: the returned list gets the tag of every batch listed."""
    listed: list[str] = []
    original = gateway.list_batches

    def listing(page_size: int = 100) -> Iterator[Any]:
        for batch in original(page_size):
            listed.append(batch.display_name)
            yield batch

    gateway.list_batches = listing  # type: ignore[method-assign]
    return listed


def complete(simulator: Any, names: list[str], state: str = "succeeded", webhook: str = "drop"):
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: simulator.control.complete(name, state, webhook=webhook), names))


@pytest.fixture
def ledger(firestore_client: Any) -> Ledger:
    return Ledger(firestore_client, grace=timedelta(0))


# ----------------------------------------------------------------------- acceptance


@pytest.mark.slow
def test_reconcile_settles_every_operation_whose_webhook_was_dropped(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    names = submit(gateway, ledger, 100)
    dropped, sent = names[:30], names[30:]
    complete(simulator, dropped, webhook="drop")
    complete(simulator, sent, webhook="send")
    # The worker's path for the webhooks that did arrive (a hint: re-fetch, then settle).
    received = simulator.receiver.wait_for(70, timeout=20)
    for item in received:
        name = json.loads(item.body)["data"]["id"]
        settle_from_gemini(ledger, gateway, name, "webhook")

    report = make_reconciler(ledger, gateway).run()

    ops = statuses(ledger, names)
    assert all(op.status == "succeeded" for op in ops.values()), report
    assert {name for name, op in ops.items() if op.settled_by == "reconcile"} == set(dropped)
    assert {name for name, op in ops.items() if op.settled_by == "webhook"} == set(sent)
    assert report.settled == 30 and report.errors == 0
    assert count(firestore_client, "writebacks") == 100  # each write-back exactly once
    # A second run finds nothing due: it reads no page of operations.
    again = make_reconciler(ledger, gateway).run()
    assert (again.examined, again.settled, again.pages) == (0, 0, 0)


@pytest.mark.slow
def test_webhook_and_reconcile_racing_settle_each_operation_once(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    outcomes: list[str] = []
    lock = threading.Lock()
    total: list[str] = []
    for _round in range(3):
        names = submit(gateway, ledger, 20)
        total += names
        complete(simulator, names)
        reports: list[RunReport] = []

        def webhook(name: str) -> None:
            result = settle_from_gemini(ledger, gateway, name, "webhook").result
            with lock:
                outcomes.append(result)

        def reconcile(reports: list[RunReport] = reports) -> None:
            reports.append(make_reconciler(ledger, gateway).run())

        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(reconcile), pool.submit(reconcile)]
            futures += [pool.submit(webhook, name) for name in names]
            for future in futures:
                future.result()
        won_by_webhook = outcomes.count("settled")
        won_by_reconcile = sum(report.settled for report in reports)
        assert sum(report.errors for report in reports) == 0
        assert won_by_webhook + won_by_reconcile == len(names)
        outcomes.clear()
    ops = statuses(ledger, total)
    assert all(op.status == "succeeded" and op.settled_by for op in ops.values())
    assert count(firestore_client, "writebacks") == len(total)


def test_gemini_503s_never_settle_wrongly_and_all_settle_once_faults_stop(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any
) -> None:
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    names = submit(gateway, ledger, 40)
    succeeded, failed, running = names[:20], names[20:30], names[30:]
    complete(simulator, succeeded, "succeeded")
    complete(simulator, failed, "failed")
    simulator.control.set_faults(0.3, status=503, seed=7)
    reconciler = make_reconciler(ledger, gateway, clock, adopt_orphans=False)

    faulty = reconciler.run()
    assert faulty.unavailable > 0, faulty
    ops = statuses(ledger, names)
    for name in running:
        assert ops[name].pending and ops[name].attempts == 1
    for name in succeeded + failed:
        expected = "succeeded" if name in succeeded else "failed"
        assert ops[name].status in ("pending", expected)
        if ops[name].pending:  # a failed poll: deferred, never settled from the error
            assert ops[name].attempts == 1 and ops[name].next_check_at > clock()

    simulator.control.set_faults(0.0)
    clock.advance(BACKOFF_CAP_S + 1)
    healed = reconciler.run()
    ops = statuses(ledger, names)
    assert healed.errors == 0
    assert all(ops[n].status == "succeeded" for n in succeeded)
    assert all(ops[n].status == "failed" and ops[n].error for n in failed)
    assert all(ops[n].pending and ops[n].attempts == 2 for n in running)
    assert count(firestore_client, "writebacks") == 30


def stuck_alerts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    return [f for f in fields if f.get("alert") == "operation_stuck"]


def test_stuck_operation_alerts_once_per_window_and_stays_pending(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger")
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    (name,) = submit(gateway, ledger, 1)
    stuck_after = 6 * 3600
    reconciler = make_reconciler(ledger, gateway, clock, adopt_orphans=False)

    reconciler.run()  # young: no alert
    assert stuck_alerts(caplog) == []
    clock.advance(stuck_after + 1)
    with ThreadPoolExecutor(2) as pool:  # two overlapping runs: still one alert
        list(pool.map(lambda _: reconciler.run(), range(2)))
    for _ in range(3):  # later runs in the same window: none
        clock.advance(BACKOFF_CAP_S + 1)
        reconciler.run()
    alerts = stuck_alerts(caplog)
    assert len(alerts) == 1
    assert alerts[0]["operation"] == name and alerts[0]["kind"] == COUNTED
    assert alerts[0]["age_s"] >= stuck_after
    clock.advance(stuck_after)  # the next window
    reconciler.run()
    assert len(stuck_alerts(caplog)) == 2
    assert ledger.operations.get(name).pending  # type: ignore[union-attr]


def test_orphan_with_our_tag_is_adopted_and_settled_untagged_is_left_alone(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    tag = review_tag("octo/docs", "abc123")
    claimed_then_died(ledger, tag, {"repo": "octo/docs", "sha": "abc123"})  # as with the record
    ours = gateway.create_batch(MODEL, [("docs/a.md", "x"), ("docs/b.md", "y")], display_name=tag)
    theirs = gateway.create_batch(MODEL, [("c.md", "z")], display_name="someone-else")
    complete(simulator, [ours, theirs])

    report = make_reconciler(ledger, gateway, past_min_age).run()

    assert report.adopted == 1 and report.settled == 1, report
    adopted = ledger.operations.get(ours)
    assert adopted is not None and adopted.status == "succeeded"
    assert adopted.settled_by == "reconcile" and adopted.kind == REVIEW_KIND
    assert adopted.context == {
        "repo": "octo/docs",
        "sha": "abc123",
        "paths": ["docs/a.md", "docs/b.md"],
    }
    reviews = {
        d.get("path"): d
        for d in (s.to_dict() for s in firestore_client.collection("reviews").stream())
    }
    assert set(reviews) == {"docs/a.md", "docs/b.md"} and all("text" in d for d in reviews.values())
    assert ledger.operations.get(theirs) is None


def test_a_batch_younger_than_the_minimum_age_is_not_adopted_yet(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger
) -> None:
    tag = review_tag("o/r", "y")
    now = system_clock()
    context = {"repo": "o/r", "sha": "y", "paths": ["docs/a.md"]}  # as a push's claim holds
    ledger.submissions.claim(
        tag, delivery_id="d", attempt="dead-run", lease_until=now, now=now, context=context
    )
    young = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=tag)

    now_report = make_reconciler(ledger, gateway).run()  # its creator may be mid-register

    assert now_report.adopted == 0 and ledger.operations.get(young) is None, now_report
    later = make_reconciler(ledger, gateway, past_min_age).run()
    assert later.adopted == 1 and ledger.operations.get(young) is not None, later


def test_adoption_asks_the_push_submission_who_won(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger
) -> None:
    """The winner is registered with the push's own context (refused files included); a
    second batch for the push is superseded and cancelled, never adopted or settled."""
    tag = review_tag("o/r", "s7")
    context = {
        "repo": "o/r",
        "sha": "s7",
        "paths": ["docs/a.md"],
        "refused": [{"path": "x.md", "error": "404"}],
    }
    now = system_clock()
    ledger.submissions.claim(
        tag, delivery_id="d", attempt="dead-run", lease_until=now, now=now, context=context
    )
    first = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=tag)
    second = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=tag)

    report = make_reconciler(ledger, gateway, past_min_age).run()

    winner, loser = (
        (first, second) if ledger.submissions.get(tag).operation == first else (second, first)
    )
    assert report.adopted == 1, report
    assert ledger.operations.get(winner).context == context  # type: ignore[union-attr]
    superseded = ledger.operations.get(loser)
    assert superseded is not None and superseded.status == "superseded"
    assert superseded.superseded_by == winner and superseded.writeback_done
    client = simulator.genai()  # held: a client dropped mid-call closes its transport
    wait_until(
        lambda: client.batches.get(name=loser).state.value == "JOB_STATE_CANCELLED",
        10,
        "Gemini reports the superseded batch cancelled",
        every=0.05,
    )
    assert client.batches.get(name=winner).state.value == "JOB_STATE_PENDING"


def test_an_orphan_of_a_cli_submitted_kind_is_adopted_as_that_kind(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger
) -> None:
    """A generic kind's batch whose submission is open is adopted with the generic
    behaviour (`hookledger submit` itself claims none: see shared/reconcile/adoption.py)."""
    tag = kinds.generic("nightly-eval").make_tag("1f2e3d4c5b6a")  # as `hookledger submit` tags
    claimed_then_died(ledger, tag)
    claimed_then_died(ledger, "hookledger:review:no-at")
    orphan = gateway.create_batch(MODEL, [("q1", "x")], display_name=tag)
    unknown_tag = gateway.create_batch(MODEL, [("q2", "y")], display_name="hookledger:review:no-at")
    complete(simulator, [orphan, unknown_tag])

    report = make_reconciler(ledger, gateway, past_min_age).run()

    adopted = ledger.operations.get(orphan)
    assert adopted is not None and report.adopted == 1, report
    assert (adopted.kind, adopted.status, adopted.settled_by) == (
        "nightly-eval",
        "succeeded",
        "reconcile",
    )
    assert adopted.context["display_name"] == tag
    assert ledger.operations.get(unknown_tag) is None  # a review tag without repo@sha is left alone


def test_an_orphan_adopted_while_running_still_gets_its_reviews(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    tag = review_tag("o/r", "s2")
    now = system_clock()
    context = {"repo": "o/r", "sha": "s2", "paths": ["docs/a.md"]}  # as the push's claim holds
    ledger.submissions.claim(
        tag, delivery_id="d", attempt="dead-run", lease_until=now, now=now, context=context
    )
    running = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=tag)
    first = make_reconciler(ledger, gateway, past_min_age).run()
    assert first.adopted == 1 and first.still_running == 1, first

    complete(simulator, [running])
    ledger.operations.defer(running, system_clock() - timedelta(seconds=1), 1)  # due again now
    second = make_reconciler(ledger, gateway, past_min_age).run()

    assert second.settled == 1, second
    [review_doc] = [s.to_dict() for s in firestore_client.collection("reviews").stream()]
    assert review_doc["path"] == "docs/a.md" and "text" in review_doc


def test_a_running_orphan_whose_files_nobody_knows_waits_for_its_rows(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    """No claim names its files and a running batch has no rows: it is not registered
    half (no paths: rows that echo no key could not be placed), but once its rows name
    its files it is adopted and settled with them."""
    claimed_then_died(ledger, review_tag("o/r", "s3"))  # a claim from before claims named files
    running = gateway.create_batch(
        MODEL, [("docs/a.md", "x")], display_name=review_tag("o/r", "s3")
    )
    first = make_reconciler(ledger, gateway, past_min_age).run()
    assert first.adopted == 0 and ledger.operations.get(running) is None, first

    complete(simulator, [running])
    second = make_reconciler(ledger, gateway, past_min_age).run()

    assert second.adopted == 1 and second.settled == 1, second
    [review_doc] = [s.to_dict() for s in firestore_client.collection("reviews").stream()]
    assert review_doc["path"] == "docs/a.md" and "text" in review_doc


def test_run_reports_progress_for_every_checked_operation(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    names = submit(gateway, ledger, 12)
    complete(simulator, names)
    calls: list[tuple[str, int, int]] = []

    report = make_reconciler(ledger, gateway).run(
        progress=lambda phase, done, total: calls.append((phase, done, total))
    )

    assert report.settled == 12, report
    assert calls[0] == ("poll", 0, 12)
    assert sorted(done for _, done, _ in calls[1:]) == list(range(1, 13))


@pytest.mark.slow
def test_a_check_stuck_past_the_budget_is_abandoned_and_the_run_still_answers(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    [name] = submit(gateway, ledger, 1)
    ticks, release = Ticks(), threading.Event()

    def slow_gemini(_name: str) -> None:
        ticks.advance(3600)  # on the run's clock, this call outlasts budget and drain
        release.wait(timeout=30)  # and in fact it waits until the run has answered

    slow = TimedGateway(gateway, slow_gemini)
    reconciler = make_reconciler(
        ledger,
        slow,
        budget_s=0.5,
        drain_s=0.5,
        adopt_orphans=False,
        sources=Sources(monotonic=ticks),
    )
    answered: list[RunReport] = []
    runner = threading.Thread(target=lambda: answered.append(reconciler.run()))
    runner.start()
    try:
        runner.join(timeout=30)  # a liveness bound, not a timing assertion
        assert answered, "the run waited for a check past its drain time"
    finally:
        release.set()
    runner.join(timeout=30)

    assert answered[0].abandoned == 1, answered[0]
    # The abandoned check goes on alone and lands its result (still running: deferred).
    deferred = wait_until(
        lambda: (op := ledger.operations.get(name)) and op.attempts == 1 and op,
        timeout=15,
        what="the abandoned check to finish",
    )
    assert deferred.pending and deferred.next_check_at > system_clock()


def test_a_failed_video_generation_has_no_webhook_and_reconcile_settles_it_failed(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    name = "models/veo-3.0-generate-001/operations/vid-failed"
    simulator.control.create_operation(name)
    ledger.operations.register(name, "video")
    simulator.control.complete(name, state="failed", error={"code": 3, "message": "unsafe prompt"})

    report = make_reconciler(ledger, gateway).run()

    settled = ledger.operations.get(name)
    assert report.settled == 1 and settled is not None, report
    assert (settled.status, settled.settled_by) == ("failed", "reconcile")
    assert settled.error["message"] == "unsafe prompt"


def test_adoption_does_not_read_again_what_the_due_pages_just_read(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    tag = review_tag("o/r", "s3")
    claimed_then_died(ledger, tag)  # open, as if the registration were the submission's
    tagged = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=tag)
    ledger.operations.register(
        tagged, REVIEW_KIND, {"repo": "o/r", "sha": "s3", "paths": ["docs/a.md"]}
    )
    listed = counting_listing(gateway)
    looked_up: list[str] = []
    original_get = ledger.operations.get
    ledger.operations.get = lambda name: looked_up.append(name) or original_get(name)  # type: ignore[method-assign]

    report = make_reconciler(ledger, gateway, past_min_age).run()

    assert report.examined == 1 and report.adopted == 0, report
    assert listed == [tag]  # listed for the open claim, and found
    assert looked_up == []  # the due page's record served both the check and adoption


def test_with_nothing_open_a_run_lists_no_batch(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    """Intentionally different from the adoption that listed every batch: a tagged batch
    no open submission names (here: nobody claimed it) is not looked for."""
    gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=review_tag("o/r", "s4"))
    listed = counting_listing(gateway)

    report = make_reconciler(ledger, gateway, past_min_age).run()

    assert report.adopted == 0 and report.errors == 0 and listed == [], report


def test_a_listing_cut_short_keeps_the_claim_open_and_a_later_run_adopts(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    tag = review_tag("o/r", "s6")
    claimed_then_died(ledger, tag, {"repo": "o/r", "sha": "s6", "paths": ["docs/a.md"]})
    orphan = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=tag)
    complete(simulator, [orphan])
    listing = gateway.list_batches

    def failing_listing(page_size: int = 100) -> Iterator[Any]:
        yield from []
        raise GeminiError("list batches: 503 from the simulator")

    gateway.list_batches = failing_listing  # type: ignore[method-assign]
    cut = make_reconciler(ledger, gateway, past_min_age).run()
    assert cut.errors == 1 and cut.adopted == 0, cut
    assert [c.tag for c in ledger.submissions.open_claims(past_min_age(), 10)] == [tag]

    gateway.list_batches = listing  # type: ignore[method-assign]
    report = make_reconciler(ledger, gateway, past_min_age).run()

    assert report.adopted == 1 and report.settled == 1, report


@pytest.mark.parametrize(
    ("state", "status"),
    [("failed", "failed"), ("cancelled", "cancelled"), ("expired", "succeeded")],
)
def test_reconcile_settles_an_ended_interaction(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any, state, status
) -> None:
    # The simulator's `expired` interaction reports `incomplete`: completed, results incomplete.
    name = f"interactions/int-{state}"
    simulator.control.create_operation(name)
    ledger.operations.register(name, "interaction")
    simulator.control.complete(name, state=state, webhook="drop")

    report = make_reconciler(ledger, gateway).run()

    settled = ledger.operations.get(name)
    assert report.settled == 1 and (settled.status, settled.settled_by) == (status, "reconcile")


def test_an_incomplete_interaction_settles_succeeded_flagged_with_its_output_written_back(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger
) -> None:
    name = "interactions/int-partial-answer"
    simulator.control.create_operation(name)
    ledger.operations.register(name, REVIEW_KIND, {"repo": "octo/docs", "sha": "i1"})
    simulator.control.set_interaction_status(
        name, "incomplete", webhook="drop", output_text="what there is"
    )

    assert make_reconciler(ledger, gateway, adopt_orphans=False).run().settled == 1

    settled = ledger.operations.get(name)
    assert settled is not None
    assert (settled.status, settled.outcome) == ("succeeded", {"incomplete": True})
    (review,) = Reviews(ledger).reviews_for(name)
    assert (review["path"], review["status"], review["text"]) == (name, "ok", "what there is")


def waiting_alerts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    return [f for f in fields if f.get("alert") == "operation_waiting"]


@pytest.mark.parametrize(
    ("status", "waits"),
    [
        ("requires_action", "tool result"),
        ("requires_continuation", "continuation_token"),
        ("idle", "new turn"),
    ],
)
def test_an_interaction_waiting_on_its_caller_alerts_once_per_window_and_stays_pending(
    simulator: Any,
    gateway: GeminiGateway,
    firestore_client: Any,
    caplog: pytest.LogCaptureFixture,
    status: str,
    waits: str,
) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger")
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    name = f"interactions/int-waits-{status}-{uuid.uuid4().hex[:6]}"
    simulator.control.create_operation(name)
    ledger.operations.register(name, "interaction")
    simulator.control.set_interaction_status(name, status, webhook="drop")
    window = 6 * 3600
    reconciler = make_reconciler(ledger, gateway, clock, adopt_orphans=False)

    first = reconciler.run()
    for _ in range(3):  # later runs in the same window: no second alert
        clock.advance(BACKOFF_CAP_S + 1)
        reconciler.run()

    alerts = waiting_alerts(caplog)
    assert first.waiting_alerts == 1 and len(alerts) == 1, status
    assert alerts[0]["operation"] == name and waits in alerts[0]["waits_for"], status
    clock.advance(window)  # the next window
    reconciler.run()
    assert len(waiting_alerts(caplog)) == 2
    record = ledger.operations.get(name)
    assert record is not None and record.pending
    assert waits in record.checks[-1]["answer"]


def gone_alerts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    return [f for f in fields if f.get("alert") == "operation_gone"]


def test_a_batch_deleted_at_gemini_settles_failed_gone_on_a_second_404_an_interval_later(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="hookledger")
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    name = gateway.create_batch(MODEL, [("a.md", "A"), ("b.md", "B")], display_name="gone")
    ledger.operations.register(
        name, REVIEW_KIND, {"repo": "octo/docs", "sha": "g1", "paths": ["a.md", "b.md"]}
    )
    simulator.control.delete_batch(name)
    reconciler = make_reconciler(ledger, gateway, clock, adopt_orphans=False)

    first = reconciler.run()
    seen = ledger.operations.get(name)
    assert (first.not_found, first.settled) == (1, 0)
    assert seen is not None and seen.pending and seen.not_found_at == clock()
    assert seen.next_check_at is not None
    assert seen.next_check_at - clock() >= timedelta(seconds=30)  # one check interval
    assert gone_alerts(caplog) == []

    clock.advance(30)
    second = reconciler.run()

    settled = ledger.operations.get(name)
    assert second.settled == 1
    assert settled is not None and settled.status == "failed"
    assert settled.error["reason"] == "gone" and "404" in settled.error["message"]
    reviews = Reviews(ledger).reviews_for(name)
    assert [(r["path"], r["status"]) for r in reviews] == [("a.md", "error"), ("b.md", "error")]
    assert all("gone" in r["error"] for r in reviews)
    assert [a["operation"] for a in gone_alerts(caplog)] == [name]


def test_one_404_and_then_an_answer_is_forgotten_and_never_settles(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, scripted_gemini: dict[str, Any]
) -> None:
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    (name,) = submit(gateway, ledger, 1)
    missing = {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}
    scripted_gemini["script"] = {name: [(404, missing)]}
    reconciler = make_reconciler(ledger, scripted_gemini["gateway"], clock, adopt_orphans=False)

    assert reconciler.run().not_found == 1
    clock.advance(BACKOFF_CAP_S + 1)
    assert reconciler.run().still_running == 1  # Gemini knows it again: the 404 is forgotten

    record = ledger.operations.get(name)
    assert record is not None and record.pending and record.not_found_at is None


def test_a_webhook_that_meets_a_404_never_settles_on_that_one_sight(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any
) -> None:
    from shared.gemini import GeminiNotFound
    from shared.settlement.settler import Settler

    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    (name,) = submit(gateway, ledger, 1)
    simulator.control.delete_batch(name)
    settler = Settler(ledger, gateway, clock=clock, gone_after=timedelta(seconds=30))

    with pytest.raises(GeminiNotFound) as first:
        settler.settle(name, "webhook")
    clock.advance(10)  # a redelivery soon after: still not an interval apart
    with pytest.raises(GeminiNotFound):
        settler.settle(name, "webhook")

    record = ledger.operations.get(name)
    assert record is not None and record.pending and first.value.recheck_after_s == 30
    clock.advance(20)
    assert settler.settle(name, "webhook").status == "failed"


def test_a_partially_succeeded_batch_settles_succeeded_recorded_partial(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger
) -> None:
    name = gateway.create_batch(MODEL, [("a.md", "A"), ("b.md", "B")], display_name="partial")
    ledger.operations.register(
        name, REVIEW_KIND, {"repo": "octo/docs", "sha": "p1", "paths": ["a.md", "b.md"]}
    )
    simulator.control.complete(name, "partially_succeeded", webhook="drop")

    assert make_reconciler(ledger, gateway, adopt_orphans=False).run().settled == 1

    settled = ledger.operations.get(name)
    assert settled is not None
    assert (settled.status, settled.outcome) == ("succeeded", {"partial": True})
    assert [r["status"] for r in Reviews(ledger).reviews_for(name)] == ["ok", "error"]


def test_a_running_interaction_is_left_pending(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    simulator.control.create_operation("interactions/int-running")
    ledger.operations.register("interactions/int-running", "interaction")

    report = make_reconciler(ledger, gateway).run()

    assert report.still_running == 1 and ledger.operations.get("interactions/int-running").pending


def test_a_tagged_batch_older_than_the_orphan_window_is_not_read(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    claimed_then_died(ledger, review_tag("o/r", "s1"))  # its holder died days ago
    old = gateway.create_batch(MODEL, [("docs/a.md", "x")], display_name=review_tag("o/r", "s1"))
    complete(simulator, [old])
    later = system_clock() + ORPHAN_WINDOW + timedelta(hours=1)

    report = make_reconciler(ledger, gateway, clock=lambda: later).run()

    assert report.adopted == 0 and report.errors == 0, report
    assert ledger.operations.get(old) is None


def test_run_stops_within_its_budget_and_the_next_run_finishes(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    names = submit(gateway, ledger, 40)
    complete(simulator, names)
    ticks = Ticks()
    costly = TimedGateway(gateway, lambda _name: ticks.advance(1.0))  # 1 s per Gemini call
    short = make_reconciler(
        ledger,
        costly,
        concurrency=1,
        budget_s=10.5,
        adopt_orphans=False,
        sources=Sources(monotonic=ticks),
    )

    first = short.run()

    # One check at a time, each starting before t = 10.5: those at t = 0, 1, ..., 10.
    assert first.stopped_early and first.stopped_at == "poll", first
    assert (first.examined, first.settled) == (11, 11), first
    second = make_reconciler(ledger, gateway).run()
    assert second.settled == 40 - first.settled and not second.stopped_early
    assert count(firestore_client, "writebacks") == 40


def test_a_run_that_spent_its_budget_still_sweeps_the_outbox(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    ledger.operations.register("batches/unsent", "k")
    ledger.settle("batches/unsent", "succeeded", "webhook", outbox=[{"n": 1}])
    names = submit(gateway, ledger, 5)
    complete(simulator, names)
    ticks = Ticks()
    costly = TimedGateway(gateway, lambda _name: ticks.advance(1.0))  # 1 s per Gemini call
    delivered: list[str] = []
    reconciler = make_reconciler(
        ledger,
        costly,
        concurrency=1,
        budget_s=2.5,
        sweep_budget_s=5,
        adopt_orphans=False,
        sources=Sources(monotonic=ticks),
        deliver=lambda item: delivered.append(item.idempotency_key),
    )

    report = reconciler.run()

    assert report.stopped_early and report.stopped_at == "poll", report
    assert (report.settled, report.swept) == (3, 1), report
    assert delivered == ["batches%2Funsent:0"]
    unsent = ledger.operations.get("batches/unsent")
    assert unsent is not None and unsent.writeback_done and unsent.expire_at is not None


def test_overlapping_runs_settle_each_operation_once(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    names = submit(gateway, ledger, 30)
    complete(simulator, names)
    with ThreadPoolExecutor(3) as pool:
        reports = list(pool.map(lambda _: make_reconciler(ledger, gateway).run(), range(3)))
    assert sum(r.settled for r in reports) == 30
    assert sum(r.errors for r in reports) == 0
    assert count(firestore_client, "writebacks") == 30


# ----------------------------------------------------------------------- fan-out


def register_many(ledger: Ledger, total: int) -> list[str]:
    with ThreadPoolExecutor(8) as pool:
        return list(
            pool.map(
                lambda i: ledger.operations.register(f"batches/fan{i:04d}", COUNTED).name,
                range(total),
            )
        )


def test_many_due_operations_are_fanned_out_in_pages_with_stable_task_ids(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    names = register_many(ledger, 310)
    calls: list[tuple[list[str], str]] = []

    def enqueue(page: list[Operation], task_id: str) -> None:
        calls.append(([op.name for op in page], task_id))

    clock = FakeClock(system_clock())
    fan = make_reconciler(
        ledger,
        gateway,
        clock,
        page_size=100,
        fanout_threshold=150,
        enqueue_page=enqueue,
        adopt_orphans=False,
    )
    report = fan.run()

    assert report.fanned_out_pages == 4 and report.fanned_out_ops == 310 and report.examined == 0
    assert sorted(n for page, _ in calls for n in page) == sorted(names)
    assert [len(page) for page, _ in calls] == [100, 100, 100, 10]
    first_ids = [task_id for _, task_id in calls]
    assert len(set(first_ids)) == 4
    calls.clear()
    fan.run()  # an overlapping run in the same window names the same tasks: no doubles
    assert [task_id for _, task_id in calls] == first_ids
    assert all(ledger.operations.get(n).pending for n in names[:5])  # type: ignore[union-attr]


def test_check_names_settles_a_page_through_the_same_path(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger, firestore_client: Any
) -> None:
    names = submit(gateway, ledger, 12)
    complete(simulator, names[:10])
    body = page_payload([ledger.operations.get(n) for n in names])  # type: ignore[misc]
    reconciler = make_reconciler(ledger, gateway)

    report = reconciler.check_names([*page_names(body), "batches/never-registered"])

    assert (report.settled, report.still_running, report.unknown) == (10, 2, 1), report
    assert all(ledger.operations.get(n).settled_by == "reconcile" for n in names[:10])  # type: ignore[union-attr]
    again = reconciler.check_names(names[:10])
    assert again.already_settled == 10 and again.settled == 0


# ----------------------------------------------------------------------- through Cloud Tasks


@pytest.fixture
def check_page_worker(firestore_client: Any, serve: Serve) -> Iterator[dict[str, Any]]:
    """A loopback stand-in for the worker's check-page endpoint: runs `check_names`."""
    state: dict[str, Any] = {"reconciler": None, "reports": [], "lock": threading.Lock()}

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                report = state["reconciler"].check_names(page_names(body))
                status = 200 if report.errors == 0 else 503
            except Exception:
                status, report = 503, None
            with state["lock"]:
                state["reports"].append(report)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    state["url"] = f"{serve(Handler).url}/check-page"
    yield state


@pytest.mark.slow
def test_fan_out_through_the_cloud_tasks_emulator_settles_every_operation_once(
    simulator: Any,
    gateway: GeminiGateway,
    ledger: Ledger,
    firestore_client: Any,
    cloudtasks_emulator_fast: Any,
    check_page_worker: dict[str, Any],
) -> None:
    names = submit(gateway, ledger, 310)
    complete(simulator, names)
    client = make_client(cloudtasks_emulator_fast.host)
    queue_path = f"projects/demo-hookledger/locations/us-central1/queues/fan-{uuid.uuid4().hex[:8]}"
    ensure_queue(client, queue_path)
    enqueue = TaskPageEnqueuer(
        TaskQueue(client, queue_path), check_page_worker["url"], lambda _id, payload: payload
    )
    worker_side = make_reconciler(ledger, gateway)
    check_page_worker["reconciler"] = worker_side
    fan = make_reconciler(
        ledger,
        gateway,
        page_size=50,
        fanout_threshold=100,
        enqueue_page=enqueue,
        adopt_orphans=False,
    )

    # The second run's pages are duplicates by name; or, once the first run's pages have left
    # fewer due than the threshold, it checks the rest itself (settled counts below).
    first, second = fan.run(), fan.run()

    assert first.fanned_out_pages == 7 and first.examined == 0, first
    assert second.errors == 0
    wait_until(
        lambda: count(firestore_client, "writebacks") >= 310,
        timeout=60,
        what="every fanned-out page to be checked",
    )
    ops = statuses(ledger, names)
    assert all(op.status == "succeeded" and op.settled_by == "reconcile" for op in ops.values())
    assert count(firestore_client, "writebacks") == 310

    def settled_by_checks() -> int:
        # The pages' check_names settle them, and the second run too when, by its time, the
        # pages had left fewer due than its fan-out threshold (it checks those itself). A
        # page's report is kept once its check_names returns, after its settling commits.
        with check_page_worker["lock"]:
            pages = sum(r.settled for r in check_page_worker["reports"] if r is not None)
        return pages + second.settled

    wait_until(lambda: settled_by_checks() >= 310, timeout=60, what="every page's report")
    assert settled_by_checks() == 310


# ----------------------------------------------------------- Gemini's error model


def quota_exhausted(retry_delay: str, quota_id: str) -> dict[str, Any]:
    """A 429 body in Gemini's shape: QuotaFailure (quota id), Help, RetryInfo."""
    return {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": quota_id, "quotaMetric": "generate_requests"}],
                },
                {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay},
            ],
        }
    }


@pytest.fixture
def scripted_gemini(simulator: Any, serve: Serve) -> Iterator[dict[str, Any]]:
    """A loopback proxy to the simulator that first answers each path's scripted errors.

    `state["script"][name]` (a resource name, whatever the API version in the path) is a
    list of `(status, body)` answered in turn, then the simulator answers;
    `state["gateway"]` reads through it with no SDK retries.
    """
    import requests

    from shared.gemini import make_client as make_genai

    state: dict[str, Any] = {"script": {}, "lock": threading.Lock()}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            name = self.path.split("?", 1)[0].lstrip("/").split("/", 1)[-1]
            with state["lock"]:
                queued = state["script"].get(name) or []
                scripted = queued.pop(0) if queued else None
            if scripted is not None:
                status, body = scripted
                payload = json.dumps(body).encode()
            else:
                answer = requests.get(simulator.url + self.path, timeout=10)
                status, payload = answer.status_code, answer.content
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    url = serve(Handler).url
    state["gateway"] = GeminiGateway(make_genai("sim-key", url, timeout_s=10, attempts=1))
    yield state


def test_a_429_with_retry_delay_moves_the_next_check_past_it(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, scripted_gemini: dict[str, Any]
) -> None:
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    limited, busy = submit(gateway, ledger, 2)
    minute_quota = "GenerateRequestsPerMinutePerProjectPerModel"
    scripted_gemini["script"] = {
        limited: [(429, quota_exhausted("120s", minute_quota))],
        busy: [(503, {"error": {"code": 503, "message": "busy"}})],
    }
    reconciler = make_reconciler(ledger, scripted_gemini["gateway"], clock, adopt_orphans=False)

    report = reconciler.run()

    assert report.unavailable == 2
    now = clock()
    after_429, after_503 = ledger.operations.get(limited), ledger.operations.get(busy)
    assert after_429 is not None and after_429.pending and after_429.next_check_at is not None
    assert after_429.next_check_at - now >= timedelta(seconds=120)
    # Without RetryInfo, the usual short backoff: the 120 s came from Gemini's answer.
    assert after_503 is not None and after_503.next_check_at is not None
    assert after_503.next_check_at - now < timedelta(seconds=120)


def test_a_per_day_quota_defers_an_hour_and_alerts(
    simulator: Any,
    gateway: GeminiGateway,
    firestore_client: Any,
    scripted_gemini: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from shared.gemini import DAILY_QUOTA_DEFER_S

    caplog.set_level(logging.ERROR, logger="hookledger")
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    (name,) = submit(gateway, ledger, 1)
    day_quota = "GenerateRequestsPerDayPerProjectPerModel"
    scripted_gemini["script"] = {name: [(429, quota_exhausted("30s", day_quota))]}

    make_reconciler(ledger, scripted_gemini["gateway"], clock, adopt_orphans=False).run()

    record = ledger.operations.get(name)
    assert record is not None and record.next_check_at is not None
    assert record.next_check_at - clock() >= timedelta(seconds=DAILY_QUOTA_DEFER_S)
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    alerts = [f for f in fields if f.get("alert") == "gemini_quota_exhausted"]
    assert [(a["operation"], a["quota_ids"]) for a in alerts] == [(name, [day_quota])]


def test_a_408_is_retried_and_the_next_run_settles(
    simulator: Any, gateway: GeminiGateway, firestore_client: Any, scripted_gemini: dict[str, Any]
) -> None:
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    (name,) = submit(gateway, ledger, 1)
    complete(simulator, [name])
    timeout = {
        "error": {"code": 408, "message": "Request timed out.", "status": "DEADLINE_EXCEEDED"}
    }
    scripted_gemini["script"] = {name: [(408, timeout)]}
    reconciler = make_reconciler(ledger, scripted_gemini["gateway"], clock, adopt_orphans=False)

    first = reconciler.run()
    assert (first.unavailable, first.settled) == (1, 0)  # retryable, not a refusal
    assert ledger.operations.get(name).pending  # type: ignore[union-attr]

    clock.advance(BACKOFF_CAP_S + 1)
    assert reconciler.run().settled == 1
    assert ledger.operations.get(name).status == "succeeded"  # type: ignore[union-attr]


def test_a_cancellation_settles_through_reconcile_when_gemini_sends_no_cancel_event(
    simulator: Any, gateway: GeminiGateway, ledger: Ledger
) -> None:
    import requests

    mode = requests.post(
        f"{simulator.url}/_sim/webhook-mode", json={"cancel_events": False}, timeout=5
    )
    assert mode.json() == {"data_id": "mixed", "cancel_events": False}
    (name,) = submit(gateway, ledger, 1)

    client = simulator.genai()  # held: a client dropped mid-call closes its transport
    client.batches.cancel(name=name)
    # Cancel is asynchronous, as in Gemini; once it took effect, no event went out for it.
    wait_until(
        lambda: client.batches.get(name=name).state.value == "JOB_STATE_CANCELLED",
        10,
        "the cancel to take effect",
        every=0.05,
    )
    assert simulator.control.deliveries(name) == []
    assert ledger.operations.get(name).pending  # type: ignore[union-attr]
    report = make_reconciler(ledger, gateway, adopt_orphans=False).run()
    assert report.settled == 1
    settled = ledger.operations.get(name)
    assert settled is not None
    assert (settled.status, settled.settled_by) == ("cancelled", "reconcile")
