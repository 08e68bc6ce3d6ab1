"""The classify app on the whole local pipeline, through the test kit (docs/apps.md,
"Testing an app"): `hookledger submit --app classify`, the batch completed at the
simulator, one classification per item, settled by its webhook or by reconcile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookledger.testing import Stack, assert_nothing_pending, assert_one_result_per_item

pytestmark = pytest.mark.hookledger_apps("apps.classify")

ITEMS = [
    {"id": "issue-1", "text": "The app crashes when I press save."},
    {"id": "issue-2", "text": "Please add a dark mode."},
    {"id": "issue-3", "text": "How do I export my data?"},
]
ROWS = {
    "issue-1": {"text": '{"label": "bug", "confidence": 0.93}'},
    "issue-2": {"text": '{"label": "feature", "confidence": 0.8}'},
    "issue-3": {"text": '{"label": "question", "confidence": 0.7}'},
}


def submit(hookledger: Stack, tmp_path: Path, submission: str) -> str:
    """`hookledger submit --app classify` the items; the name of the batch it created."""
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(item) + "\n" for item in ITEMS))
    done = hookledger.cli("submit", "--app", "classify", "--input", str(items), "--id", submission)
    assert done.returncode == 0, done.stderr
    batch = hookledger.wait_batch(f"hookledger:classify:{submission}")
    assert batch["keys"] == [item["id"] for item in ITEMS]
    return str(batch["name"])


def test_a_completed_batch_gives_one_classification_per_item(
    hookledger: Stack, tmp_path: Path
) -> None:
    name = submit(hookledger, tmp_path, "triage-1")

    hookledger.complete_batch(name, rows=ROWS)

    settled = hookledger.wait_settled(name)
    assert (settled["status"], settled["settled_by"]) == ("succeeded", "webhook")
    assert_one_result_per_item(hookledger, "classifications", ROWS)
    labels = {d["item"]: d["label"] for d in hookledger.documents("classifications").values()}
    assert labels == {"issue-1": "bug", "issue-2": "feature", "issue-3": "question"}
    assert_nothing_pending(hookledger)


def test_a_dropped_webhook_is_settled_by_reconcile(hookledger: Stack, tmp_path: Path) -> None:
    name = submit(hookledger, tmp_path, "triage-2")
    hookledger.complete_batch(name, rows=ROWS, webhook="drop")

    report = hookledger.reconcile()

    assert report.get("settled") == 1, report
    settled = hookledger.wait_settled(name)
    assert (settled["status"], settled["settled_by"]) == ("succeeded", "reconcile")
    assert_one_result_per_item(hookledger, "classifications", ROWS)
    assert_nothing_pending(hookledger)
