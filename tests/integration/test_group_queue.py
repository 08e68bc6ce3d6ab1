"""Groups waiting for Gemini's batch quota are created in turn (shared/ledger/group_queue.py,
shared/sharing/turns.py): the oldest first, one create refused a quota wait, and with
`Sharing.fair_by` a repository's flood takes one turn a round, so another repository's
push goes second, not last.

The review pipeline called directly (one push a group), the real google-genai client
against the simulator's batch quota, the ledger on the Firestore emulator.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.errors import Deferred
from shared.handlers import Attempt
from shared.reconcile import Reconciler, ReconcileSettings
from shared.sharing import Sharing
from tests.integration.test_shared_batches import deps, sha

__all__ = ["deps"]

HOUR = timedelta(hours=1)
FLOOD = "octo-org/monorepo"
LONE = "octo-org/handbook"


@pytest.fixture
def clock():
    from local.fakes import FakeClock

    return FakeClock()


def _push(deps: Any, simulator: Any, repo: str, n: int) -> None:
    """Push `n` of `repo`, one file: one group of its own (max_requests=1), sealed at once."""
    from apps.review.pipeline import review_push

    owner, name = repo.split("/")
    simulator.control.put_file(owner, name, f"docs/{n}.md", sha(n), f"# {n}\n".encode())
    payload = {
        "ref": "refs/heads/main",
        "after": sha(n),
        "repository": {"full_name": repo, "default_branch": "main"},
        "commits": [{"added": [f"docs/{n}.md"], "modified": [], "removed": []}],
    }
    lease = Attempt(f"run-{repo}-{n}", deps.clock() + timedelta(minutes=10))
    with contextlib.suppress(Deferred):  # queued behind Gemini's quota: reconcile goes on
        review_push(payload, f"delivery-{repo}-{n}", deps, lease)


class MadeInOrder:
    """The gateway, noting the display name of each batch Gemini made, in order."""

    def __init__(self, gemini: Any) -> None:
        self._gemini = gemini
        self.made: list[str] = []

    def create_batch(self, *args: Any, display_name: str, **kwargs: Any) -> Any:
        name = self._gemini.create_batch(*args, display_name=display_name, **kwargs)
        self.made.append(display_name)
        return name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gemini, name)


def _made_order(deps: Any) -> list[str]:
    """The repository of each group batch, in the order Gemini made them."""
    order = []
    for display_name in deps.gemini.made:
        gid = display_name.rpartition(":")[2]
        group = deps.ledger.groups.get(gid)
        order.append(group.fair_key.partition(":")[2] or _repo_of(deps, group))
    return order


def _repo_of(deps: Any, group: Any) -> str:
    [member] = deps.ledger.groups.members(group)
    return member.tag.removeprefix("hookledger:review:").partition("@")[0]


def _queued_then_drained(deps: Any, simulator: Any, clock: Any, fair_by: str) -> list[str]:
    sharing = Sharing(max_requests=1, window_s=3600, fair_by=fair_by)
    deps = replace(deps, sharing=sharing, gemini=MadeInOrder(deps.gemini))
    simulator.control.set_quotas(gemini_batches_in_flight=0)
    for n in range(1, 6):
        _push(deps, simulator, FLOOD, n)
    _push(deps, simulator, LONE, 6)
    refused = simulator.control.quotas()["refused"]["gemini_batches_in_flight"]
    assert refused == 1  # the first group tried; the five after it waited their turn
    assert simulator.control.batches() == []

    simulator.control.set_quotas(gemini_batches_in_flight=None)
    reconciler = Reconciler(
        deps.ledger, deps.gemini, clock, ReconcileSettings(grace_s=0, adopt_orphans=False)
    )
    for _ in range(6):  # each run makes a few heads' batches
        clock.advance(600)
        reconciler.run()
        if len(simulator.control.batches()) == 6:
            break
    assert deps.ledger.groups.queue.waiting(10) == []
    assert simulator.control.quotas()["refused"]["gemini_batches_in_flight"] == refused
    return _made_order(deps)


def test_a_repository_flood_takes_one_turn_a_round(deps, simulator, clock):
    order = _queued_then_drained(deps, simulator, clock, "repository")
    assert order == [FLOOD, LONE, FLOOD, FLOOD, FLOOD, FLOOD]


def test_unkeyed_groups_are_made_oldest_first(deps, simulator, clock):
    order = _queued_then_drained(deps, simulator, clock, "")
    assert order == [FLOOD, FLOOD, FLOOD, FLOOD, FLOOD, LONE]


def _queued(deps: Any, simulator: Any, clock: Any, groups: int = 2) -> Any:
    """`groups` of FLOOD's groups queued behind a 429 (mixed: no fair key), then the quota
    reopened past its wait; the deps, noting each batch made."""
    sharing = Sharing(max_requests=1, window_s=3600, fair_by="")
    deps = replace(deps, sharing=sharing, gemini=MadeInOrder(deps.gemini))
    simulator.control.set_quotas(gemini_batches_in_flight=0)
    for n in range(1, groups + 1):
        _push(deps, simulator, FLOOD, n)
    simulator.control.set_quotas(gemini_batches_in_flight=None)
    clock.advance(600)  # past the quota's wait
    return deps


def test_a_fresh_group_does_not_jump_the_queue(deps, simulator, clock):
    """Once groups wait, a group sealed later is queued behind them even when the quota
    has room: its sealer makes the head's batch first."""
    deps = _queued(deps, simulator, clock)
    _push(deps, simulator, LONE, 3)
    made = simulator.control.batches()
    assert len(made) == 3
    assert _made_order(deps) == [FLOOD, FLOOD, LONE]
    assert deps.ledger.groups.queue.waiting(10) == []


def test_a_head_another_sealer_is_making_defers_the_group_behind_it(deps, simulator, clock):
    """The head's claim is live with another sealer: a group behind it creates nothing,
    and its run is told to come back (`Deferred`), not failed."""
    from shared.settlement.groups import GROUP_KIND
    from shared.sharing.seal import SealDeps, seal_step
    from shared.submission import SubmitDeps, Submitter

    deps = _queued(deps, simulator, clock)
    head, behind = deps.ledger.groups.queue.waiting(10)
    another = SubmitDeps(ledger=deps.ledger, gemini=deps.gemini, kind=GROUP_KIND, clock=clock)
    making = Submitter(another, head.tag, "another-sealer", Attempt("another", clock() + HOUR))
    assert making.claim({"group": head.gid}) is None  # the vacant claim is its now
    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=deps.clock)
    attempt = Attempt("behind", clock() + timedelta(minutes=10))
    with pytest.raises(Deferred, match=f"behind group {head.gid}"):
        seal_step(sealer, behind.gid, delivery_id="d-behind", attempt=attempt)
    assert deps.gemini.made == []
    assert [g.gid for g in deps.ledger.groups.queue.waiting(10)] == [head.gid, behind.gid]


def test_the_tail_of_a_long_queue_looks_again_less_often_than_its_head(deps, simulator, clock):
    """While Gemini's quota pauses the queue, the head is looked at again when Gemini
    said, and each group behind it later, turns.BEHIND_WAIT_S a round ahead of it: a
    long queue's tail does not poll it every second."""
    from shared.sharing.seal import SealDeps, seal_step
    from shared.sharing.turns import BEHIND_WAIT_S

    deps = replace(deps, sharing=Sharing(max_requests=1, window_s=3600, fair_by=""))
    simulator.control.set_quotas(gemini_batches_in_flight=0, gemini_batch_retry_delay_s=1)
    for n in range(1, 5):
        _push(deps, simulator, FLOOD, n)
    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=deps.clock)
    attempt = Attempt("looking", clock() + HOUR)
    head, *behind = deps.ledger.groups.queue.waiting(10)
    said = seal_step(sealer, head.gid, delivery_id="d-looking", attempt=attempt).said
    assert said.startswith(f"group {head.gid} waits until")  # Gemini's RetryInfo time
    waits = []
    for group in behind:
        with pytest.raises(Deferred) as deferred:
            seal_step(sealer, group.gid, delivery_id="d-looking", attempt=attempt)
        waits.append(deferred.value.after_s)
    assert waits == [2 * BEHIND_WAIT_S, 3 * BEHIND_WAIT_S, 4 * BEHIND_WAIT_S]
    assert simulator.control.quotas()["refused"]["gemini_batches_in_flight"] == 1


def test_a_held_head_is_passed_over_and_each_group_waits_its_own_hold(deps, simulator, clock):
    """Gemini refuses the deployment while groups wait: the head is held (30 s, doubling),
    and the group behind it is not held up by it: it tries its own create, is refused and
    held in turn, so reconcile's due query finds neither until their holds end."""
    from shared.sharing.seal import SealDeps, seal_step

    deps = _queued(deps, simulator, clock)
    simulator.control.refuse_creates(403)
    head, behind = deps.ledger.groups.queue.waiting(10)
    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=deps.clock)
    step = seal_step(sealer, behind.gid, delivery_id="d", attempt=Attempt("a", clock() + HOUR))
    assert not step.more and "held" in step.said
    for gid in (head.gid, behind.gid):
        held = deps.ledger.groups.get(gid)
        assert held.held_since is not None and held.due_at > clock(), gid
    assert deps.ledger.groups.due(clock(), 10) == []
    assert simulator.control.batches() == []


def test_a_head_that_fails_for_its_own_reasons_is_passed_over(deps, simulator, clock):
    """The head's stored requests are gone (its step fails with StoreUnavailable): the
    group behind it is made all the same, with a WARNING naming the head."""
    from shared.sharing.seal import SealDeps, seal_step

    deps = _queued(deps, simulator, clock)
    head, behind = deps.ledger.groups.queue.waiting(10)
    client = deps.ledger.groups._commits.client
    for page in client.collection("group_requests").stream():
        if page.to_dict().get("tag") == deps.ledger.groups.members(head)[0].tag:
            page.reference.delete()
    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=deps.clock)
    step = seal_step(sealer, behind.gid, delivery_id="d", attempt=Attempt("a", clock() + HOUR))
    assert not step.more
    assert len(deps.gemini.made) == 1 and deps.gemini.made[0].endswith(behind.gid)
    assert deps.ledger.groups.get(behind.gid).operation is not None


def test_one_reconcile_run_drains_a_queue_the_quota_has_room_for(deps, simulator, clock):
    """A group waiting its turn behind others is counted deferred, the run goes on to the
    next due group (only Gemini's quota stops it) and comes back to it at the end: six
    queued groups, one run."""
    deps = _queued(deps, simulator, clock, groups=6)
    reconciler = Reconciler(
        deps.ledger, deps.gemini, clock, ReconcileSettings(grace_s=0, adopt_orphans=False)
    )
    report = reconciler.run()
    assert report.sealed + report.deferred >= 6 and report.errors == 0
    assert len(deps.gemini.made) == 6
    assert deps.ledger.groups.queue.waiting(10) == []
