"""The crash-point sweep for shared batches: two pushes in one group, dying at each step.

Two pushes (two Markdown files each, through a GitHub App: check runs and comments on)
share one group of four requests: the first opens it (its delivery waits for the window),
the second fills it and seals it. The process "dies" (`Crashed`) the first time it
reaches the point; then Cloud Tasks' retries (the held tasks, deferrals included),
Gemini's completion webhooks and reconcile runs go on, the clock moving past every lease
and window, until nothing changes. The steps swept: an item joined, the group sealed,
its batch created, the group settled (the settle points, reached by the group's
operation first), each item settled, their outboxes. The invariants
(docs/architecture.md, "Shared batches"):

- every push reviewed once: its submission decided with its own item operation
  (`groups/{gid}.{n}`), settled `succeeded`, each file's review written by it;
- no item in two groups, and every push in one;
- no batch without its group: every batch Gemini still runs is a group's registered
  batch, any other one superseded and cancelled;
- one completed check run and one commit comment per push, showing its item;
- nothing pending, no delivery queued, no outbox item open.

The poisoned sweep: Gemini refuses the first push's requests, by index (a 400 naming
them) or with a 400 naming none (the group split in halves); that push's item fails once
with the reason, its check run completed, and the other push is reviewed once from a
batch without it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from apps.review.kind import review_tag
from apps.review.results import Reviews
from shared import crashpoints
from shared.crashpoints import POINTS, crashing_at
from shared.gemini import GeminiRejected
from shared.ledger.groups import GROUPS, MEMBERS, group_tag
from tests.integration import test_crash_points as push_sweep
from tests.integration.test_crash_points import FILES, REPO, ROUND, ROUNDS, World

# The push sweep's settings (check runs and comments on) and handler registry, restored.
registry = push_sweep.registry
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("registry", "sharing")]

# Reached only when an item fails (the poisoned sweep below).
FAILING_POINTS = ["group.item_failed"]
GROUP_POINTS = sorted(p for p in POINTS if p.startswith("group.") and p not in FAILING_POINTS)
SWEPT = [
    *GROUP_POINTS,
    "push.submission.claimed",
    "push.registered",
    "push.before_done",
    "settle.before_fetch",
    "settle.before_commit",
    "settle.committed",
    "outbox.leased",
    "outbox.marked",
]


class GroupWorld(World):
    """Two pushes sharing one group, with the worker, reconcile and GitHub of `World`."""

    def __init__(self, firestore_client: Any, simulator: Any) -> None:
        # No stray batch of a push: items of shared batches never make one of their own
        # (one left from before sharing was switched on would be adopted as the push's).
        super().__init__(firestore_client, simulator, stray=False)
        self.shas = [self.sha, self.sha[::-1]]
        self.tags = [review_tag(REPO, sha) for sha in self.shas]

    def push(self) -> None:
        for n, sha in enumerate(self.shas):
            body = {
                "ref": "refs/heads/main",
                "after": sha,
                "repository": {"full_name": REPO, "default_branch": "main"},
                "commits": [{"added": FILES, "modified": [], "removed": []}],
                "installation": {"id": self.installation},
            }
            self.deliver("github", "push", f"push-{n}", body)
        for sealed in list(self.tasks.held.values()):  # the opener's deferral, retries
            self.survive(lambda sealed=sealed: self.worker.handle("POST", "/", {}, sealed))

    def reruns(self) -> None:
        return  # a re-run makes a batch of its own (tests/integration/test_crash_points.py)

    def names(self) -> list[str]:
        """Every batch made: the groups' and the stray one of the first push."""
        return list(self.gemini.created)

    def items(self) -> list[str | None]:
        return [self.operation_of(tag) for tag in self.tags]

    def quiet(self) -> bool:
        deliveries = [self.ledger.deliveries.get("github", f"push-{n}") for n in range(2)]
        names = [*self.names(), *(i for i in self.items() if i)]
        records = [self.ledger.operations.get(name) for name in names]
        return (
            all(d is not None and d.status == "done" for d in deliveries)
            and all(self.items())
            and self.ledger.deliveries.count("queued") == 0
            and all(r is not None and not r.pending and r.writeback_done for r in records)
            and not any(i.open for r in records if r is not None for i in r.outbox)
        )

    def check_runs_of(self, sha: str) -> list[dict[str, Any]]:
        found = self.simulator.control.check_runs(repo=REPO, sha=sha)
        return [r for r in found if r["name"] == "hookledger review"]

    def comments_of(self, sha: str) -> list[dict[str, Any]]:
        seen = self.simulator.control.github_comments()
        return [c for c in seen["comments"] if sha[:12] in c["body"]]


def assert_each_push_once(world: GroupWorld, point: str) -> None:
    """The invariants in the module docstring, after the world went quiet."""
    groups = {s.id: s.to_dict() or {} for s in world.ledger._commits.collection(GROUPS).stream()}
    members = world.ledger._commits.collection(MEMBERS).stream()
    joined = Counter(str((m.to_dict() or {}).get("tag")) for m in members)
    registered = {g.get("operation") for g in groups.values()}
    for tag, sha, item in zip(world.tags, world.shas, world.items(), strict=True):
        assert joined[tag] == 1, (point, tag, joined)
        assert item is not None and item.startswith("groups/"), (point, item)
        record = world.ledger.operations.get(item)
        assert record is not None and record.status == "succeeded", (point, record)
        for path in FILES:
            review = Reviews(world.ledger).get_review(REPO, sha, path)
            assert review is not None and review["operation"] == item, (point, path, review)
            assert review["status"] == "ok", (point, review)
        [run] = world.check_runs_of(sha)
        assert run["status"] == "completed" and run["details_url"].endswith(item), (point, run)
        [comment] = world.comments_of(sha)  # the stand-in's answers name the batch
        batch = groups[str(record.group)].get("operation")
        assert batch and batch in comment["body"], (point, batch, comment["body"])
    for name in world.names():
        batch = world.gemini.batches[name]
        record = world.ledger.operations.get(name)
        assert record is not None, (point, name)
        if batch.cancel_requested:
            assert record.status == "superseded", (point, name, record.status)
            continue
        assert batch.display_name.startswith(group_tag("")), (point, name, batch.display_name)
        assert name in registered, (point, name, registered)  # no batch without its group
        assert record.kind == "hookledger-group" and record.status == "succeeded", (point, record)


@pytest.fixture
def sharing(monkeypatch):
    monkeypatch.setenv("REVIEW_GROUP_REQUESTS", "4")
    monkeypatch.setenv("REVIEW_GROUP_WINDOW_S", "60")
    monkeypatch.setenv("REVIEW_GROUP_SHARDS", "1")  # both pushes in the one open group


def crash_once_and_go_quiet(world: GroupWorld, point: str) -> None:
    """Rounds of pushes, webhooks and reconcile, dying at `point` once, until quiet."""
    with crashing_at(point) as reached:
        for _ in range(ROUNDS):
            world.push()
            world.webhooks()
            world.reconcile()
            if world.quiet():
                break
            world.clock.advance(ROUND.total_seconds())

    assert world.crashes == [point], f"{point}: the sweep never crashed there ({set(reached)})"
    assert world.quiet(), f"{point}: not quiet after {ROUNDS} rounds"


@pytest.mark.parametrize("point", SWEPT)
def test_a_crash_at_each_step_of_a_shared_batch_ends_with_each_push_once(
    point, firestore_client, simulator
):
    simulator.control.reset()
    world = GroupWorld(firestore_client, simulator)
    crash_once_and_go_quiet(world, point)
    assert_each_push_once(world, point)


def test_every_group_point_is_reached_on_the_way_through(firestore_client, simulator):
    simulator.control.reset()
    world = GroupWorld(firestore_client, simulator)
    reached: list[str] = []
    crashpoints.install(reached.append)
    try:
        for _ in range(4):
            world.push()
            world.webhooks()
            world.reconcile()
            world.clock.advance(ROUND.total_seconds())
    finally:
        crashpoints.install(None)

    assert set(SWEPT) - set(reached) == set()
    assert world.quiet()
    assert_each_push_once(world, "none")


class PoisonedWorld(GroupWorld):
    """The first push's requests are refused by Gemini in any batch: by index (`named`),
    or with a 400 that names none, which the sealer narrows down by halves."""

    def __init__(self, firestore_client: Any, simulator: Any, *, named: bool) -> None:
        super().__init__(firestore_client, simulator)
        create = self.gemini.create_batch

        def refusing(model: str, requests: Any, display_name: str, **kw: Any) -> str:
            bad = [i for i, (key, _) in enumerate(requests) if key.startswith("0/")]
            if bad and named:
                where = "".join(f"* requests[{i}].request: refused\n" for i in bad)
                raise GeminiRejected(f"create batch {display_name}: 400 {where}",
                                     status=400, request_indices=bad)  # fmt: skip
            if bad:
                raise GeminiRejected(f"create batch {display_name}: 400 invalid", status=400)
            return create(model, requests, display_name, **kw)

        self.gemini.create_batch = refusing  # type: ignore[method-assign]


POISON_SWEPT = [
    *FAILING_POINTS,
    "group.rows_kept",
    "group.sealed",
    "group.before_create",
    "group.batch_created",
    "settle.before_commit",
    "settle.committed",
    "outbox.leased",
]


def assert_poisoned_push_failed_once(world: PoisonedWorld, point: str) -> None:
    failed_item, good_item = world.items()
    failed = world.ledger.operations.get(str(failed_item))
    assert failed is not None and failed.status == "failed", (point, failed)
    assert failed.error["reason"] == "request_refused", (point, failed.error)
    good = world.ledger.operations.get(str(good_item))
    assert good is not None and good.status == "succeeded", (point, good)
    for sha in world.shas:
        [run] = world.check_runs_of(sha)
        assert run["status"] == "completed", (point, run)
    for name in world.names():
        batch = world.gemini.batches[name]
        assert all(not key.startswith("0/") for key in batch.keys), (point, batch.keys)
        if not batch.cancel_requested:
            record = world.ledger.operations.get(name)
            assert record is not None and record.status == "succeeded", (point, record)


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
@pytest.mark.parametrize("point", POISON_SWEPT)
def test_a_crash_at_each_step_of_a_poisoned_group_fails_the_poisoned_push_once(
    point, named, firestore_client, simulator
):
    simulator.control.reset()
    world = PoisonedWorld(firestore_client, simulator, named=named)
    crash_once_and_go_quiet(world, point)
    assert_poisoned_push_failed_once(world, point)
