"""The console against the Firestore emulator through Flask's test client.

The ledger is filled directly (injected clock); the browser test (tests/e2e/
test_console_browser.py) fills it through the real pipeline instead.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from hookledger.cli.output import CliError
from hookledger.console import create_app
from local.fakes import FakeClock
from shared.ledger import Ledger


class Replays:
    """Stands in for `hookledger deliveries replay` (the browser test runs the real one)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.calls: list[str] = []

    def __call__(self, delivery: Any, *, force: bool = False) -> dict[str, Any]:
        if delivery.status == "queued" and not force:
            raise CliError("still queued")
        self.calls.append(delivery.doc_id)
        self.ledger.deliveries.reopen(delivery.source, delivery.delivery_id)
        return {"id": delivery.doc_id, "task": "tasks/replay-1"}


@pytest.fixture
def filled(firestore_client):
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(seconds=10))
    ledger.operations.register("batches/web", "review", {"repo": "o/r", "sha": "s1"})
    ledger.operations.register("batches/rec", "review", {"repo": "o/r", "sha": "s2"})
    ledger.operations.register("batches/slow", "other")
    clock.advance(30)
    ledger.settle("batches/web", "succeeded", "webhook")
    ledger.settle("batches/rec", "failed", "reconcile", error={"message": "boom"})
    started = clock()
    clock.advance(2)
    ledger.runs.record(
        started,
        clock(),
        {"examined": 2, "settled": 1, "still_running": 1},
        examined_ops=["batches/rec", "batches/slow"],
        budget_s=240,
    )
    ledger.operations.defer("batches/slow", clock() + timedelta(seconds=60), 1)
    ledger.deliveries.record("github", "d-push", "push", payload=b'{"ref": "refs/heads/main"}')
    ledger.deliveries.record("gemini", "w-1", "batch.succeeded", payload="{}")
    ledger.deliveries.mark("gemini", "w-1", "done")
    ledger.deliveries.record("github", "d-dead", "<script>alert(1)</script>", payload="x" * 10_000)
    ledger.deliveries.mark("github", "d-dead", "dead", error="handler failed: <b>bad</b>")
    replays = Replays(ledger)
    app = create_app(ledger, clock=clock, replay_fn=replays, csrf_secret=b"k" * 32)
    return app.test_client(), ledger, replays


def page(client, url: str, code: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == code, (url, response.status_code)
    return response.get_data(as_text=True)


def test_the_overview_shows_counts_alerts_and_both_charts(filled):
    client, _, _ = filled
    html = page(client, "/")

    assert re.search(r'id="ops-pending">1<', html)
    assert re.search(r'id="ops-succeeded">1<', html)
    assert re.search(r'id="deliveries-dead">1<', html)
    assert re.search(r'id="settled-webhook">1<', html)
    assert re.search(r'id="settled-reconcile">1<', html)
    assert html.count("<svg") == 2
    assert "R = reconcile (hatched)" in html and "p99 (dashed line, squares)" in html
    assert "batches/slow" in html  # the oldest pending operation


def test_filters_narrow_the_tables(filled):
    client, _, _ = filled

    everything = page(client, "/operations")
    pending = page(client, "/operations?status=pending")
    by_reconcile = page(client, "/operations?settled_by=reconcile")
    of_kind = page(client, "/operations?kind=other&age=1h")
    assert everything.count('class="op-row"') == 3
    assert pending.count('class="op-row"') == 1 and "batches/slow" in pending
    assert by_reconcile.count('class="op-row"') == 1 and "batches/rec" in by_reconcile
    assert of_kind.count('class="op-row"') == 1
    assert page(client, "/deliveries").count('class="delivery-row"') == 3
    assert page(client, "/deliveries?source=gemini").count('class="delivery-row"') == 1
    assert page(client, "/deliveries?status=dead").count('class="delivery-row"') == 1
    assert page(client, "/deliveries?event=push").count('class="delivery-row"') == 1
    assert "must be one of" in page(client, "/operations?status=nope", 400)


def test_an_operation_timeline_shows_its_reconcile_checks(filled):
    client, _, _ = filled

    html = page(client, "/operations/batches/slow")
    assert 'class="ev-check"' in html and "reconcile check" in html
    assert re.search(r'id="attempts">1<', html)
    settled = page(client, "/operations/batches/rec")
    assert re.search(r'id="settled-by">reconcile<', settled)
    assert "boom" in settled
    assert "reconcile_runs" not in settled  # no collection name leaks into a page
    runs = page(client, "/reconcile")
    assert runs.count('class="run-row"') == 1 and "of 240 s" in runs


def test_a_replay_without_the_csrf_token_is_refused_and_changes_nothing(filled):
    client, ledger, replays = filled

    refused = client.post("/deliveries/github/d-dead/replay", data={})
    forged = client.post("/deliveries/github/d-dead/replay", data={"csrf_token": "0" * 64})

    assert (refused.status_code, forged.status_code) == (403, 403)
    assert replays.calls == []
    assert ledger.deliveries.get("github", "d-dead").status == "dead"


def test_a_confirmed_replay_goes_through_the_replay_function(filled):
    client, ledger, replays = filled
    detail = page(client, "/deliveries/github/d-dead")
    assert 'id="replay-link"' in detail
    confirm = page(client, "/deliveries/github/d-dead/replay")
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', confirm).group(1)

    response = client.post("/deliveries/github/d-dead/replay", data={"csrf_token": token})

    assert response.status_code == 303
    assert replays.calls == ["github:d-dead"]
    assert ledger.deliveries.get("github", "d-dead").status == "queued"
    assert "tasks/replay-1" in page(client, response.headers["Location"])


def test_html_is_escaped_and_the_payload_preview_is_bounded(filled):
    client, _, _ = filled

    html = page(client, "/deliveries/github/d-dead")
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert "<b>bad</b>" not in html
    assert "x" * 2048 in html and "x" * 2049 not in html
    assert "preview cut" in html
    assert "default-src 'none'" in page_headers(client, "/")["Content-Security-Policy"]


def page_headers(client, url: str) -> Any:
    return client.get(url).headers


def test_a_token_is_required_when_configured(firestore_client):
    ledger = Ledger(firestore_client, clock=FakeClock())
    client = create_app(ledger, token="s3cret-token").test_client()

    assert client.get("/").status_code == 401
    assert client.get("/", headers={"X-Console-Token": "wrong"}).status_code == 401
    assert client.get("/", headers={"X-Console-Token": "s3cret-token"}).status_code == 200
    visit = client.get("/operations?token=s3cret-token&status=pending")
    assert visit.status_code == 303 and "token" not in visit.headers["Location"]
    assert client.get("/operations").status_code == 200  # the cookie now carries it
    assert "s3cret-token" not in client.get("/").get_data(as_text=True)


def test_a_bad_cursor_or_unknown_object_answers_an_error_page(filled):
    client, _, _ = filled
    assert "not a page cursor" in page(client, "/operations?after=%%%", 400)
    assert "not found" in page(client, "/operations/batches/none", 404)
    assert "not found" in page(client, "/deliveries/github/none", 404)


def test_a_superseded_batch_is_counted_filtered_and_links_to_its_winner(filled):
    client, ledger, _ = filled
    ledger.operations.record_superseded(
        "batches/dup", "review", {"repo": "o/r", "sha": "s1"}, winner="batches/web", outbox=[]
    )

    assert re.search(r'id="ops-superseded">1<', page(client, "/"))
    only = page(client, "/operations?status=superseded")
    assert only.count('class="op-row"') == 1 and "batches/dup" in only
    detail = page(client, "/operations/batches/dup")
    assert re.search(r'id="superseded-by" href="/operations/batches/web">batches/web<', detail)
    assert 'id="settled-by"' not in detail  # never settled


def test_an_operation_of_any_app_shows_its_app_and_the_documents_its_settlement_wrote(
    firestore_client,
):
    from apps.classify import KIND  # the classify app's kind, registered when it loads
    from shared import apps

    apps.load(["apps.classify"])
    ledger = Ledger(firestore_client, clock=FakeClock())
    ledger.operations.register("batches/cls-1", KIND.name, {"keys": ["i1"]})

    def writeback(writes, record):
        writes.put("classifications", "doc-1", {"item": "i1", "label": "bug"})

    ledger.settle("batches/cls-1", "succeeded", "webhook", writeback=writeback)
    client = create_app(ledger, csrf_secret=b"k" * 32).test_client()

    html = page(client, "/operations/batches/cls-1")
    assert 'id="op-app">classify<' in html
    table = html.split('id="results-table"', 1)[1].split("</table>", 1)[0]
    assert "classifications" in table and "label <code>bug</code>" in table
    listing = page(client, "/operations")
    assert "<td>classify</td>" in listing
