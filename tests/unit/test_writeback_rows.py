"""One bad row fails that file's review, never the settlement (issue 33, point 6).

A review answer `parse_review` cannot read — JSON nested past Python's recursion limit
(`json.loads` raises RecursionError, not ValueError), a line number `int()` refuses —
used to escape the review write-back as an exception outside the error tree: the
settlement rolled back as `WritebackFailed` and was retried until the batch was gone.
Against the in-memory ledger (tests/memory_ledger.py): no emulator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.review.findings import parse_review
from apps.review.kind import KIND, REVIEW
from apps.review.results import Reviews
from local.fakes import FakeClock
from shared.gemini import BatchStatus, Row
from shared.settlement.settler import Settler
from tests.memory_ledger import MemoryLedger
from tests.standins import ScriptedGemini
from tests.unit.test_kinds import Writes, review_record

NAME = "batches/rows"
STRUCTURED = json.dumps({"summary": "Reads well.", "findings": []})

# Each decodes past the recursion limit: json.loads raises RecursionError.
NESTED = [
    pytest.param(name, text, id=name)
    for name, text in [
        ("a JSON array nested 100,000 deep", "[" * 100_000),
        ("a summary nested 100,000 deep", '{"summary":' * 100_000),
    ]
]


def finding(**changes: Any) -> dict[str, Any]:
    return {"start_line": 3, "end_line": 5, "severity": "warning", "message": "Vague.", **changes}


@pytest.mark.parametrize(("name", "text"), NESTED)
def test_an_answer_nested_past_the_recursion_limit_is_that_files_error_review(name, text):
    record = review_record({"paths": ["a.md", "deep.md", "b.md"]})
    rows = (Row("a.md", text="fine"), Row("deep.md", text=text), Row("b.md", text=STRUCTURED))
    writes = Writes()
    assert REVIEW.writeback is not None

    REVIEW.writeback(writes, record, BatchStatus(NAME, "JOB_STATE_SUCCEEDED", rows=rows))  # type: ignore[arg-type]

    deep = writes.reviews["deep.md"]
    assert deep["status"] == "error", name
    assert deep["error"].startswith("review could not be parsed: RecursionError"), name
    assert writes.reviews["a.md"] == {"status": "ok", "text": "fine"}, name
    assert writes.reviews["b.md"] == {"status": "ok", "text": "Reads well.", "findings": []}, name


@pytest.mark.parametrize(("name", "text"), NESTED)
def test_a_settlement_with_one_unreadable_answer_settles_with_every_other_review(name, text):
    clock = FakeClock()
    ledger = MemoryLedger(clock)
    ledger.operations.register(NAME, KIND, {"repo": "o/r", "sha": "abc", "paths": ["a.md", "x.md"]})
    rows = (Row("a.md", text="fine"), Row("x.md", text=text))
    gemini = ScriptedGemini(BatchStatus(NAME, "JOB_STATE_SUCCEEDED", rows=rows))

    outcome = Settler(ledger, gemini, clock=clock).settle(NAME, "reconcile")

    assert (outcome.result, outcome.status) == ("settled", "succeeded"), name
    reviews = {doc["path"]: doc for doc in Reviews(ledger).reviews_for(NAME)}
    assert reviews["a.md"]["status"] == "ok", name
    assert reviews["x.md"]["status"] == "error", name
    assert "RecursionError" in reviews["x.md"]["error"], name


@pytest.mark.parametrize(
    ("name", "line"),
    [
        pytest.param(name, line, id=name)
        for name, line in [
            ("a superscript digit (str.isdigit, yet int() refuses it)", "²"),
            ("digits past int()'s 4,300-digit limit", "9" * 5_000),
            ("a number no line has (and Firestore cannot store)", 2**63),
        ]
    ],
)
def test_a_line_number_that_cannot_be_read_drops_that_finding_only(name, line):
    parsed = parse_review(
        json.dumps({"summary": "s", "findings": [finding(start_line=line), finding()]})
    )

    assert parsed is not None, name
    assert [f["start_line"] for f in parsed.findings] == [3], name
    assert parsed.dropped == 1, name
