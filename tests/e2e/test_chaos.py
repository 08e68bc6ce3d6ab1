"""The chaos suite at a reduced size (3-4 pushes per scenario) against one whole local stack:
each scenario's invariants over the whole database must hold. A scenario whose fault needs a
feature the stack lacks is skipped with its reason (see local/chaos/scenarios.py)."""

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
from local.chaos.invariants import check_run_problems, review_problems, settle_log_counts
from local.chaos.load import Push
from shared.ledger import Operation, OutboxItem


@pytest.fixture(scope="module")
def chaos() -> Iterator[Chaos]:
    with ChaosStack.started() as stack:
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
