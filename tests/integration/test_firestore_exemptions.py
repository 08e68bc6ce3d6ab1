"""Single-field indexes only where a query reads them (terraform/firestore_indexes.json).

A collection whose indexed field increases with every write (a timestamp, the TTL field)
holds about 500 writes/s, and every indexed field costs write latency and storage; a
composite index never needs the single-field index of its fields. So every field the
ledger writes is either read by a query through its single-field index (derived from the
queries captured in test_ledger_indexes.py) or listed as `unindexed`, and not both.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from apps.review.results import put_review
from local.fakes import FakeClock
from shared.errors import PermanentError
from shared.gemini import Row
from shared.handoff.payloads import FirestorePayloadStore
from shared.ledger import Ledger
from shared.ledger.recoveries import Checkpoint, ScanPosition
from shared.ledger.submissions import Submissions
from tests.firestore_indexes import capture_queries, load_spec, single_field_needs
from tests.integration.test_ledger_indexes import exercise_every_read, recovery, seed
from tests.ledger_parts import emptied_clients, installation_event, ledger_parts

# The ledger's collections and the claim store's, each with its database in firestore.tf.
LEDGER = (
    "operations",
    "deliveries",
    "reviews",
    "submissions",
    "reconcile_runs",
    "reconcile_state",
    "installations",
    "bodies",
    "github_recoveries",
    "batch_groups",
    "group_heads",
    "group_requests",
    "group_members",
    "group_lanes",
    "group_rows",
    "group_alerts",
    "group_queue",
)
CLAIMS = ("payloads", "chunks")
MAX_FIELD_CONFIGS = 200  # per database: https://cloud.google.com/firestore/docs/ttl#limits


def write_every_field(parts: Ledger, clock: FakeClock) -> None:
    """Drive each write path the ledger has, so each field it stores is written once."""
    ops = parts.operations
    ops.register("batches/w", "review", {"repo": "o/r", "sha": "s2", "paths": ["a.md"]})
    ops.defer("batches/w", clock() + timedelta(minutes=5), 1, answer="still running")
    ops.mark_stuck_alerted("batches/w", clock(), timedelta(hours=1))
    ops.mark_waiting_alerted("batches/w", clock(), timedelta(hours=1))
    ops.mark_not_found("batches/w", clock())

    def reviews(writes: Any, record: Any) -> None:
        put_review(writes, "o/r", "s2", "a.md", {"status": "ok", "text": "t", "truncated": True})
        put_review(
            writes,
            "o/r",
            "s2",
            "b.md",
            {"status": "error", "error": "e", "blocked": True, "block_reason": "SAFETY"},
        )
        put_review(writes, "o/r", "s2", "d.md", {"status": "error", "error": "e", "refused": True})
        put_review(
            writes, "o/r", "s2", "c.md", {"status": "ok", "text": "", "finish_reason": "MAX_TOKENS"}
        )

    ops.settle(
        "batches/w",
        "succeeded",
        "webhook",
        error={"message": "partly"},
        writeback=reviews,
        outbox=[{"comment": 1}],
        result_counts={"succeeded": 1},
        outcome={"partial": True},
    )
    parts.outbox.deliver("batches/w", lambda item: None)

    def refused(writes: Any, record: Any) -> None:
        raise PermanentError("refused")

    ops.register("batches/x", "review")
    ops.settle("batches/x", "failed", "reconcile", writeback=refused)

    subs: Submissions = parts.submissions
    until = clock() + timedelta(minutes=10)
    subs.claim(
        "tag-w",
        delivery_id="d-2",
        attempt="a1",
        lease_until=until,
        now=clock(),
        context={"repo": "o/r"},
    )
    subs.register_winner("tag-w", "batches/y", "review", {"repo": "o/r"})
    subs.claim("tag-o", delivery_id="d-2", attempt="a1", lease_until=until, now=clock())  # open
    ops.record_superseded(
        "batches/z", "review", {"repo": "o/r"}, winner="batches/y", outbox=[{"cancel": 1}]
    )

    deliveries = parts.deliveries
    deliveries.record(
        "github",
        "d-2",
        "push",
        payload={"ref": "main"},
        attempt="a1",
        lease_for=timedelta(minutes=10),
    )
    deliveries.end_attempt("github", "d-2", "a1", "done", "an error")
    deliveries.record("github", "d-4", "push", payload=b'{"ref": "main"}')  # its body's record
    deliveries.record("gemini", "d-3", "batch.succeeded", payload_ref="gemini:d-3")

    parts.runs.record(clock(), clock(), {"examined": 1}, examined_ops=["batches/w"], budget_s=60.0)
    # The old adoption's watermark: no code writes it now, old deployments hold it.
    parts.watermark._ref().set({"listed_at": clock()})

    recoveries = parts.recoveries
    recoveries.open_once(recovery("g-2", clock()))
    [opened] = [r for r in recoveries.open_page() if r.guid == "g-2"]
    fields = {"via": "redelivery", "redelivered_at": clock(), "handed_off_at": clock()}
    fields |= {"sweep_run": "sweep-1", "trace_id": "t" * 32, "alerted_at": clock()}
    recoveries.change(opened, last_error="e", **fields)
    [changed] = recoveries.get_many(["g-2"]).values()
    recoveries.change(changed, status="recovered", recovered_at=clock(), after_s=1.5)
    position = ScanPosition("https://api.github.com/app/hook/deliveries?cursor=x", clock(), None)
    recoveries.save_checkpoint(
        Checkpoint(clock(), position, clock()), run_id="sweep-1", at=clock(), listed=1
    )

    write_groups(parts, clock)

    installations = parts.installations
    installations.apply(installation_event(8), received_at=clock(), delivery_id="d-i2")
    installations.apply(
        installation_event(8, suspended=True, updated_at=clock()),
        received_at=clock(),
        delivery_id="d-i3",
    )


def join_group(parts: Ledger, clock: FakeClock, tag: str, path: str, max_requests: int = 5) -> str:
    """One item claimed, its requests stored and joined; its group's id."""
    from shared.ledger.groups import JoinRequest
    from shared.sharing import Sharing

    until = clock() + timedelta(minutes=10)
    parts.submissions.claim(
        tag, delivery_id=f"d-{tag}", attempt=tag, lease_until=until, now=clock()
    )
    pages, size = parts.groups.store_requests(tag, tag, [(path, f"review {path}")])
    joined = parts.groups.join(
        JoinRequest(
            tag=tag,
            attempt=tag,
            kind="review",
            model="m",
            generation_config={"temperature": 0},
            sharing=Sharing(max_requests, 60),
            pages=pages,
            requests=1,
            bytes=size,
            context={"repo": "o/r"},
        )
    )
    assert joined.group is not None
    return joined.group.gid


def write_groups(parts: Ledger, clock: FakeClock) -> None:
    """A shared batch's group: an item joined, the group sealed, deferred, held, its item
    refused, its batch registered and its rows kept, finished; a second group whose batch
    failed; a vacant claim; and an item whose write-back takes more than one commit."""
    gid = join_group(parts, clock, "item-w", "a.md")
    parts.groups.seal(gid)
    parts.groups.defer(gid, clock())
    parts.groups.hold(gid, clock(), "403")
    parts.groups.refuse(gid, {0: "refused"})
    [whole] = parts.groups.get(gid).parts
    parts.groups.registered(gid, whole, "batches/g")
    parts.groups.failed_through(gid, 1)
    parts.groups.finished(gid)
    parts.groups.first_alert("gemini_refused_deployment", clock(), timedelta(minutes=30))
    parts.group_rows.store("batches/g", "JOB_STATE_SUCCEEDED", clock(), {0: [Row("a.md", "t")]})
    until = clock() + timedelta(minutes=10)
    parts.submissions.claim(
        "item-v", delivery_id="d-6", attempt="a6", lease_until=until, now=clock()
    )
    parts.submissions.release("item-v", attempt="a6", now=clock(), created_nothing=True)
    second = join_group(parts, clock, "item-x", "b.md")  # sealed above: a group of its own
    [part] = parts.groups.seal(second).parts
    parts.groups.queue.pause(clock() + timedelta(seconds=30))  # a 429 queued it
    parts.groups.queue.enqueue(second)
    parts.groups.part_failed(second, part, "held past its limit")
    third = join_group(parts, clock, "item-q", "c.md")  # still queued when read
    parts.groups.seal(third)
    parts.groups.queue.enqueue(third)
    parts.groups.queue.served(second)
    write_lanes(parts, clock)


def write_lanes(parts: Ledger, clock: FakeClock) -> None:
    """A busy group of lanes: a first group joined three times in its first second, so the
    next opens with six lanes (half a join a second each); three items join it (its opener lane 0, the next two
    lanes in turn), and it is sealed."""
    first = join_group(parts, clock, "lane-0", "l0.md", max_requests=1000)
    for n in (1, 2):
        assert join_group(parts, clock, f"lane-{n}", f"l{n}.md", max_requests=1000) == first
    parts.groups.seal(first)
    gids = {join_group(parts, clock, f"lane-{n}", f"l{n}.md", max_requests=1000) for n in (3, 4, 5)}
    [busy] = gids
    group = parts.groups.seal(busy)
    assert group.lanes == 6 and sum(group.lane_counts) == 3 and group.lane_counts[0], group
    assert sum(group.lane_counts[1:]), group

    def many(writes: Any, record: Any) -> None:
        for n in range(401):
            put_review(writes, "o/r", "s3", f"{n}.md", {"status": "ok", "text": "t"})

    parts.operations.register("batches/paged", "review")
    parts.operations.settle("batches/paged", "succeeded", "webhook", writeback=many)


def field_paths(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every field path and value, into maps (not into arrays: their maps are whole values)."""
    for key, value in data.items():
        path = f"{prefix}{key}"
        yield path, value
        if isinstance(value, Mapping):
            yield from field_paths(value, f"{path}.")


def written_fields(client: Any, claims_client: Any) -> dict[tuple[str, str], Any]:
    found: dict[tuple[str, str], Any] = {}
    for db, collections in ((client, LEDGER), (claims_client, CLAIMS)):
        for collection in collections:
            for snapshot in db.collection_group(collection).stream():
                for path, value in field_paths(snapshot.to_dict() or {}):
                    found.setdefault((collection, path), value)
    return found


@pytest.fixture(scope="module")
def fields_and_needs(
    firestore_emulator: str,
) -> tuple[dict[tuple[str, str], Any], set[tuple[str, str]]]:
    """(each field written, with a value) and (each field a query reads by its single-field index)."""
    clock = FakeClock()
    with (
        emptied_clients(firestore_emulator) as (client, claims),
        pytest.MonkeyPatch.context() as patch,
    ):
        parts = ledger_parts(client, clock)
        with capture_queries(patch) as log:
            seed(parts, clock)
            exercise_every_read(parts, clock)
        write_every_field(parts, clock)
        FirestorePayloadStore(claims, clock, chunk_bytes=4).put("github:d-9", b"0123456789")
        written = written_fields(client, claims)
    needs = {
        (q.shape.collection, f) for q in log.queries for f in single_field_needs(q.shape) or ()
    }
    return written, needs


def _top(path: str) -> str:
    return path.split(".", 1)[0]


def test_no_field_a_query_reads_through_its_single_field_index_is_exempted(
    fields_and_needs: Any,
) -> None:
    _, needs = fields_and_needs
    spec = load_spec()
    assert sorted(n for n in needs if spec.is_exempted(*n)) == []
    assert ("operations", "short_id") in needs  # the capture saw the single-field reads


def test_every_timestamp_no_query_reads_is_exempted(fields_and_needs: Any) -> None:
    written, needs = fields_and_needs
    spec = load_spec()
    timestamps = {key for key, value in written.items() if isinstance(value, datetime)}
    assert ("operations", "expire_at") in timestamps and ("payloads", "created_at") in timestamps
    assert sorted(k for k in timestamps - needs if not spec.is_exempted(*k)) == []


def test_the_exemptions_are_exactly_the_written_fields_no_query_reads(
    fields_and_needs: Any,
) -> None:
    """At the top level; a map a query reads into (`context`) keeps its indexes whole."""
    written, needs = fields_and_needs
    spec = load_spec()
    read_tops = {(c, _top(f)) for c, f in needs}
    top_level = {(c, f) for c, f in written if "." not in f}
    assert sorted(top_level - read_tops - spec.exempted) == [], "indexed, but no query reads it"
    assert sorted(spec.unindexed - top_level) == [], "exempted, but never written"


def test_each_field_has_one_configuration_within_the_documented_limit() -> None:
    spec = load_spec()
    # One google_firestore_field per field: a TTL field's resource already exempts it.
    assert sorted(spec.ttl & spec.unindexed) == []
    for collections in (LEDGER, CLAIMS):
        configs = [k for k in spec.exempted if k[0] in collections]
        assert len(configs) <= MAX_FIELD_CONFIGS
