"""A shared batch under Gemini's refusals is as safe as a batch of one (docs/reliability.md,
"Shared batches under faults"): a refused request fails its push alone, a refusal naming
no request is narrowed down by halves, a refused deployment holds the group (no push
failed, one alert), a quota answer costs no listing, and a step cut while failing items
is finished by the next.

The review pipeline called directly, the real google-genai client against the simulator
(whose create refusals are Gemini's own bodies), the ledger on the Firestore emulator.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import timedelta
from typing import Any

import pytest

from apps.review.results import Reviews
from shared import crashpoints
from shared.crashpoints import Crashed
from shared.errors import Deferred
from shared.handlers import Attempt
from shared.ledger.groups import GROUPS
from shared.reconcile import Reconciler, ReconcileSettings
from shared.sharing.seal import FAIL_PAGE, HOLD_ALERT, HOLD_LIMIT, SealDeps, seal_step
from tests.integration.test_shared_batches import REPO, deps, push, settle_all, sha

__all__ = ["deps"]

POISON = "POISON-REQUEST"


@pytest.fixture
def clock():
    from local.fakes import FakeClock

    return FakeClock()


def _store(simulator: Any, n: int, text: str) -> None:
    simulator.control.put_file("octo-org", "handbook", f"docs/{n}.md", sha(n), text.encode())


def _push(deps: Any, n: int) -> str:
    """Push `n` (one file); what its run said (an opener's wait is said, not raised)."""
    from apps.review.pipeline import review_push

    lease = Attempt(f"run-{n}", deps.clock() + timedelta(minutes=10))
    try:
        return str(review_push(push(n, [f"docs/{n}.md"]), f"delivery-{n}", deps, lease).detail)
    except Deferred as exc:
        return str(exc)


def _item(deps: Any, n: int) -> Any:
    submission = deps.ledger.submissions.get(f"hookledger:review:{REPO}@{sha(n)}")
    assert submission is not None and submission.operation, n
    return deps.ledger.operations.get(submission.operation)


def _fill_group(deps: Any, simulator: Any, poisoned: frozenset[int] = frozenset()) -> None:
    """Four one-file pushes fill one group of four requests; the fourth seals it."""
    for n in range(1, 5):
        _store(simulator, n, f"# {n}\n{POISON if n in poisoned else 'fine'}\n")
        _push(deps, n)


def _reconciler(deps: Any, clock: Any) -> Reconciler:
    settings = ReconcileSettings(grace_s=0, adopt_orphans=False)
    return Reconciler(deps.ledger, deps.gemini, clock, settings)


def _reviewed(deps: Any, n: int) -> list[dict[str, Any]]:
    return Reviews(deps.ledger).reviews_for_push(REPO, sha(n))


def test_a_request_gemini_names_fails_its_push_alone(deps, simulator):
    simulator.control.poison(POISON)
    _fill_group(deps, simulator, poisoned=frozenset({2}))

    [batch] = simulator.control.batches()  # made at once without the refused request
    assert len(batch["requests"]) == 3
    failed = _item(deps, 2)
    assert failed.status == "failed" and failed.error["reason"] == "request_refused"
    assert "requests[1]" in failed.error["message"]  # Gemini's own words, naming it
    settle_all(deps, simulator)
    for n in (1, 3, 4):
        assert _item(deps, n).status == "succeeded"
        assert [r["status"] for r in _reviewed(deps, n)] == ["ok"]
    [refused] = _reviewed(deps, 2)
    assert refused["status"] == "error" and refused["refused"] is True


def test_a_push_gemini_refused_gets_a_failure_check_run_saying_why():
    """What the push's owner sees: a completed `failure` check run naming the refusal."""
    from apps.review import checks

    reviews = [{"path": "docs/2.md", "status": "error", "refused": True, "error": "400 …"}]
    assert checks.conclusion(reviews) == "failure"
    assert checks.title(reviews).startswith("Gemini refused")
    assert "400 …" in checks.summary("a" * 40, reviews)


def test_a_refusal_naming_no_request_is_narrowed_down_by_halves(deps, simulator):
    simulator.control.poison(POISON, name_index=False)
    _fill_group(deps, simulator, poisoned=frozenset({2}))

    made = simulator.control.batches()
    assert sorted(len(b["requests"]) for b in made) == [1, 2]  # item 1 alone, items 3-4
    assert simulator.control.poison_state()["refused"] == 3  # the whole, 1-2, then 2 alone
    assert _item(deps, 2).status == "failed"
    settle_all(deps, simulator)
    assert [_item(deps, n).status for n in (1, 3, 4)] == ["succeeded"] * 3


def _alerts(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, Any]]:
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    return [f for f in fields if f.get("alert") == name]


def test_a_refused_deployment_holds_every_group_under_one_alert_and_fails_nothing(
    deps, simulator, clock, caplog
):
    caplog.set_level(logging.INFO, logger="hookledger")
    simulator.control.refuse_creates(403)
    _fill_group(deps, simulator)
    for n in range(5, 9):  # a second group, refused too
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)

    assert simulator.control.batches() == []
    assert [_item(deps, n).status for n in range(1, 9)] == ["pending"] * 8
    assert len(_alerts(caplog, HOLD_ALERT)) == 1  # one for the deployment, not per group

    simulator.control.stop_refusing_creates()
    clock.advance(60)  # past the first hold
    report = _reconciler(deps, clock).run()
    assert report.sealed == 2 and len(simulator.control.batches()) == 2
    settle_all(deps, simulator)
    assert [_item(deps, n).status for n in range(1, 9)] == ["succeeded"] * 8


def test_a_deployment_refused_past_the_hold_limit_fails_its_pushes_with_the_reason(
    deps, simulator, clock
):
    simulator.control.refuse_creates(400, reason="API_KEY_INVALID")
    _fill_group(deps, simulator)
    reconciler = _reconciler(deps, clock)
    clock.advance(60)  # the first hold's end: refused again, still held
    reconciler.run()
    assert [_item(deps, n).status for n in range(1, 5)] == ["pending"] * 4
    clock.advance(HOLD_LIMIT.total_seconds())
    reconciler.run()

    assert simulator.control.batches() == []

    for n in range(1, 5):
        item = _item(deps, n)
        assert item.status == "failed" and item.error["reason"] == "deployment_refused"
        assert "API key not valid" in item.error["message"]


class CountingGemini:
    """The gateway, counting the listings of Gemini's batches (a takeover's)."""

    def __init__(self, gemini: Any) -> None:
        self._gemini = gemini
        self.listings = 0

    def list_batches(self, *args: Any, **kwargs: Any) -> Any:
        self.listings += 1
        return self._gemini.list_batches(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gemini, name)


def test_a_quota_refusal_costs_no_listing_and_one_create_a_run(deps, simulator, clock):
    from dataclasses import replace

    counting = CountingGemini(deps.gemini)
    deps = replace(deps, gemini=counting)
    simulator.control.set_quotas(gemini_batches_in_flight=0)
    _fill_group(deps, simulator)
    for n in range(5, 9):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    refused = simulator.control.quotas()["refused"]["gemini_batches_in_flight"]
    assert refused == 1  # the first filler tried; the second queued behind its wait

    clock.advance(600)  # past Gemini's RetryInfo
    reconciler = Reconciler(
        deps.ledger, counting, clock, ReconcileSettings(grace_s=0, adopt_orphans=False)
    )
    report = reconciler.run()
    assert report.deferred >= 1
    after = simulator.control.quotas()["refused"]["gemini_batches_in_flight"]
    assert after == refused + 1  # the second group waits for the next run, no create

    simulator.control.set_quotas(gemini_batches_in_flight=None)
    clock.advance(600)
    reconciler.run()
    assert len(simulator.control.batches()) == 2
    assert counting.listings == 0  # every claim left vacant: no takeover listed


@pytest.mark.slow
def test_failing_a_large_group_cut_part_way_is_finished_by_the_next_step(
    deps, simulator, clock, firestore_client
):
    """A group of 2.5 pages of items whose batch is held past its limit: the step failing
    them dies part way through its second page; the next steps settle the rest, each
    item once."""
    from dataclasses import replace

    from shared.sharing import Sharing

    items = 2 * FAIL_PAGE + FAIL_PAGE // 2
    deps = replace(deps, sharing=Sharing(max_requests=items, window_s=300))
    simulator.control.refuse_creates(403)
    for n in range(1, items + 1):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    [snapshot] = list(firestore_client.collection(GROUPS).stream())
    gid = snapshot.id
    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=clock)
    attempt = Attempt("r", clock() + timedelta(hours=30))
    clock.advance(HOLD_LIMIT.total_seconds() + 60)

    failed = 0

    cut = FAIL_PAGE + FAIL_PAGE // 2

    def die_part_way(point: str) -> None:
        nonlocal failed
        if point == "group.item_failed":
            failed += 1
            if failed == cut:
                raise Crashed(point)

    crashpoints.install(die_part_way)
    try:
        with pytest.raises(Crashed):
            while seal_step(sealer, gid, delivery_id="r", attempt=attempt).more:
                pass
    finally:
        crashpoints.install(None)
    assert sum(_item(deps, n).status == "failed" for n in range(1, items + 1)) == cut

    steps = 0
    while seal_step(sealer, gid, delivery_id="r", attempt=attempt).more:
        steps += 1
    statuses = [_item(deps, n).status for n in range(1, items + 1)]
    assert statuses == ["failed"] * items
    assert deps.ledger.groups.get(gid).due_at is None  # nobody need look again


# The size of `test_many_one_file_pushes_in_one_shard_are_each_reviewed_once`: the issue's
# 5,000 with HOOKLEDGER_GROUP_PUSHES=5000 (by hand), 200 in `make test` (about 20 s).
GROUP_PUSHES = int(os.environ.get("HOOKLEDGER_GROUP_PUSHES", "200"))


@pytest.mark.slow
def test_many_one_file_pushes_in_one_shard_are_each_reviewed_once(
    deps, simulator, clock, firestore_client
):
    """Every push of one shard joins one open group; its document stays a few hundred
    bytes whatever it holds (each item is a document of its own), and each push is
    reviewed once from the one batch."""
    from dataclasses import replace

    from shared.sharing import Sharing

    deps = replace(deps, sharing=Sharing(max_requests=100_000, window_s=3600))
    for n in range(1, GROUP_PUSHES + 1):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    [snapshot] = list(firestore_client.collection(GROUPS).stream())
    assert len(json.dumps(snapshot.to_dict(), default=str)) < 2_000
    assert snapshot.to_dict()["count"] == GROUP_PUSHES

    clock.advance(3600)
    report = _reconciler(deps, clock).run()
    assert report.sealed == 1
    [batch] = simulator.control.batches()
    assert len(batch["requests"]) == GROUP_PUSHES
    settle_all(deps, simulator)
    for n in range(1, GROUP_PUSHES + 1):
        assert [r["status"] for r in _reviewed(deps, n)] == ["ok"], n


def test_a_group_is_sealed_before_its_names_and_keys_outgrow_a_document(
    deps, simulator, monkeypatch
):
    """Item names and request keys travel in the group batch's context (its operation and
    claim, one document each): the group is sealed when they reach MAX_KEY_BYTES."""
    from dataclasses import replace

    from shared.ledger import group_joins
    from shared.sharing import Sharing

    monkeypatch.setattr(group_joins, "MAX_KEY_BYTES", 100)  # two one-file pushes' names and keys
    deps = replace(deps, sharing=Sharing(max_requests=100, window_s=3600))
    for n in range(1, 4):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    [batch] = simulator.control.batches()  # sealed by its keys' bytes, not its requests
    assert len(batch["requests"]) == 2  # the third push opened the next group


@pytest.mark.slow
def test_groups_held_by_the_quota_never_stop_due_operations_from_settling(deps, simulator, clock):
    """Fifty groups wait on Gemini's batch quota while three groups' batches have ended
    unannounced: one reconcile run tries one create, defers, and settles all three."""
    from dataclasses import replace

    from shared.sharing import Sharing

    deps = replace(deps, sharing=Sharing(max_requests=1, window_s=3600))  # a group a push
    for n in range(1, 4):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    made = simulator.control.batches()
    for batch in made:
        simulator.control.complete(batch["name"], webhook="drop")
    simulator.control.set_quotas(gemini_batches_in_flight=0)
    for n in range(4, 54):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    refused = simulator.control.quotas()["refused"]["gemini_batches_in_flight"]
    assert refused == 1  # the first group's create; the other 49 queued behind its wait

    clock.advance(600)
    report = _reconciler(deps, clock).run()
    assert report.settled == 3 and report.deferred == 1
    assert simulator.control.quotas()["refused"]["gemini_batches_in_flight"] == refused + 1
    for batch in made:
        assert deps.ledger.operations.get(batch["name"]).status == "succeeded"


@pytest.mark.slow
@pytest.mark.parametrize("name_index", [True, False], ids=["named", "unnamed"])
def test_overlapping_sealers_of_a_poisoned_group_put_each_item_in_one_batch(
    deps, simulator, clock, firestore_client, name_index
):
    """Three sealers run one poisoned group's steps at once (a filler's retry, its
    overlapping attempt, reconcile): whatever order their claims, refusals, splits and
    re-creates land in, every other item is in exactly one batch Gemini still runs, and
    the poisoned one fails once."""
    import threading
    from dataclasses import replace

    from shared.errors import TransientError
    from shared.sharing import Sharing

    deps = replace(deps, sharing=Sharing(max_requests=100, window_s=3600))
    simulator.control.poison(POISON, name_index=name_index)
    items = 8
    for n in range(1, items + 1):
        _store(simulator, n, f"# {n}\n{POISON if n == 5 else 'fine'}\n")
        _push(deps, n)
    [snapshot] = list(firestore_client.collection(GROUPS).stream())
    gid = snapshot.id
    clock.advance(3600)  # the window has ended: every sealer may seal it
    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=clock)
    errors: list[BaseException] = []

    def seal_until_finished(who: str) -> None:
        attempt = Attempt(who, clock() + timedelta(minutes=10))
        try:
            while deps.ledger.groups.get(gid).due_at is not None:
                try:
                    seal_step(sealer, gid, delivery_id=who, attempt=attempt)
                except TransientError:
                    continue  # another sealer holds a part's claim: look again
        except BaseException as exc:  # reported below: a thread's failure fails the test
            errors.append(exc)

    threads = [threading.Thread(target=seal_until_finished, args=(f"s{k}",)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    live = [b for b in simulator.control.batches() if b["state"] != "cancelled"]
    keys = [r["metadata"]["key"] for b in live for r in b["requests"]]
    assert sorted(keys) == sorted(f"{n - 1}/docs/{n}.md" for n in range(1, items + 1) if n != 5)
    assert _item(deps, 5).status == "failed"
    settle_all(deps, simulator)
    assert [_item(deps, n).status for n in range(1, items + 1) if n != 5] == ["succeeded"] * 7


def test_a_sealer_that_read_a_part_before_it_was_split_creates_nothing(
    deps, simulator, clock, firestore_client
):
    """The window the re-read after a claim closes: a sealer read the whole part, another
    split it meanwhile (and left its claim vacant); the first claims, sees the split, and
    creates nothing, so no item is ever in two live batches."""
    from dataclasses import replace

    from shared.sharing import Sharing
    from shared.sharing.seal import _make

    deps = replace(deps, sharing=Sharing(max_requests=100, window_s=3600))
    for n in range(1, 5):
        _store(simulator, n, f"# {n}\n")
        _push(deps, n)
    [snapshot] = list(firestore_client.collection(GROUPS).stream())
    clock.advance(3600)
    stale = deps.ledger.groups.seal(snapshot.id)
    [whole] = stale.parts
    deps.ledger.groups.split(stale.gid, whole)  # by the other sealer, after a bare 400

    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=clock)
    said, _ = _make(sealer, stale, whole, "late", Attempt("late", clock() + timedelta(hours=1)))
    assert "changed while claimed" in said
    assert simulator.control.batches() == []
    assert len(deps.ledger.groups.get(stale.gid).parts) == 2


def test_a_held_group_is_not_tried_again_before_its_hold_ends(deps, simulator, clock):
    """The opener's delivery comes back at its window's end while the group its filler
    sealed is held: it leaves the group to reconcile and sends no create."""
    simulator.control.refuse_creates(403)
    _fill_group(deps, simulator)  # the fourth push sealed it: refused, held 30 s
    assert simulator.control.create_refusal_state()["refused"] == 1

    clock.advance(1)  # still held
    said = _push(deps, 1)  # the opener's delivery, run again
    assert "waits until" in said
    assert simulator.control.create_refusal_state()["refused"] == 1
