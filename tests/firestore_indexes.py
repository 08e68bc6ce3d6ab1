"""Which declared index serves a query, by Firestore's documented rules (the emulator never says).

The emulator runs any query without an index; production refuses one whose composite index
is missing, and cannot serve one from a single-field index that Terraform exempted. So the
tests capture each query as sent (`capture_queries`: the GAPIC `run_query` and
`run_aggregation_query` calls, labelled by the `Commits.stream`/`Commits.count` call that
made them) and `missing_index` matches its shape against terraform/firestore_indexes.json:

- no filter and no order: the built-in `__name__` index;
- equality filters only (`==`, `in`, `array-contains`): the single-field indexes of each
  field, merged (so none may be exempted);
- one field, ranged and/or ordered, `__name__` in the same direction: its single-field index;
- anything else: a composite index listing the equality fields first (any order), then the
  order-by fields (explicit, then inequality fields the server appends) in order and
  direction, with `__name__` implied in the last field's direction unless listed.

Conservative on purpose: Firestore can also merge composite indexes, which this never
assumes, so a shape it accepts is served, and one it refuses may at worst need no new index.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPEC = Path(__file__).resolve().parents[1] / "terraform" / "firestore_indexes.json"
NAME = "__name__"
ASC, DESC = "ASCENDING", "DESCENDING"
EQUALITY_OPS = {"EQUAL", "IN"}
ARRAY_OPS = {"ARRAY_CONTAINS", "ARRAY_CONTAINS_ANY"}
UNARY_EQUALITY = {"IS_NULL", "IS_NAN"}


@dataclass(frozen=True)
class Shape:
    """What of a query decides its index: collection, filter fields by kind, and order."""

    collection: str
    equality: frozenset[str] = frozenset()
    array: frozenset[str] = frozenset()
    inequality: frozenset[str] = frozenset()
    orders: tuple[tuple[str, str], ...] = ()
    all_descendants: bool = False

    def describe(self) -> str:
        parts = [f"{self.collection}:"]
        parts += [f"{f} ==" for f in sorted(self.equality)]
        parts += [f"{f} array-contains" for f in sorted(self.array)]
        parts += [f"{f} range" for f in sorted(self.inequality)]
        parts += [f"order {f} {d}" for f, d in self.orders]
        return " ".join(parts)


@dataclass(frozen=True)
class Spec:
    """terraform/firestore_indexes.json: composite indexes and fields without single-field ones."""

    composites: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    ttl: frozenset[tuple[str, str]]
    unindexed: frozenset[tuple[str, str]]

    @property
    def exempted(self) -> frozenset[tuple[str, str]]:
        """(collection, field) pairs whose single-field indexes Terraform turns off."""
        return self.ttl | self.unindexed

    def is_exempted(self, collection: str, path: str) -> bool:
        """A map field's exemption covers its subfields too."""
        parts = path.split(".")
        return any(
            (collection, ".".join(parts[:n])) in self.exempted for n in range(1, len(parts) + 1)
        )


def load_spec(data: dict[str, Any] | None = None) -> Spec:
    spec = data if data is not None else json.loads(SPEC.read_text())
    composites = tuple(
        (
            index["collectionGroup"],
            tuple(
                (f["fieldPath"], f.get("order") or f"ARRAY_{f['arrayConfig']}")
                for f in index["fields"]
            ),
        )
        for index in spec["indexes"]
    )
    ttl = frozenset((t["collectionGroup"], t["field"]) for t in spec["ttl"])
    unindexed = frozenset(
        (group["collectionGroup"], name)
        for group in spec.get("unindexed", [])
        for name in group["fields"]
    )
    return Spec(composites, ttl, unindexed)


def shape_of(structured_query: Any) -> Shape:
    """The `Shape` of a `StructuredQuery` (proto-plus or raw protobuf)."""
    from google.cloud.firestore_v1.types import StructuredQuery

    query = structured_query
    if isinstance(query, StructuredQuery):
        query = StructuredQuery.pb(query)
    [source] = query.from_
    equality: set[str] = set()
    array: set[str] = set()
    inequality: set[str] = set()
    if query.HasField("where"):
        for path, op in _filters(query.where):
            if op in EQUALITY_OPS or op in UNARY_EQUALITY:
                equality.add(path)
            elif op in ARRAY_OPS:
                array.add(path)
            else:
                inequality.add(path)
    direction = {1: ASC, 2: DESC, 0: ASC}
    orders = tuple((o.field.field_path, direction[o.direction]) for o in query.order_by)
    return Shape(
        source.collection_id,
        frozenset(equality),
        frozenset(array),
        frozenset(inequality),
        orders,
        source.all_descendants,
    )


def _filters(where: Any) -> Iterator[tuple[str, str]]:
    """(field path, operator name) of each filter of an AND."""
    which = where.WhichOneof("filter_type")
    if which == "composite_filter":
        if where.composite_filter.op != 1:  # AND; an OR is a union of queries, not handled here
            raise AssertionError(f"unsupported composite filter: {where.composite_filter}")
        for sub in where.composite_filter.filters:
            yield from _filters(sub)
    elif which == "field_filter":
        op = type(where.field_filter).Operator.Name(where.field_filter.op)
        yield where.field_filter.field.field_path, op
    else:  # IS_NULL and IS_NAN are equalities, IS_NOT_NULL and IS_NOT_NAN ranges
        op = type(where.unary_filter).Operator.Name(where.unary_filter.op)
        yield where.unary_filter.field.field_path, op


def order_needed(shape: Shape) -> tuple[list[tuple[str, str]], str]:
    """The index order a shape reads (without `__name__`) and the direction of `__name__`."""
    orders = [(f, d) for f, d in shape.orders if f not in shape.equality]
    # The server orders by inequality fields it was not told to order by, ascending.
    ordered = {f for f, _ in orders}
    orders += [(f, ASC) for f in sorted(shape.inequality - ordered)]
    name_direction = orders[-1][1] if orders else ASC
    if orders and orders[-1][0] == NAME:
        orders = orders[:-1]
    return orders, name_direction


def single_field_needs(shape: Shape) -> set[str] | None:
    """Fields whose automatic single-field indexes serve `shape`; None if it needs a composite."""
    orders, name_direction = order_needed(shape)
    filtered = shape.equality | shape.array
    if not orders:
        return set(filtered)  # equality only: one index per field, merged
    if len(orders) == 1 and not filtered and orders[0][1] == name_direction:
        return {orders[0][0]}
    return None


def missing_index(shape: Shape, spec: Spec) -> str | None:
    """None when a declared index serves `shape`; else what it needs, in words."""
    if shape.all_descendants:
        return f"{shape.describe()}: a collection-group query needs its own declared index"
    single = single_field_needs(shape)
    if single is not None:
        exempted = sorted(f for f in single if spec.is_exempted(shape.collection, f))
        if exempted:
            return f"{shape.describe()}: needs the single-field index of {exempted}, exempted"
        return None
    orders, name_direction = order_needed(shape)
    prefix_width = len(shape.equality | shape.array)
    for collection, fields in spec.composites:
        if collection != shape.collection:
            continue
        index = list(fields)
        index_name_direction = index[-1][1]
        if index[-1][0] == NAME:
            index_name_direction = index.pop()[1]
        prefix, rest = index[:prefix_width], index[prefix_width:]
        equality_ok = {f for f, o in prefix if not o.startswith("ARRAY_")} == shape.equality
        array_ok = {f for f, o in prefix if o.startswith("ARRAY_")} == shape.array
        if equality_ok and array_ok and rest == orders and index_name_direction == name_direction:
            return None
    return f"{shape.describe()}: no declared composite index serves it"


@dataclass
class Captured:
    """One query as sent: the `Commits` call that made it (None if none did) and its shape."""

    label: str | None
    shape: Shape
    aggregation: bool = False


@dataclass
class QueryLog:
    queries: list[Captured] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)

    def labels(self) -> set[str | None]:
        return {q.label for q in self.queries}


@contextlib.contextmanager
def capture_queries(monkeypatch: Any) -> Iterator[QueryLog]:
    """Record every RunQuery / RunAggregationQuery request while the block runs."""
    from google.cloud.firestore_v1.services.firestore.client import FirestoreClient

    from shared.ledger.commits import Commits

    log = QueryLog()
    real_run, real_aggregate = FirestoreClient.run_query, FirestoreClient.run_aggregation_query
    real_stream, real_count = Commits.stream, Commits.count

    def run_query(self: Any, request: Any = None, **kwargs: Any) -> Any:
        log.queries.append(Captured(_label(log), shape_of(request["structured_query"])))
        return real_run(self, request=request, **kwargs)

    def run_aggregation_query(self: Any, request: Any = None, **kwargs: Any) -> Any:
        nested = request["structured_aggregation_query"].structured_query
        log.queries.append(Captured(_label(log), shape_of(nested), aggregation=True))
        return real_aggregate(self, request=request, **kwargs)

    def labelled(real: Any) -> Any:
        def call(self: Any, query: Any, what: str) -> Any:
            log._local.label = _label_key(what)
            try:
                return real(self, query, what)
            finally:
                log._local.label = None

        return call

    monkeypatch.setattr(FirestoreClient, "run_query", run_query)
    monkeypatch.setattr(FirestoreClient, "run_aggregation_query", run_aggregation_query)
    monkeypatch.setattr(Commits, "stream", labelled(real_stream))
    monkeypatch.setattr(Commits, "count", labelled(real_count))
    yield log


def _label(log: QueryLog) -> str | None:
    return getattr(log._local, "label", None)


def _label_key(what: str) -> str:
    """A label's constant head: `f"operation {name}"` and `"operation batches/a"` match."""
    return what.split(" ", 1)[0]
