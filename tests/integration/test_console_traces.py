"""The delivery and operation pages' "Trace" section, through Flask's test client, over
the Firestore emulator and a span store written by the test (tests/trace_samples.py)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from hookledger.console import create_app
from hookledger.console.traces import TraceSettings
from local.fakes import FakeClock
from shared import tracing
from shared.ledger import Ledger
from tests.trace_samples import PUSH_ROWS, push_trace

PUSH_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
REGISTERING_SPAN = "b7ad6b7169203331"


class Registering:
    """A tracer whose current span is the push's (what the worker has when it registers)."""

    def span(self, *args: Any) -> Any:
        raise AssertionError("the ledger opens no span")

    def traceparent(self) -> str:
        return f"00-{OTHER_TRACE}-{REGISTERING_SPAN}-01"

    def run_traceparent(self) -> str:
        return self.traceparent()  # the worker attempt's span is the current one

    def log_fields(self) -> dict[str, Any]:
        return {}

    def flush(self) -> None:
        pass


@pytest.fixture
def ledger(firestore_client) -> Ledger:
    clock = FakeClock()
    ledger = Ledger(firestore_client, clock=clock, grace=timedelta(seconds=10))
    ledger.deliveries.record("github", "push-dropped", "push", payload=b"{}")
    ledger.deliveries.record("github", "push-untraced", "push", payload=b"{}")
    ledger.operations.register("batches/dropped", "review")
    with tracing.installed(Registering()):
        ledger.operations.register("batches/traced", "review")
    return ledger


def store(directory: Path) -> Path:
    directory.mkdir()
    spans = [
        *push_trace(PUSH_TRACE, "push-dropped", "batches/dropped"),
        # Its spans name another operation: only `Operation.trace` leads to it.
        *push_trace(OTHER_TRACE, "push-other", "batches/elsewhere"),
    ]
    (directory / "hookledger-worker-1.jsonl").write_text(
        "".join(span.to_json() + "\n" for span in spans) + "{torn line\n"
    )
    return directory


def client(ledger: Ledger, directory: Path, project: str = "demo-hookledger") -> Any:
    app = create_app(ledger, traces=TraceSettings(str(directory), project))
    return app.test_client()


def page(client: Any, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.get_data(as_text=True)


def drawn_rows(html: str, trace_id: str) -> list[str]:
    svg = re.search(rf'<svg [^>]*id="waterfall-{trace_id}".*?</svg>', html, re.S)
    assert svg, f"no waterfall of {trace_id}"
    return re.findall(r'<g class="span-row[^"]*" data-name="([^"]*)"', svg.group(0))


def test_the_delivery_page_draws_the_trace_holding_its_delivery_id(ledger, tmp_path):
    html = page(client(ledger, store(tmp_path / "traces")), "/deliveries/github/push-dropped")

    assert drawn_rows(html, PUSH_TRACE) == [name for name, _ in PUSH_ROWS]
    assert f'<code class="trace-id">{PUSH_TRACE}</code>' in html
    assert "⋯ 3 min 2 s until reconcile.check" in html
    assert "waterfall-" + OTHER_TRACE not in html
    assert "console.cloud.google.com" not in html  # a local project links nowhere


def test_the_operation_page_draws_the_trace_that_registered_it(ledger, tmp_path):
    assert ledger.operations.get("batches/traced").trace is not None
    html = page(client(ledger, store(tmp_path / "traces")), "/operations/batches/traced")

    assert drawn_rows(html, OTHER_TRACE) == [name for name, _ in PUSH_ROWS]
    assert "waterfall-" + PUSH_TRACE not in html


def test_an_operation_without_a_trace_finds_the_spans_naming_it(ledger, tmp_path):
    assert ledger.operations.get("batches/dropped").trace is None
    html = page(client(ledger, store(tmp_path / "traces")), "/operations/batches/dropped")

    assert drawn_rows(html, PUSH_TRACE) == [name for name, _ in PUSH_ROWS]
    assert "linked to worker.attempt" in html


def test_without_spans_the_pages_say_why_and_never_fail(ledger, tmp_path):
    missing = tmp_path / "never-written"

    for url in ("/deliveries/github/push-untraced", "/operations/batches/dropped"):
        html = page(client(ledger, missing), url)
        assert 'id="trace-none"' in html and "tracing is off" in html, url
        assert "<svg" not in html, url
    untraced = page(client(ledger, store(tmp_path / "traces")), "/deliveries/github/push-untraced")
    assert 'id="trace-none"' in untraced


def test_a_production_project_links_each_trace_to_cloud_trace(ledger, tmp_path):
    directory = store(tmp_path / "traces")
    prod = client(ledger, directory, project="hookledger-prod")
    link = "https://console.cloud.google.com/traces/list?project=hookledger-prod&amp;tid="

    drawn = page(prod, "/deliveries/github/push-dropped")
    # Registered traced, its spans elsewhere (Cloud Trace): the id and the link, no chart.
    not_here = page(
        client(ledger, tmp_path / "empty", "hookledger-prod"), "/operations/batches/traced"
    )

    assert f'href="{link}{PUSH_TRACE}"' in drawn
    assert f'href="{link}{OTHER_TRACE}"' in not_here
    assert f'<code class="trace-id">{OTHER_TRACE}</code>' in not_here
    assert "<svg" not in not_here and "production spans are in Cloud Trace" in not_here
