"""An adopted orphan keeps the push's files (docs/architecture.md, "One winner per push").

The worker claims a push's submission with the delivery's record, before it fetches
anything. A batch whose creator died before registering it (`push.after_create`), or
whose `register_winner` failed, is registered later by another attempt or by reconcile's
adoption; either way the operation must name the files it reviews and the files that
were refused, or rows that echo no key cannot be placed, the refused files never get
their error review, and a later Re-run finds nothing to re-review.

Real parts: the Firestore emulator, the simulator through the real google-genai client,
the review pipeline, settlement and adoption.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from apps.review.kind import review_tag
from apps.review.pipeline import ReviewDeps, review_push, submission_for
from apps.review.reruns import rerun_review
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.crashpoints import Crashed, crashing_at
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Attempt, Done, RetryableError
from shared.ledger import Ledger, StoreUnavailable
from shared.reconcile.adoption import IncompleteContext, register_orphan
from shared.settlement.settler import Settler

REPO, SHA = "octo-org/handbook", "c" * 40
OWNER, NAME = REPO.split("/")
STORED = ["docs/a.md", "docs/b.md"]
MISSING = "docs/missing.md"  # never stored: the Contents API answers 404, so it is refused
LEASE = timedelta(minutes=10)


def push_body() -> bytes:
    return json.dumps(
        {
            "ref": "refs/heads/main",
            "after": SHA,
            "repository": {"full_name": REPO, "default_branch": "main"},
            "commits": [{"added": [*STORED, MISSING], "modified": [], "removed": []}],
        }
    ).encode()


@pytest.fixture
def world(simulator: Any, firestore_client: Any) -> dict[str, Any]:
    simulator.control.reset()
    for path in STORED:
        simulator.control.put_file(OWNER, NAME, path, SHA, f"# {path}\n\nText.\n".encode())
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(0))
    gateway = GeminiGateway(make_client("sim-key", simulator.url, timeout_s=5, attempts=1))
    deps = ReviewDeps(
        ledger=ledger,
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
        clock=clock,
    )
    return {"deps": deps, "ledger": ledger, "gemini": gateway, "clock": clock, "sim": simulator}


def first_run(world: dict[str, Any], delivery_id: str) -> Any:
    """The worker's first run of the push: its delivery and its submission in one commit."""
    request = submission_for(push_body(), "docs", ())
    assert request is not None
    recorded = world["ledger"].record_and_claim(
        "github",
        delivery_id,
        "push",
        json.loads(push_body()),
        attempt="run-1",
        lease_for=LEASE,
        tag=request.tag,
        context=request.context,
    )
    attempt = Attempt("run-1", world["clock"]() + LEASE)
    return lambda: review_push(
        json.loads(push_body()), delivery_id, world["deps"], attempt, claimed=recorded.claimed
    )


def adopt_the_orphan(world: dict[str, Any]) -> str:
    """Reconcile's adoption, once the dead run's lease is over."""
    world["clock"].advance((LEASE + timedelta(seconds=1)).total_seconds())
    tag = review_tag(REPO, SHA)
    [orphan] = [b for b in world["gemini"].list_batches() if b.display_name == tag]
    adopted = register_orphan(world["ledger"], world["gemini"], orphan)
    assert adopted is not None, "the orphan was not adopted"
    return adopted.name


def settle_without_keys(world: dict[str, Any], name: str) -> None:
    """Gemini answers with rows that echo no key: only the request order places them."""
    world["sim"].control.complete(name, state="succeeded", webhook="drop", echo_metadata=False)
    outcome = Settler(world["ledger"], world["gemini"], clock=world["clock"]).settle(
        name, "reconcile"
    )
    assert outcome.result == "settled", outcome


def assert_every_file_has_its_review(world: dict[str, Any], name: str) -> None:
    ledger = world["ledger"]
    record = ledger.operations.get(name)
    assert record is not None
    assert record.context.get("paths") == STORED, record.context
    assert [r["path"] for r in record.context.get("refused") or []] == [MISSING], record.context
    for path in STORED:
        review = Reviews(ledger).get_review(REPO, SHA, path)
        assert review is not None and review["status"] == "ok", (path, review)
        assert review["operation"] == name and path in review["text"], (path, review)
    refused = Reviews(ledger).get_review(REPO, SHA, MISSING)
    assert refused is not None and refused["status"] == "error", refused


def assert_a_rerun_works(world: dict[str, Any], previous: str) -> None:
    payload = {
        "action": "rerequested",
        "check_run": {"name": "hookledger review", "head_sha": SHA},
        "repository": {"full_name": REPO},
    }
    outcome = rerun_review("check_run", payload, "rerun-1", world["deps"], None)
    assert isinstance(outcome, Done), outcome
    tag = f"{review_tag(REPO, SHA)}~rerun:rerun-1"
    stored = world["ledger"].submissions.get(tag)
    assert stored is not None and stored.operation, stored
    record = world["ledger"].operations.get(stored.operation)
    assert record is not None and record.context["rerun_of"] == previous
    assert record.context["paths"] == STORED
    assert [r["path"] for r in record.context["refused"]] == [MISSING]


def test_an_orphan_left_by_a_crash_after_create_is_adopted_with_every_file(world):
    run = first_run(world, "push-crash")
    with crashing_at("push.after_create"), pytest.raises(Crashed):
        run()

    name = adopt_the_orphan(world)

    settle_without_keys(world, name)
    assert_every_file_has_its_review(world, name)
    assert_a_rerun_works(world, name)


def test_a_failed_registration_releases_the_claim_so_the_retry_registers_the_batch(world):
    run = first_run(world, "push-flaky")
    submissions = world["ledger"].submissions
    real = submissions.register_winner
    calls: list[str] = []

    def failing_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        if len(calls) == 1:
            raise StoreUnavailable("commit failed: 503")
        return real(*args, **kwargs)

    submissions.register_winner = failing_once  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        run()
    # The next attempt, long before the first one's lease would have ended.
    retry = review_push(
        json.loads(push_body()),
        "push-flaky",
        world["deps"],
        Attempt("run-2", world["clock"]() + LEASE),
    )

    assert isinstance(retry, Done) and "already submitted" in retry.detail, retry
    name = submissions.get(review_tag(REPO, SHA)).operation
    settle_without_keys(world, name)
    assert_every_file_has_its_review(world, name)


def test_a_failed_registration_whose_worker_dies_is_adopted_with_every_file(world):
    run = first_run(world, "push-dies")
    submissions = world["ledger"].submissions

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("commit failed: 503")

    real = submissions.register_winner
    submissions.register_winner = failing  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        run()
    submissions.register_winner = real  # type: ignore[method-assign]

    name = adopt_the_orphan(world)

    settle_without_keys(world, name)
    assert_every_file_has_its_review(world, name)
    assert_a_rerun_works(world, name)


def test_an_orphan_whose_files_cannot_be_known_is_not_registered_half(world, caplog):
    """A claim that names no files (taken before claims carried them) and a batch still
    running (no rows yet): the context cannot be rebuilt, so it is said and alerted on."""
    tag = review_tag(REPO, SHA)
    ledger, clock = world["ledger"], world["clock"]
    ledger.submissions.claim(
        tag,
        delivery_id="old-push",
        attempt="old-run",
        lease_until=clock(),
        now=clock(),
        context={"repo": REPO, "sha": SHA},
    )
    world["gemini"].create_batch("models/m", [(p, "review") for p in STORED], display_name=tag)
    [orphan] = [b for b in world["gemini"].list_batches() if b.display_name == tag]

    with caplog.at_level("ERROR"), pytest.raises(IncompleteContext, match="paths"):
        register_orphan(ledger, world["gemini"], orphan)

    assert ledger.operations.get(orphan.name) is None
    assert ledger.submissions.get(tag).operation is None
    alerts = [
        r
        for r in caplog.records
        if getattr(r, "hookledger_fields", {}).get("alert") == "adoption_incomplete"
    ]
    assert alerts and orphan.name in alerts[0].getMessage(), caplog.text


def test_a_retry_of_the_push_while_the_claim_is_held_still_waits(world):
    """The claim is released only by the attempt that failed: a live one still holds it."""
    run = first_run(world, "push-live")
    with crashing_at("push.after_create"), pytest.raises(Crashed):
        run()
    with pytest.raises(RetryableError, match="run-1"):
        review_push(
            json.loads(push_body()),
            "push-live",
            world["deps"],
            Attempt("run-2", world["clock"]() + LEASE),
        )
