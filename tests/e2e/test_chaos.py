"""The chaos suite at a reduced size (3-4 pushes per scenario) against one whole local stack:
each scenario's invariants over the whole database must hold. A scenario whose fault needs a
feature the stack lacks is skipped with its reason (see local/chaos/scenarios.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from local.chaos import REDUCED_SIZES, SCENARIOS, Chaos, ChaosStack
from local.chaos.invariants import review_problems, settle_log_counts
from shared.ledger import Operation


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
