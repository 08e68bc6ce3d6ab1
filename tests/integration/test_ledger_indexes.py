"""Every query the code makes is served by an index terraform/firestore_indexes.json declares.

Each read of the ledger runs against the emulator while `capture_queries` records the
requests as sent; `missing_index` (tests/firestore_indexes.py) matches each against the
declared composite indexes and the single-field indexes Terraform leaves on. The set of
queries is complete because every query goes through `Commits.stream`/`Commits.count` with
a label, and the labels run here must equal the labels in the source.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from google.cloud import firestore

from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.ledger import Ledger, Recovery
from tests.firestore_indexes import (
    SPEC,
    QueryLog,
    capture_queries,
    load_spec,
    missing_index,
    shape_of,
)
from tests.ledger_parts import emptied_clients, installation_event, ledger_parts

REPO = Path(__file__).resolve().parents[2]
DEPLOYED = ("shared", "functions", "hookledger")  # what runs against production Firestore
# ...but the test kit, which reads whole collections of its own emulator only.
EMULATOR_ONLY = ("hookledger/testing/",)
QUERY_BUILDERS = {"where", "order_by", "start_after", "start_at", "end_at", "end_before"}
QUERY_RUNNERS = {"stream", "count"}


@functools.cache
def _modules() -> list[tuple[Path, ast.AST]]:
    files = sorted(
        p
        for top in DEPLOYED
        for p in (REPO / top).rglob("*.py")
        if not p.relative_to(REPO).as_posix().startswith(EMULATOR_ONLY)
    )
    return [(path, ast.parse(path.read_text())) for path in files]


def _method_calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


def _label_head(node: ast.expr) -> str:
    """The constant start of a label, up to its first space (`f"operation {name}"`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(" ", 1)[0]
    if isinstance(node, ast.JoinedStr) and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value).split(" ", 1)[0]
    raise AssertionError(f"line {node.lineno}: a query label must start with a constant")


def query_labels_in_source() -> set[str]:
    """The label of every `….commits.stream(query, label)` / `.count(query, label)` call."""
    labels = set()
    for _, tree in _modules():
        for call in _method_calls(tree, QUERY_RUNNERS):
            receiver = ast.unparse(call.func.value)  # type: ignore[attr-defined]
            if receiver.endswith("commits") and len(call.args) == 2:
                labels.add(_label_head(call.args[1]))
    return labels


def exercise_every_read(parts: Ledger, clock: FakeClock) -> None:
    """Call each public read of the ledger's parts, with and without each filter and cursor."""
    ops, queries, deliveries = parts.operations, parts.queries, parts.deliveries
    since = clock() - timedelta(hours=1)

    ops.get("a")  # a bare id: looked up by short_id
    [first_due] = ops.due_pending(clock(), 1)
    ops.due_pending(clock(), 1, first_due)
    parts.outbox.sweep(lambda item: None, timedelta(0), 10)

    [delivery] = deliveries.listing(None, 1)
    for status, source, event in itertools.product(
        [None, "queued"], [None, "github"], [None, "push"]
    ):
        deliveries.listing(status, 5, source=source, event=event, start_after=delivery)
    deliveries.find("d-1")
    deliveries.count()
    deliveries.count("dead")

    [operation] = queries.list_operations(limit=1)
    for status, kind, by in itertools.product([None, "pending"], [None, "k"], [None, "webhook"]):
        queries.list_operations(status, kind, by, 5, operation)
        queries.operations_page(status, kind, by, submitted_since=since, limit=5)
        if by is None:
            queries.count_operations(status, kind)
    queries.oldest_pending()
    queries.stuck_alerted(3)
    queries.count_stuck_alerted()
    queries.find_operation("context.sha", "s1")
    queries.find_operation("context.display_name", "tag-1")

    parts.console.count_settled("webhook", since, clock())
    parts.console.webhook_deliveries_since("gemini", since, 10)

    Reviews(parts).reviews_for("batches/b")
    Reviews(parts).reviews_for_push("o/r", "s1")
    Reviews(parts).count_for_push("o/r", "s1")

    [run] = parts.runs.recent(1)
    parts.runs.recent(5, (run.finished_at, run.run_id))
    parts.runs.for_operation("batches/a")

    parts.installations.get(7)
    for status in (None, "suspended"):
        [first] = parts.installations.listing(status, 1)
        parts.installations.listing(status, 5, after=first.installation_id)

    parts.submissions.open_claims(clock(), 5)  # adoption: open claims, longest ended first

    parts.recoveries.open_page(5)
    parts.recoveries.open_page(5, "g-1")
    parts.recoveries.recent(5)
    parts.recoveries.count()
    parts.recoveries.count("open")

    parts.groups.due(clock(), 5)
    parts.groups.queue.waiting(5)  # sealed groups waiting their turn at Gemini's quota


def recovery(guid: str, at: Any) -> Recovery:
    """An open recovery of a failed GitHub push delivery."""
    return Recovery(
        guid=guid,
        event="push",
        action=None,
        github_delivery_id=1,
        repository_id=2,
        installation_id=3,
        failed_at=at,
        found_at=at,
        status="open",
    )


def seed(parts: Ledger, clock: FakeClock) -> None:
    parts.operations.register("batches/a", "k", {"sha": "s1", "display_name": "tag-1"})
    parts.operations.register("batches/b", "k")
    parts.operations.settle("batches/b", "succeeded", "webhook", outbox=[{"n": 1}])
    parts.deliveries.record("github", "d-1", "push")
    parts.runs.record(clock(), clock(), {"examined": 1}, examined_ops=["batches/a"])
    parts.installations.apply(
        installation_event(7, suspended=True), received_at=clock(), delivery_id="d-i1"
    )
    parts.recoveries.open_once(recovery("g-1", clock()))
    parts.submissions.claim(
        "tag-2", delivery_id="d-1", attempt="a1", lease_until=clock(), now=clock()
    )
    clock.advance(3600)


@pytest.fixture(scope="module")
def exercised(firestore_emulator: str) -> QueryLog:
    """The queries of one run of every read (the tests only look at what was sent)."""
    clock = FakeClock()
    with emptied_clients(firestore_emulator) as (client, _), pytest.MonkeyPatch.context() as patch:
        parts = ledger_parts(client, clock)
        with capture_queries(patch) as log:
            seed(parts, clock)
            exercise_every_read(parts, clock)
    return log


def test_every_query_is_served_by_a_declared_index(exercised: QueryLog) -> None:
    spec = load_spec()
    problems = {f"{q.label}: {p}" for q in exercised.queries if (p := missing_index(q.shape, spec))}
    assert sorted(problems) == []


def test_every_query_in_the_code_was_run_here(exercised: QueryLog) -> None:
    # A query not made through a labelled Commits call could not be counted here.
    assert None not in exercised.labels()
    assert exercised.labels() == query_labels_in_source()


def test_queries_are_built_and_run_only_by_the_ledger() -> None:
    strays = []
    for path, tree in _modules():
        relative = path.relative_to(REPO).as_posix()
        in_ledger = relative.startswith("shared/ledger/")
        for call in _method_calls(tree, QUERY_BUILDERS | {"stream"}):
            receiver = ast.unparse(call.func.value)  # type: ignore[attr-defined]
            name = call.func.attr  # type: ignore[attr-defined]
            runs_itself = name == "stream" and not receiver.endswith("commits")
            if not in_ledger or (runs_itself and relative != "shared/ledger/commits.py"):
                strays.append(f"{relative}:{call.lineno} {receiver}.{name}(")
    assert strays == []


def test_every_declared_composite_index_serves_a_query(exercised: QueryLog) -> None:
    """Remove any one index and some query goes unserved: none is missing, none is spare."""
    data = json.loads(SPEC.read_text())
    spare = []
    for n, index in enumerate(data["indexes"]):
        without = load_spec({**data, "indexes": data["indexes"][:n] + data["indexes"][n + 1 :]})
        if not any(missing_index(q.shape, without) for q in exercised.queries):
            spare.append(index["purpose"])
    assert spare == []


@pytest.mark.parametrize(
    "name, build",
    [
        (
            "equality then an order no index lists",
            lambda c: (
                c.collection("operations")
                .where(filter=firestore.FieldFilter("kind", "==", "k"))
                .order_by("submitted_at")
            ),
        ),
        (
            "the declared fields in the other direction",
            lambda c: (
                c.collection("deliveries")
                .where(filter=firestore.FieldFilter("status", "==", "done"))
                .order_by("received_at")
            ),
        ),
        (
            "__name__ against the index's direction",
            lambda c: (
                c.collection("operations")
                .where(filter=firestore.FieldFilter("status", "==", "pending"))
                .order_by("next_check_at")
                .order_by("__name__", direction=firestore.Query.DESCENDING)
            ),
        ),
        (
            "a not-null filter is a range, ordered after the explicit order",
            lambda c: (
                c.collection("operations")
                .where(filter=firestore.FieldFilter("kind", "!=", None))
                .order_by("submitted_at", direction=firestore.Query.DESCENDING)
            ),
        ),
        (
            "a single-field order on an exempted timestamp",
            lambda c: c.collection("operations").order_by("settled_at"),
        ),
        (
            "an equality on an exempted field",
            lambda c: c.collection("deliveries").where(
                filter=firestore.FieldFilter("payload_ref", "==", "x")
            ),
        ),
    ],
)
def test_the_checker_refuses_a_query_no_declared_index_serves(
    firestore_client: Any, name: str, build: Any
) -> None:
    shape = shape_of(build(firestore_client)._to_protobuf())
    assert missing_index(shape, load_spec()) is not None, name
