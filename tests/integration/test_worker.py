"""The worker's answers, which drive Cloud Tasks: 2xx stops retries, 5xx retries, dead is 2xx."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from local.cloudtasks_emulator.oidc import KeyServer, TokenMinter
from local.processes import free_port
from shared import handlers
from shared.clock import FakeClock
from shared.config import LOCAL_ENVELOPE_KEY, Config
from shared.entrypoints.worker import Worker
from shared.envelope import Envelope, EnvelopeSealer
from shared.errors import PermanentError as TreePermanentError
from shared.errors import TransientError
from shared.gemini import GeminiNotFound, GeminiUnavailable
from shared.handler_context import ClientFactories, HandlerContext
from shared.handlers import Done, PermanentError, RetryableError, handler
from shared.ledger import Ledger
from shared.oidc import OidcVerifier

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
    assert ledger.get_delivery("github", "d-1").status == "done"


def test_a_retryable_failure_is_503_until_the_retry_limit_then_dead_with_an_alert(worker, caplog):
    worker, ledger = worker

    @handler("github", "issues")
    def flaky(event, ctx):
        raise RetryableError("upstream 503 for issue 7")

    caplog.set_level(logging.ERROR, logger="hookledger")
    early = post(worker, sealed("issues", "d-2"), retry_count=2)
    assert early.status == 503
    assert ledger.get_delivery("github", "d-2").status == "queued"
    assert "upstream 503" in ledger.get_delivery("github", "d-2").last_error

    late = post(worker, sealed("issues", "d-2"), retry_count=3)
    assert (late.status, late.body["status"]) == (200, "dead")
    dead = ledger.get_delivery("github", "d-2")
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
    assert ledger.get_delivery("github", "d-3").status == "queued"


def test_a_permanent_failure_is_recorded_dead_and_answered_200(worker):
    worker, ledger = worker

    @handler("github", "issues")
    def malformed(event, ctx):
        raise PermanentError("issue payload has no number")

    reply = post(worker, sealed("issues", "d-4"))

    assert (reply.status, reply.body["status"]) == (200, "dead")
    assert ledger.get_delivery("github", "d-4").last_error == "issue payload has no number"


def test_an_event_without_a_handler_is_recorded_ignored(worker):
    worker, ledger = worker
    reply = post(worker, sealed("star", "d-5"))
    assert (reply.status, reply.body["status"]) == (200, "ignored")
    assert ledger.get_delivery("github", "d-5").status == "ignored"


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
    delivery = ledger.get_delivery("github", f"tree-{name}")
    assert delivery.status == recorded, name
    assert str(error) in delivery.last_error, name


def test_handlers_receive_the_typed_context_the_worker_was_given(firestore_client, registry):
    ledger = Ledger(firestore_client)
    config = Config(review_path="docs")
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
        claims=client("claims"),
        comments=client("comments"),
    )
    context = HandlerContext(config, factories, clock=clock)
    worker = Worker(
        config, sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY]), ledger=ledger, context=context
    )
    seen: list[object] = []

    @handler("github", "issues")
    def on_issue(event, ctx: HandlerContext):
        seen.extend([ctx.config.review_path, ctx.clock(), ctx.gemini, ctx.gemini, ctx.ledger])
        return Done("read the context")

    reply = post(worker, sealed("issues", "ctx-1"))

    assert (reply.status, reply.body["status"]) == (200, "done")
    assert seen == ["docs", clock.now, "gemini-client", "gemini-client", ledger]
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
    assert ledger.get_delivery("github", "d-6") is None  # nothing written by refused calls

    ok = post(guarded, body, Authorization=f"Bearer {minter.mint(TASKS, AUDIENCE)}")
    assert (ok.status, ok.body["status"]) == (200, "ignored")
