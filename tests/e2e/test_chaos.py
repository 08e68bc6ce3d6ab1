"""The chaos suite at a reduced size (3-4 pushes per scenario, more for the shared-batch
faults) against one whole local stack, every scenario sharing batches: each scenario's
invariants over the whole database must hold. A scenario whose fault needs a feature the
stack lacks is skipped with its reason (see local/chaos/scenarios.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apps.review.check_runs import CHECK_RUN
from apps.review.checks import CHECK_NAME
from local.chaos import REDUCED_SIZES, SCENARIOS, Chaos, ChaosStack
from local.chaos.invariants import (
    check_run_problems,
    group_problems,
    item_problems,
    outcome_problems,
    review_problems,
    settle_log_counts,
)
from local.chaos.load import Push
from local.chaos.sharing import Item, Stored, for_size, part_of_tag, settled_by_gemini
from shared.ledger import Operation, OutboxItem
from shared.ledger.groups import OPEN, SEALED, Group, Part, group_tag, member_name


@pytest.fixture(scope="module")
def chaos() -> Iterator[Chaos]:
    # The worker starts sharing as most reduced scenarios do (local/chaos/sharing.py).
    with ChaosStack.started(sharing=for_size(REDUCED_SIZES["lost-webhooks"])) as stack:
        yield Chaos(stack)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_keeps_every_invariant(chaos: Chaos, name: str) -> None:
    SCENARIOS[name](chaos, REDUCED_SIZES[name])
    row = chaos.rows[-1]
    assert row.scenario == name
    if row.passed is None:
        pytest.skip(row.skipped)
    assert row.violations == [], f"{name}: {row.observed}"
    assert row.passed
    assert row.observed.startswith(f"{row.size} ops, {2 * row.size} reviews"), row.observed
    if chaos.stack.app is not None:  # as a GitHub App: one check run per push, completed
        assert f"; {row.size} check runs completed" in row.observed, row.observed


# The checks themselves, on hand-made records (no emulator): each must be able to fail.


def _settled_line(operation: str) -> str:
    return json.dumps({"message": "operation settled", "operation": operation, "by": "webhook"})


def test_settle_log_counts_sees_a_second_settlement() -> None:
    lines = [_settled_line("batches/a"), "plain text", _settled_line("batches/a")]
    lines.append(json.dumps({"message": "operation settled later", "operation": "batches/b"}))
    assert settle_log_counts(lines) == {"batches/a": 2}


@dataclass
class _Snapshot:
    doc: dict[str, Any]
    create_time: datetime
    update_time: datetime

    def to_dict(self) -> dict[str, Any]:
        return self.doc


def _operation(status: str, update_time: datetime) -> Operation:
    return Operation(
        name="batches/a",
        doc_id="a",
        kind="github-review",
        status=status,
        submitted_at=update_time,
        attempts=0,
        next_check_at=None,
        writeback_done=status != "pending",
        context={"sha": "abc"},
        update_time=update_time,
    )


REVIEW = {"repo": "o/r", "sha": "abc", "path": "docs/x.md", "operation": "batches/a"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(seconds=1)


@pytest.mark.parametrize(
    ("name", "status", "created", "updated", "op_updated", "complaint"),
    [
        ("written once in the settling commit", "succeeded", T0, T0, T0, None),
        ("rewritten after creation", "succeeded", T0, T1, T1, "rewritten"),
        ("committed apart from the settlement", "succeeded", T0, T0, T1, "committed at"),
        ("written for a pending operation", "pending", T0, T0, T0, "still pending"),
    ],
)
def test_review_checks(
    name: str,
    status: str,
    created: datetime,
    updated: datetime,
    op_updated: datetime,
    complaint: str | None,
) -> None:
    snapshot = _Snapshot(dict(REVIEW), created, updated)
    problems = review_problems(snapshot, {"batches/a": _operation(status, op_updated)})
    if complaint is None:
        assert problems == [], name
    else:
        assert len(problems) == 1 and complaint in problems[0], name


def _with_check_run_items(op: Operation, external_id: str, given_up: bool = False) -> Operation:
    items = tuple(
        OutboxItem(
            operation=op.name,
            index=index,
            idempotency_key=f"{op.name}:{role}",
            payload={"kind": CHECK_RUN, "role": role, "external_id": external_id},
            delivered_at=None if given_up else T1,
            given_up_at=T1 if given_up else None,
            given_up_reason="403" if given_up else None,
        )
        for index, role in enumerate(("start", "finish"))
    )
    return dataclasses.replace(op, outbox=items)


def _run(run_id: int, **fields: Any) -> dict[str, Any]:
    run = {"id": run_id, "name": CHECK_NAME, "head_sha": "abc", "external_id": "sub-1"}
    return {**run, "status": "completed", "conclusion": "success", **fields}


@pytest.mark.parametrize(
    ("name", "runs", "given_up", "complaint"),
    [
        ("one completed run with the push's external_id", [_run(1)], False, None),
        ("no check run", [], False, "0 check runs"),
        ("a duplicate run", [_run(1), _run(2)], False, "2 check runs"),
        ("left in progress", [_run(1, status="in_progress", conclusion=None)], False, "is in_"),
        ("completed without a conclusion", [_run(1, conclusion=None)], False, "conclusion None"),
        ("another push's external_id", [_run(1, external_id="sub-2")], False, "carries sub-2"),
        ("an item given up", [_run(1)], True, "given up"),
        ("another check's run is not ours", [_run(1), _run(2, name="lint")], False, None),
    ],
)
def test_check_run_checks(
    name: str, runs: list[dict[str, Any]], given_up: bool, complaint: str | None
) -> None:
    op = _with_check_run_items(_operation("succeeded", T0), "sub-1", given_up)
    problems = check_run_problems(Push("abc", ("docs/x.md",)), op, runs)
    if complaint is None:
        assert problems == [], name
    else:
        assert problems and complaint in problems[0], (name, problems)


# Shared batches: which pushes wait on no batch, and the group checks.

GID = "github-review-0123456789abcdef"
WHOLE = group_tag(GID)
HALVES = (Part(0, 1, "batches/lo"), Part(1, 2))


def _tag(sha: str) -> str:
    return Push(sha, ()).tag


def _group(parts: tuple[Part, ...] = (), status: str = SEALED, **fields: Any) -> Group:
    fields = {"count": 2, "stored_parts": parts, **fields}
    return Group(GID, "github-review", "m", None, status, T0, T1, requests=4, bytes=9, **fields)


def _stored(group: Group, shas: tuple[str, ...] = ("s0", "s1")) -> Stored:
    """The group with one item per sha, in order."""
    items = [Item(GID, n, _tag(sha), member_name(GID, n)) for n, sha in enumerate(shas)]
    return Stored({GID: group}, items)


def _batch(name: str, display_name: str, state: str = "BATCH_STATE_SUCCEEDED") -> dict[str, Any]:
    return {"name": name, "display_name": display_name, "state": state}


RUNNING = "BATCH_STATE_PENDING"


BOTH = ("s0", "s1")


@pytest.mark.parametrize(
    ("name", "group", "batches", "done"),
    [
        ("its registered batch ended", _group(operation="batches/a"), [_batch("a", WHOLE)], BOTH),
        ("its registered batch runs", _group(operation="a"), [_batch("a", WHOLE, RUNNING)], ()),
        ("its registered batch is gone", _group(operation="batches/a"), [], BOTH),
        ("an unregistered batch of its tag ended", _group(), [_batch("a", WHOLE)], BOTH),
        ("a batch of another tag ended", _group(), [_batch("a", group_tag("other"))], ()),
        ("a refused item waits on nothing", _group(refused={1: "bad"}), [], ("s1",)),
        (
            "a failed part waits on nothing",
            _group((HALVES[0], Part(1, 2, failed="x"))),
            [_batch("lo", f"{WHOLE}~0-1", RUNNING)],
            ("s1",),
        ),
        ("each part by its own batch", _group(HALVES), [_batch("lo", f"{WHOLE}~0-1")], ("s0",)),
        ("an open group waits", _group(status=OPEN), [_batch("a", WHOLE)], ()),
    ],
)
def test_settled_by_gemini(
    name: str, group: Group, batches: list[dict[str, Any]], done: tuple[str, ...]
) -> None:
    """`done`: the shas of the group's items (`s0`, `s1`) that wait on no batch."""
    assert settled_by_gemini(_stored(group), batches) == {_tag(sha) for sha in done}, name


def test_a_part_is_named_by_its_range() -> None:
    assert part_of_tag(WHOLE) == (GID, None)
    assert part_of_tag(f"{WHOLE}~0-1") == (GID, (0, 1))
    assert part_of_tag("hookledger:review:o/r@abc") is None


SUPERSEDED_B = {"batches/b": dataclasses.replace(_operation("superseded", T0), name="batches/b")}


@pytest.mark.parametrize(
    ("name", "stored", "batches", "operations", "complaint"),
    [
        (
            "each push in one group, its batch registered",
            _stored(_group(operation="batches/a")),
            [_batch("a", WHOLE)],
            {},
            None,
        ),
        ("a push in no group", _stored(_group(count=1), ("s0",)), [], {}, "in 0 groups"),
        ("a push in two groups", _stored(_group(), ("s0", "s0")), [], {}, "in 2 groups"),
        (
            "a batch of a push's own",
            _stored(_group()),
            [_batch("a", "hookledger:review:o/r@s0")],
            {},
            "no group's",
        ),
        (
            "a second batch, not superseded",
            _stored(_group(operation="batches/a")),
            [_batch("b", WHOLE)],
            {},
            "not its part's registered",
        ),
        (
            "a second batch, superseded",
            _stored(_group(operation="batches/a")),
            [_batch("b", WHOLE)],
            SUPERSEDED_B,
            None,
        ),
        (
            "a part's registered batch",
            _stored(_group(HALVES)),
            [_batch("lo", f"{WHOLE}~0-1")],
            {},
            None,
        ),
    ],
)
def test_group_checks(
    name: str,
    stored: Stored,
    batches: list[dict[str, Any]],
    operations: dict[str, Operation],
    complaint: str | None,
) -> None:
    pushes = [Push("s0", ()), Push("s1", ())]
    problems = group_problems(stored, batches, operations, pushes)
    if complaint is None:
        assert problems == [], name
    else:
        assert problems and complaint in problems[0], (name, problems)


def _item_op(status: str, reason: str | None = None, group: str | None = GID) -> Operation:
    error = {"reason": reason, "message": "Gemini refused"} if reason else None
    op = _operation(status, T0)
    return dataclasses.replace(op, name=member_name(GID, 0), group=group, error=error)


@pytest.mark.parametrize(
    ("name", "op", "statuses", "refused", "complaint"),
    [
        ("reviewed", _item_op("succeeded"), {"ok"}, False, None),
        ("a review is an error", _item_op("succeeded"), {"ok", "error"}, False, "reviews"),
        ("failed", _item_op("failed", "deployment_refused"), {"error"}, False, "failed"),
        ("refused alone", _item_op("failed", "request_refused"), {"error"}, True, None),
        ("refused, yet reviewed", _item_op("succeeded"), {"ok"}, True, "refused"),
        ("refused otherwise", _item_op("failed", "deployment_refused"), {"error"}, True, "refused"),
    ],
)
def test_outcome_checks(
    name: str, op: Operation, statuses: set[str], refused: bool, complaint: str | None
) -> None:
    problems = outcome_problems(Push("abc", ()), op, statuses, refused)
    if complaint is None:
        assert problems == [], name
    else:
        assert len(problems) == 1 and complaint in problems[0], (name, problems)


def test_a_push_must_be_its_groups_item() -> None:
    push = Push("abc", ())
    assert item_problems(push, _item_op("succeeded"), member_name(GID, 0)) == []
    assert item_problems(push, _item_op("succeeded"), member_name(GID, 1))
    assert item_problems(push, _item_op("succeeded", group=None), member_name(GID, 0))
