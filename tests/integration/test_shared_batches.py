"""Shared batches: many pushes in one Gemini batch, each push settled once, on its own.

The review pipeline called directly, with the real google-genai client against the
simulator and the ledger on the Firestore emulator (docs/architecture.md, "Shared batches").
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from apps.review.pipeline import ReviewDeps, review_push
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.errors import Deferred
from shared.gemini import GeminiGateway, make_client
from shared.github import ContentsClient
from shared.handlers import Attempt, Done
from shared.kinds import Deliverers
from shared.ledger import Ledger
from shared.ledger.groups import MEMBERS, member_name
from shared.settlement.settler import Settler
from shared.sharing import Sharing

REPO = "octo-org/handbook"


def sha(n: int) -> str:
    return f"{n:040x}"


def push(n: int, files: list[str]) -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "after": sha(n),
        "repository": {"full_name": REPO, "default_branch": "main"},
        "commits": [{"added": files, "modified": [], "removed": []}],
    }


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def deps(simulator, firestore_client, clock) -> ReviewDeps:
    gateway = GeminiGateway(make_client("sim-key", simulator.url, timeout_s=10, attempts=1))
    return ReviewDeps(
        ledger=Ledger(firestore_client, clock),
        gemini=gateway,
        github=ContentsClient(simulator.url, timeout_s=5, attempts=2, sleep=lambda s: None),
        review_path="docs",
        model="models/gemini-2.5-flash",
        clock=clock,
        sharing=Sharing(max_requests=4, window_s=300),
    )


def store(simulator, n: int, paths: list[str]) -> None:
    for path in paths:
        simulator.control.put_file("octo-org", "handbook", path, sha(n), f"# {path}\n".encode())


def run(deps: ReviewDeps, n: int, files: list[str], attempt: str) -> Done:
    lease = Attempt(attempt, deps.clock() + timedelta(minutes=10))
    outcome = review_push(push(n, files), f"delivery-{n}-{attempt}", deps, lease)
    assert isinstance(outcome, Done), outcome
    return outcome


def settle_all(deps: ReviewDeps, simulator) -> None:
    """Complete every batch at Gemini and settle each group's operation, which fans out."""
    services = SimpleNamespace(
        ledger=deps.ledger, gemini=deps.gemini, github_api=None, comments=None, checks=None
    )
    settler = Settler(deps.ledger, deps.gemini, Deliverers(services), clock=deps.clock)
    for batch in simulator.control.batches():
        simulator.control.complete(batch["name"], webhook="drop")
        assert settler.settle(batch["name"], "reconcile").result == "settled"


def test_pushes_share_one_batch_and_each_is_reviewed_once(deps, simulator):
    files = {1: ["docs/a.md", "docs/b.md"], 2: ["docs/c.md", "docs/d.md"]}
    for n, paths in files.items():
        store(simulator, n, paths)

    with pytest.raises(Deferred, match="takes items until"):  # it opened the group
        run(deps, 1, files[1], "run-1")
    filled = run(deps, 2, files[2], "run-2")  # it filled the group: sealed, one batch

    [batch] = simulator.control.batches()
    assert batch["display_name"].startswith("hookledger:group:")
    assert len(batch["requests"]) == 4
    assert "submitted" in filled.detail

    settle_all(deps, simulator)

    reviews = Reviews(deps.ledger)
    for n, paths in files.items():
        stored = {r["path"]: r for r in reviews.reviews_for_push(REPO, sha(n))}
        assert sorted(stored) == paths
        assert all(r["status"] == "ok" for r in stored.values()), stored
        submission = deps.ledger.submissions.get(f"hookledger:review:{REPO}@{sha(n)}")
        assert submission is not None
        record = deps.ledger.operations.get(submission.operation)
        assert record is not None and record.status == "succeeded"
        assert record.group is not None and record.result_counts["succeeded"] == 2


def test_the_step_that_creates_a_groups_batch_records_it_on_the_group(deps, simulator, monkeypatch):
    """The filler's step creates the batch and records it on the group's part at once:
    the group's items and request pages are read once, for that create."""
    groups = deps.ledger.groups
    read = groups.requests
    reads: list[str] = []

    def counted(group: Any, indices: Any = None) -> Any:
        reads.append(group.gid)
        return read(group, indices)

    monkeypatch.setattr(groups, "requests", counted)
    files = {1: ["docs/a.md", "docs/b.md"], 2: ["docs/c.md", "docs/d.md"]}
    for n, paths in files.items():
        store(simulator, n, paths)
    with pytest.raises(Deferred):
        run(deps, 1, files[1], "run-1")
    run(deps, 2, files[2], "run-2")

    [batch] = simulator.control.batches()
    [group] = [groups.get(gid) for gid in set(reads)]
    assert [(p.lo, p.hi, p.operation) for p in group.parts] == [(0, 2, batch["name"])]
    assert reads == [group.gid]


def test_a_retried_push_never_joins_twice(deps, simulator):
    store(simulator, 1, ["docs/a.md"])
    with pytest.raises(Deferred):
        run(deps, 1, ["docs/a.md"], "run-1")
    with pytest.raises(Deferred, match="takes items until"):  # a redelivery waits as well
        run(deps, 1, ["docs/a.md"], "run-2")

    [group] = list(deps.ledger.groups.due(deps.clock() + timedelta(hours=1), 10))
    members = deps.ledger.groups.members(group)
    assert [m.tag for m in members] == [f"hookledger:review:{REPO}@{sha(1)}"]
    assert simulator.control.batches() == []


def test_the_opener_seals_its_group_when_its_window_ends(deps, simulator, clock):
    store(simulator, 1, ["docs/a.md"])
    store(simulator, 2, ["docs/b.md"])
    with pytest.raises(Deferred) as deferred:
        run(deps, 1, ["docs/a.md"], "run-1")
    run(deps, 2, ["docs/b.md"], "run-2")  # joins, ends: the opener seals
    assert simulator.control.batches() == []

    clock.advance(deferred.value.after_s)
    sealed = run(deps, 1, ["docs/a.md"], "run-3")  # the deferred delivery, run again

    [batch] = simulator.control.batches()
    assert len(batch["requests"]) == 2 and "submitted" in sealed.detail
    settle_all(deps, simulator)
    assert len(Reviews(deps.ledger).reviews_for_push(REPO, sha(2))) == 1


def test_a_push_larger_than_a_commit_is_reviewed_whole_in_pages(deps, simulator, monkeypatch):
    from google.cloud.firestore_v1.transaction import Transaction

    paths = [f"docs/page-{i:04d}.md" for i in range(1200)]
    store(simulator, 7, paths)
    big = replace(deps, sharing=Sharing(max_requests=1000, window_s=300))

    run(big, 7, paths, "run-1")  # more than a group's requests: its own group, sealed at once

    [batch] = simulator.control.batches()
    assert len(batch["requests"]) == 1200
    writes_per_commit: list[int] = []  # the emulator takes any number; Firestore takes 500
    commit = Transaction._commit

    def counted(self: Transaction) -> Any:
        writes_per_commit.append(len(self._write_pbs))
        return commit(self)

    monkeypatch.setattr(Transaction, "_commit", counted)
    settle_all(big, simulator)
    assert sum(writes_per_commit) > 1200 and max(writes_per_commit) <= 500
    reviews = Reviews(deps.ledger)
    assert reviews.count_for_push(REPO, sha(7)) == 1200
    assert all(reviews.get_review(REPO, sha(7), path) for path in (paths[0], paths[-1]))
    record = deps.ledger.operations.get(member_name(_group(deps, 7), 0))
    assert record is not None and record.status == "succeeded"


def _group(deps: ReviewDeps, n: int) -> str:
    submission = deps.ledger.submissions.get(f"hookledger:review:{REPO}@{sha(n)}")
    assert submission is not None and submission.operation
    return submission.operation.removeprefix("groups/").rpartition(".")[0]


def test_reconcile_seals_a_group_its_opener_left_and_settles_each_push(deps, simulator, clock):
    from shared.reconcile import Reconciler, ReconcileSettings

    store(simulator, 1, ["docs/a.md"])
    store(simulator, 2, ["docs/b.md", "docs/c.md"])
    with pytest.raises(Deferred):  # its deferred delivery is lost: nobody comes back
        run(deps, 1, ["docs/a.md"], "run-1")
    run(deps, 2, ["docs/b.md", "docs/c.md"], "run-2")
    services = SimpleNamespace(
        ledger=deps.ledger, gemini=deps.gemini, github_api=None, comments=None, checks=None
    )
    reconciler = Reconciler(
        deps.ledger,
        deps.gemini,
        clock,
        ReconcileSettings(grace_s=10, adopt_orphans=False),
        deliver=Deliverers(services),
    )

    clock.advance(5)  # the window is still open: nothing to seal
    assert reconciler.run().sealed == 0 and simulator.control.batches() == []
    clock.advance(300 + 10)  # past the window and reconcile's grace
    assert reconciler.run().sealed == 1
    [batch] = simulator.control.batches()
    assert len(batch["requests"]) == 3

    simulator.control.complete(batch["name"], webhook="drop")  # the webhook is lost
    clock.advance(120)  # past the ledger's grace: the group's operation is due
    report = reconciler.run()
    assert report.settled == 1 and reconciler.run().sealed == 0  # the group, then its items
    reviews = Reviews(deps.ledger)
    assert len(reviews.reviews_for_push(REPO, sha(1))) == 1
    assert len(reviews.reviews_for_push(REPO, sha(2))) == 2


@pytest.mark.slow
def test_overlapping_runs_of_many_pushes_join_each_once(deps, simulator, clock):
    """Twenty pushes, each run twice at the same moment by two attempts (a retry
    overlapping a run that timed out), eight at a time: every push joins exactly one
    group, and every group gets one batch."""
    import math
    from collections import Counter
    from concurrent.futures import ThreadPoolExecutor

    from shared.errors import TransientError
    from shared.ledger.groups import GROUPS

    pushes = {n: [f"docs/{n}-a.md", f"docs/{n}-b.md"] for n in range(20)}
    for n, paths in pushes.items():
        store(simulator, n, paths)
    shared = replace(deps, sharing=Sharing(max_requests=8, window_s=300))

    def attempt(job: tuple[int, str]) -> str:
        n, name = job
        try:
            return run(shared, n, pushes[n], name).detail
        except (Deferred, TransientError) as exc:  # waits for its window, or for the other run
            return type(exc).__name__

    jobs = [(n, f"run-{n}-{copy}") for n in pushes for copy in (1, 2)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(attempt, jobs))
    clock.advance(3600)  # past every lease and window: the waiting runs come back
    for n in pushes:
        attempt((n, f"run-{n}-3"))

    groups = [s.to_dict() or {} for s in shared.ledger._commits.collection(GROUPS).stream()]
    members = shared.ledger._commits.collection(MEMBERS).stream()
    joined = Counter(str((m.to_dict() or {})["tag"]) for m in members)
    assert sorted(joined.values()) == [1] * 20
    assert all(g["operation"] for g in groups), groups
    batches = simulator.control.batches()
    assert len(batches) == len(groups) <= math.ceil(40 / 8) + 1
    assert sorted(b["name"] for b in batches) == sorted(g["operation"] for g in groups)


def test_an_item_settles_from_its_stored_rows_after_gemini_forgot_the_batch(deps, simulator, clock):
    """The group settled, its fan-out never reached the item, and Gemini forgot the batch
    (its 48 h passed): the item's own check settles it from the rows stored when its group
    settled, with every review written, and asks Gemini nothing."""
    store(simulator, 1, ["docs/a.md", "docs/b.md", "docs/c.md", "docs/d.md"])
    run(deps, 1, ["docs/a.md", "docs/b.md", "docs/c.md", "docs/d.md"], "run-1")  # fills it
    [batch] = simulator.control.batches()
    simulator.control.complete(batch["name"], webhook="drop")
    assert Settler(deps.ledger, deps.gemini).settle(batch["name"], "reconcile").result == (
        "settled"
    )  # no deliverer: the fan-out item stays undelivered
    simulator.control.delete_batch(batch["name"])
    item = deps.ledger.operations.get(member_name(_group(deps, 1), 0))
    assert item is not None and item.pending

    settler = Settler(deps.ledger, deps.gemini, clock=clock)
    assert settler.settle(item.name, "reconcile").result == "settled"
    settled = deps.ledger.operations.get(item.name)
    assert settled is not None and settled.status == "succeeded"
    assert settled.result_counts["succeeded"] == 4
    reviews = Reviews(deps.ledger).reviews_for_push(REPO, sha(1))
    assert sorted(r["status"] for r in reviews) == ["ok"] * 4


def test_a_late_deferral_of_a_registered_group_is_cleared_by_the_next_seal(deps, simulator, clock):
    """A sealer refused by the quota defers the group after another registered its batch:
    the next look at the group clears it, so the due query stops returning it."""
    from shared.sharing.seal import SealDeps, seal

    store(simulator, 1, ["docs/a.md", "docs/b.md", "docs/c.md", "docs/d.md"])
    run(deps, 1, ["docs/a.md", "docs/b.md", "docs/c.md", "docs/d.md"], "run-1")
    gid = _group(deps, 1)
    deps.ledger.groups.defer(gid, clock())  # the late sealer's deferral
    assert [g.gid for g in deps.ledger.groups.due(clock(), 10)] == [gid]

    sealer = SealDeps(ledger=deps.ledger, gemini=deps.gemini, clock=clock)
    said = seal(sealer, gid, delivery_id="reconcile", attempt=Attempt("r", clock()))
    assert "is batches/" in said
    assert deps.ledger.groups.due(clock(), 10) == []
    assert len(simulator.control.batches()) == 1
