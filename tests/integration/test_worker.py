"""The worker's answers, which drive Cloud Tasks: 2xx stops retries, 5xx retries, dead is 2xx."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.cloudtasks_emulator.oidc import KeyServer, TokenMinter
from local.fakes import FakeClock
from local.processes import free_port
from shared import handlers
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.crashpoints import Crashed, crashing_at
from shared.entrypoints.worker import Worker
from shared.errors import PermanentError as TreePermanentError
from shared.errors import TransientError
from shared.gemini import GeminiNotFound, GeminiUnavailable
from shared.handlers import Attempt, Done, Event, PermanentError, RetryableError, handler
from shared.handlers.context import ClientFactories, HandlerContext
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.ledger import Ledger
from shared.signatures.oidc import OidcVerifier

TASKS = "tasks@demo-hookledger.iam.gserviceaccount.com"
AUDIENCE = "http://127.0.0.1:8081/"


@pytest.fixture
def registry() -> Iterator[None]:
    saved = handlers.snapshot()
    yield
    handlers.restore(saved)


@pytest.fixture
def worker(firestore_client, registry) -> tuple[Worker, Ledger]:
    ledger = Ledger(firestore_client)
    config = Config(worker_max_retries=3)
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
    return Worker(config, sealer=sealer, ledger=ledger, services=lambda name: None), ledger


def sealed(event: str, delivery_id: str, body: bytes = b'{"ok": true}') -> bytes:
    envelope = Envelope("github", event, delivery_id, datetime.now(UTC), {}, body)
    return EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)


def post(worker: Worker, body: bytes, retry_count: int = 0, **headers: str):
    return worker.handle(
        "POST", "/", {"X-CloudTasks-TaskRetryCount": str(retry_count), **headers}, body
    )


def test_done_then_the_same_delivery_again_is_a_duplicate_and_the_handler_runs_once(worker):
    worker, ledger = worker
    calls: list[str] = []

    @handler("github", "issues")
    def on_issue(event, ctx):
        calls.append(event.delivery_id)
        return Done("labelled")

    first = post(worker, sealed("issues", "d-1"))
    second = post(worker, sealed("issues", "d-1"))

    assert (first.status, first.body["status"]) == (200, "done")
    assert (second.status, second.body["status"]) == (200, "duplicate")
    assert calls == ["d-1"]
    assert ledger.deliveries.get("github", "d-1").status == "done"


def test_a_retryable_failure_is_503_until_the_retry_limit_then_dead_with_an_alert(worker, caplog):
    worker, ledger = worker

    @handler("github", "issues")
    def flaky(event, ctx):
        raise RetryableError("upstream 503 for issue 7")

    caplog.set_level(logging.ERROR, logger="hookledger")
    early = post(worker, sealed("issues", "d-2"), retry_count=2)
    assert early.status == 503
    assert ledger.deliveries.get("github", "d-2").status == "queued"
    assert "upstream 503" in ledger.deliveries.get("github", "d-2").last_error

    late = post(worker, sealed("issues", "d-2"), retry_count=3)
    assert (late.status, late.body["status"]) == (200, "dead")
    dead = ledger.deliveries.get("github", "d-2")
    assert dead.status == "dead" and "gave up after 3 retries" in dead.last_error
    alerts = [
        r
        for r in caplog.records
        if getattr(r, "hookledger_fields", {}).get("alert") == "delivery_dead"
    ]
    assert len(alerts) == 1 and alerts[0].hookledger_fields["delivery_id"] == "d-2"


def test_an_unexpected_exception_retries_like_a_retryable_one(worker):
    worker, ledger = worker

    @handler("github", "issues")
    def broken(event, ctx):
        raise KeyError("surprise")

    assert post(worker, sealed("issues", "d-3")).status == 503
    assert ledger.deliveries.get("github", "d-3").status == "queued"


def test_a_permanent_failure_is_recorded_dead_and_answered_200(worker):
    worker, ledger = worker

    @handler("github", "issues")
    def malformed(event, ctx):
        raise PermanentError("issue payload has no number")

    reply = post(worker, sealed("issues", "d-4"))

    assert (reply.status, reply.body["status"]) == (200, "dead")
    assert ledger.deliveries.get("github", "d-4").last_error == "issue payload has no number"


def test_an_event_without_a_handler_is_recorded_ignored(worker):
    worker, ledger = worker
    reply = post(worker, sealed("star", "d-5"))
    assert (reply.status, reply.body["status"]) == (200, "ignored")
    assert ledger.deliveries.get("github", "d-5").status == "ignored"


# (name, what the handler raises, expected status, expected delivery status)
ERROR_TREE_CASES = [
    ("raw-transient", TransientError("firestore contention on op 9"), 503, "queued"),
    ("raw-permanent", TreePermanentError("op 9 has no kind"), 200, "dead"),
    ("gemini-unavailable", GeminiUnavailable("batches/9: 503"), 503, "queued"),
    ("gemini-not-found", GeminiNotFound("batches/9 not found"), 200, "dead"),
]


@pytest.mark.parametrize(
    ("name", "error", "status", "recorded"), [pytest.param(*c, id=c[0]) for c in ERROR_TREE_CASES]
)
def test_the_error_tree_decides_retry_or_dead(worker, name, error, status, recorded):
    worker, ledger = worker

    @handler("github", "issues")
    def failing(event, ctx):
        raise error

    reply = post(worker, sealed("issues", f"tree-{name}"))

    assert reply.status == status, name
    delivery = ledger.deliveries.get("github", f"tree-{name}")
    assert delivery.status == recorded, name
    assert str(error) in delivery.last_error, name


def test_handlers_receive_the_typed_context_the_worker_was_given(firestore_client, registry):
    ledger = Ledger(firestore_client)
    config = Config(worker_max_retries=7)
    clock = FakeClock()
    built: list[str] = []

    def client(name: str):
        def build():
            built.append(name)
            return f"{name}-client"

        return build

    factories = ClientFactories(
        ledger=lambda: ledger,
        firestore=client("firestore"),
        gemini=client("gemini"),
        github=client("github"),
        tasks=client("tasks"),
        payloads=client("payloads"),
        comments=client("comments"),
    )
    context = HandlerContext(config, factories, clock=clock)
    worker = Worker(
        config, sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]), ledger=ledger, context=context
    )
    seen: list[object] = []

    @handler("github", "issues")
    def on_issue(event, ctx: HandlerContext):
        seen.extend(
            [ctx.config.worker_max_retries, ctx.clock(), ctx.gemini, ctx.gemini, ctx.ledger]
        )
        return Done("read the context")

    reply = post(worker, sealed("issues", "ctx-1"))

    assert (reply.status, reply.body["status"]) == (200, "done")
    assert seen == [7, clock.now, "gemini-client", "gemini-client", ledger]
    assert built == ["gemini"]  # only what the handler used, once


@pytest.fixture(scope="module")
def key_server() -> Iterator[tuple[TokenMinter, str]]:
    minter, port = TokenMinter(), free_port()
    server = KeyServer(minter, "127.0.0.1", port)
    server.start()
    yield minter, f"http://127.0.0.1:{port}/jwks.json"
    server.stop()


def test_the_worker_checks_the_token_and_pins_the_caller(worker, key_server):
    _, ledger = worker
    minter, jwks = key_server
    guarded = Worker(
        Config(),
        sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]),
        ledger=ledger,
        services=lambda name: None,
        oidc=OidcVerifier(AUDIENCE, jwks, TASKS),
    )
    body = sealed("star", "d-6")

    cases = [
        ("no token", {}, 401),
        (
            "wrong audience",
            {"Authorization": f"Bearer {minter.mint(TASKS, 'http://elsewhere/')}"},
            401,
        ),
        (
            "another account",
            {"Authorization": f"Bearer {minter.mint('evil@x.iam.gserviceaccount.com', AUDIENCE)}"},
            403,
        ),
    ]
    for name, headers, status in cases:
        assert post(guarded, body, **headers).status == status, name
    assert ledger.deliveries.get("github", "d-6") is None  # nothing written by refused calls

    ok = post(guarded, body, Authorization=f"Bearer {minter.mint(TASKS, AUDIENCE)}")
    assert (ok.status, ok.body["status"]) == (200, "ignored")


# ------------------------------------------------------------------ the delivery lease
# docs/architecture.md, "Delivery lease": one attempt runs a delivery at a time, and a
# finished delivery never moves back.


@pytest.fixture
def leased(firestore_client, registry) -> tuple[Worker, Ledger, FakeClock]:
    """A worker whose ledger runs on a fake clock: leases expire when the test says."""
    clock = FakeClock(datetime.now(UTC))
    ledger = Ledger(firestore_client, clock=clock)
    config = Config(worker_max_retries=3)
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
    worker = Worker(config, sealer=sealer, ledger=ledger, services=lambda name: None)
    return worker, ledger, clock


class Blocking:
    """A handler whose first run waits until `release` is set; later runs return at once."""

    def __init__(self, first: Callable[[], Any] = lambda: Done("first")) -> None:
        self.first = first
        self.entered = threading.Event()
        self.release = threading.Event()
        self.attempts: list[Attempt] = []

    def __call__(self, event: Event, ctx: Any) -> Any:
        self.attempts.append(event.run)
        if len(self.attempts) > 1:
            return Done("a later run")
        self.entered.set()
        assert self.release.wait(timeout=30), "the test never released the first run"
        return self.first()


def in_background(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(work()), daemon=True)
    thread.start()
    return thread, answers


def test_a_second_run_while_the_first_holds_the_lease_is_503_and_runs_nothing(leased):
    worker, ledger, clock = leased
    blocking = Blocking()
    handler("github", "issues")(blocking)
    body = sealed("issues", "overlap-1")

    first, answers = in_background(lambda: post(worker, body))
    assert blocking.entered.wait(timeout=30)
    second = post(worker, body, retry_count=1)
    blocking.release.set()
    first.join(timeout=30)
    third = post(worker, body, retry_count=2)

    assert (second.status, second.body["status"]) == (503, "busy"), second.body
    assert "another attempt" in second.body["reason"]
    assert len(blocking.attempts) == 1  # the second run's handler never ran
    assert (answers[0].status, answers[0].body["status"]) == (200, "done")
    assert (third.status, third.body["status"]) == (200, "duplicate")
    [attempt] = blocking.attempts
    assert len(attempt.id) == 32 and attempt.expires_at == clock.now + timedelta(seconds=600)
    stored = ledger.deliveries.get("github", "overlap-1")
    assert (stored.status, stored.attempts, stored.lease.attempt) == ("done", 1, attempt.id)


def _raise(error: Exception) -> Callable[[], Any]:
    def fail() -> Any:
        raise error

    return fail


# (name, how the first run ends once released late, its retry count, its answer): it ends
# after another run took the delivery over and finished it.
LATE_ENDINGS = [
    ("done", lambda: Done("late"), 0, (200, "duplicate")),
    ("queued", _raise(RetryableError("GitHub 502, late")), 0, (503, "retry")),
    ("dead past the limit", _raise(RetryableError("GitHub 502, late")), 3, (200, "duplicate")),
    ("dead for good", _raise(PermanentError("bad payload, late")), 0, (200, "duplicate")),
]


@pytest.mark.parametrize(
    ("name", "ending", "retry_count", "answer"), LATE_ENDINGS, ids=[c[0] for c in LATE_ENDINGS]
)
def test_after_the_lease_expires_a_retry_takes_over_and_the_late_run_moves_nothing(
    leased, caplog, name, ending, retry_count, answer
):
    worker, ledger, clock = leased
    blocking = Blocking(first=ending)
    handler("github", "issues")(blocking)
    body = sealed("issues", "takeover-1")
    caplog.set_level(logging.INFO, logger="hookledger")

    first, answers = in_background(lambda: post(worker, body, retry_count=retry_count))
    assert blocking.entered.wait(timeout=30)
    clock.advance(601)  # past the first run's lease (540 s timeout + 60 s margin)
    retry = post(worker, body, retry_count=retry_count + 1)
    blocking.release.set()
    first.join(timeout=30)

    assert (retry.status, retry.body["status"]) == (200, "done"), name
    assert len({a.id for a in blocking.attempts}) == 2, name
    late = answers[0]
    assert (late.status, late.body["status"]) == answer, (name, late.body)
    stored = ledger.deliveries.get("github", "takeover-1")
    assert (stored.status, stored.last_error, stored.attempts) == ("done", None, 1), name
    alerts = [r for r in caplog.records if getattr(r, "hookledger_fields", {}).get("alert")]
    assert alerts == [], name  # no false delivery_dead from the late run


def test_a_crash_after_the_lease_is_taken_holds_the_delivery_until_it_expires(leased):
    worker, ledger, clock = leased
    calls: list[str] = []

    @handler("github", "issues")
    def on_issue(event, ctx):
        calls.append(event.run.id)
        return Done("labelled")

    body = sealed("issues", "crash-1")
    with crashing_at("push.delivery.recorded"), pytest.raises(Crashed):
        post(worker, body)
    held = post(worker, body, retry_count=1)
    clock.advance(601)
    taken = post(worker, body, retry_count=2)

    assert (held.status, held.body["status"]) == (503, "busy")
    assert (taken.status, taken.body["status"]) == (200, "done")
    assert len(calls) == 1 and ledger.deliveries.get("github", "crash-1").status == "done"


def test_a_crash_before_done_runs_the_handler_again_once_the_lease_expires(leased):
    worker, ledger, clock = leased
    calls: list[str] = []

    @handler("github", "issues")
    def on_issue(event, ctx):
        calls.append(event.run.id)
        return Done("labelled")

    body = sealed("issues", "crash-2")
    with crashing_at("push.before_done") as reached, pytest.raises(Crashed):
        post(worker, body)
    assert reached == ["push.delivery.recorded", "push.before_done"]
    assert ledger.deliveries.get("github", "crash-2").status == "queued"
    clock.advance(601)
    again = post(worker, body, retry_count=1)

    assert (again.status, again.body["status"]) == (200, "done")
    assert len(calls) == 2 and calls[0] != calls[1]  # at least once, one run at a time
