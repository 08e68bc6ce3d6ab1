"""shared/tracing: spans, the traceparent hop, sampling with errors kept, the stores, log fields."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared import logs, tracing
from shared.config import Config, ConfigError
from shared.tracing.cloud import CloudTraceSink
from shared.tracing.otel import OtelTracer, RatioSampler
from shared.tracing.store import SpanFileWriter, prune, read_spans, traces_with

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


def _file_tracer(tmp_path: Path, ratio: float = 1.0, service: str = "hookledger-test"):
    return OtelTracer(service, "demo-p", ratio, SpanFileWriter(tmp_path, service))


def test_off_is_a_no_op_and_imports_no_opentelemetry() -> None:
    code = (
        "import sys\n"
        "from shared import tracing\n"
        "from shared.config import Config\n"
        "tracing.configure(Config())\n"
        "with tracing.span('x', delivery_id='d') as s:\n"
        "    s.set(a=1); s.fail('no'); s.keep()\n"
        "assert tracing.traceparent() is None\n"
        "assert tracing.with_traceparent({'a': 'b'}) == {'a': 'b'}\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_spans_are_stored_with_parent_remote_parent_and_links(tmp_path: Path) -> None:
    link = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with (
        tracing.installed(_file_tracer(tmp_path)),
        tracing.span("outer", parent=PARENT, links=[link, "junk"], kind="server") as sp,
    ):
        sp.set(delivery_id="d-1", **{"http.response.status_code": 202})
        with tracing.span("inner", operation="batches/1"):
            inner_parent = tracing.traceparent()
    spans = {span.name: span for span in read_spans(tmp_path)}
    outer, inner = spans["outer"], spans["inner"]
    assert outer.trace_id == inner.trace_id == TRACE
    assert outer.parent_id == "00f067aa0ba902b7"
    assert inner.parent_id == outer.span_id
    assert outer.kind == "server" and outer.service == "hookledger-test"
    assert outer.attributes["hookledger.delivery_id"] == "d-1"
    assert outer.attributes["http.response.status_code"] == 202
    assert outer.links == (("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),)
    assert inner.attributes["hookledger.operation"] == "batches/1"
    assert tracing.parse_traceparent(inner_parent or "") == (TRACE, inner.span_id, True)
    assert traces_with(tmp_path, delivery_id="d-1") == [TRACE]
    assert read_spans(tmp_path, [TRACE[::-1]]) == []


def test_an_unreadable_parent_starts_a_new_trace(tmp_path: Path) -> None:
    with tracing.installed(_file_tracer(tmp_path)), tracing.span("root", parent="00-zz"):
        pass
    (root,) = read_spans(tmp_path)
    assert root.parent_id is None and root.trace_id != TRACE


def test_unsampled_traces_are_dropped_unless_they_fail_or_are_kept(tmp_path: Path) -> None:
    with tracing.installed(_file_tracer(tmp_path, ratio=0.0)):
        with tracing.span("quiet"), tracing.span("child"):
            pass
        with tracing.span("failed"), tracing.span("child-of-failed") as sp:
            sp.fail("Gemini answered 500")
        with pytest.raises(RuntimeError), tracing.span("raised"):
            raise RuntimeError("boom")
        with tracing.span("dead") as sp:
            sp.keep()
    names = sorted(span.name for span in read_spans(tmp_path))
    assert names == ["child-of-failed", "dead", "failed", "raised"]
    by_name = {span.name: span for span in read_spans(tmp_path)}
    assert by_name["child-of-failed"].status == "error"
    assert by_name["child-of-failed"].error == "Gemini answered 500"
    assert by_name["failed"].status == "unset"
    assert not by_name["dead"].sampled


def test_the_ratio_is_decided_on_the_trace_id_alike_in_every_process() -> None:
    half = RatioSampler(0.5)
    low, high = 0x1, (1 << 64) - 2
    assert half.should_sample(None, low, "x").decision.is_sampled()
    assert not half.should_sample(None, high, "x").decision.is_sampled()
    assert half.should_sample(None, high, "x").decision.is_recording()
    assert RatioSampler(1.0).should_sample(None, (1 << 64) - 1, "x").decision.is_sampled()


def test_log_lines_carry_cloud_loggings_trace_fields(tmp_path: Path) -> None:
    stream = io.StringIO()
    logger = logging.getLogger("hookledger.test-tracing")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger.addHandler(handler)
    try:
        with tracing.installed(_file_tracer(tmp_path)), tracing.span("work", parent=PARENT):
            logs.event(logger, logging.WARNING, "inside")
        logs.event(logger, logging.WARNING, "outside")
    finally:
        logger.removeHandler(handler)
    inside, outside = (json.loads(line) for line in stream.getvalue().splitlines())
    (work,) = read_spans(tmp_path)
    assert inside["logging.googleapis.com/trace"] == f"projects/demo-p/traces/{TRACE}"
    assert inside["logging.googleapis.com/spanId"] == work.span_id
    assert inside["logging.googleapis.com/trace_sampled"] is True
    assert "logging.googleapis.com/trace" not in outside


def test_with_traceparent_adds_the_current_span(tmp_path: Path) -> None:
    with tracing.installed(_file_tracer(tmp_path)), tracing.span("hand-off"):
        headers = tracing.with_traceparent({"Content-Type": "application/json"})
    (span,) = read_spans(tmp_path)
    assert headers["Content-Type"] == "application/json"
    assert tracing.parse_traceparent(headers["traceparent"]) == (span.trace_id, span.span_id, True)


def test_parse_traceparent_refuses_what_w3c_refuses() -> None:
    assert tracing.parse_traceparent(PARENT) == (TRACE, "00f067aa0ba902b7", True)
    assert tracing.parse_traceparent(PARENT[:-2] + "00")[2] is False
    bad_ones = ("", "01-" + PARENT[3:], f"00-{'0' * 32}-00f067aa0ba902b7-01", PARENT + "-x")
    for bad in (*bad_ones, PARENT.upper()):  # W3C hex is lower-case
        assert tracing.parse_traceparent(bad) is None, bad
    assert tracing.trace_id_of(PARENT) == TRACE and tracing.trace_id_of(None) is None


def test_config_reads_the_tracing_settings() -> None:
    cfg = Config.from_env({"TRACING": "File", "TRACE_SAMPLE_RATIO": "0.25", "TRACE_DIR": "/t"})
    assert (cfg.tracing, cfg.trace_sample_ratio, cfg.trace_dir) == ("file", 0.25, "/t")
    assert Config.from_env({}).tracing == "off"
    with pytest.raises(ConfigError, match="TRACING must be one of off, file, cloudtrace"):
        Config.from_env({"TRACING": "zipkin"})
    with pytest.raises(ConfigError, match="TRACE_SAMPLE_RATIO"):
        Config.from_env({"TRACE_SAMPLE_RATIO": "2"})


class _Exporter:
    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.fail = fail

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.batches.append([span.name for span in spans])
        return SpanExportResult.FAILURE if self.fail else SpanExportResult.SUCCESS


def test_cloud_trace_sink_writes_kept_traces_off_the_request_thread() -> None:
    exporter = _Exporter()
    sink = CloudTraceSink("demo-p", exporter_factory=lambda project: exporter)
    with tracing.installed(OtelTracer("hookledger-ingress", "demo-p", 1.0, sink)):
        with tracing.span("ingress.request"), tracing.span("ingress.hand_off"):
            pass
        tracing.flush()
    assert exporter.batches == [["ingress.hand_off", "ingress.request"]]


def test_a_failed_cloud_trace_write_is_logged_without_the_spans(caplog) -> None:
    sink = CloudTraceSink("demo-p", exporter_factory=lambda project: _Exporter(fail=True))
    tracer = OtelTracer("hookledger-worker", "demo-p", 1.0, sink)
    with caplog.at_level(logging.WARNING, logger="hookledger.tracing"), tracing.installed(tracer):
        with tracing.span("secret-looking-name", token="x"):
            pass
        assert sink.flush()
    (record,) = [r for r in caplog.records if "Cloud Trace export failed" in r.getMessage()]
    assert "1 spans of project demo-p" in record.getMessage()
    assert "secret-looking-name" not in record.getMessage()


class TraceClient:
    """Cloud Trace's client as the published exporter calls it: `batch_write_spans`."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict] = []
        self.error = error

    def batch_write_spans(self, **kwargs):
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error


def test_the_published_exporter_writes_with_a_deadline_and_the_function_named() -> None:
    from shared.tracing.cloud import EXPORT_TIMEOUT_S, published_exporter

    client = TraceClient()
    sink = CloudTraceSink("demo-p", exporter_factory=lambda p: published_exporter(p, client))
    with tracing.installed(OtelTracer("hookledger-worker", "demo-p", 1.0, sink)):
        with tracing.span("worker.attempt", delivery_id="d-1"):
            pass
        tracing.flush()
    [call] = client.calls
    assert call["timeout"] == EXPORT_TIMEOUT_S and call["request"].name == "projects/demo-p"
    [span] = call["request"].spans
    labels = {key: value.string_value.value for key, value in span.attributes.attribute_map.items()}
    assert labels["hookledger.delivery_id"] == "d-1"
    assert labels["service.name"] == "hookledger-worker"  # which function, in Cloud Trace


def test_a_refused_export_is_one_warning_naming_its_cause(caplog) -> None:
    from google.api_core.exceptions import PermissionDenied

    from shared.tracing.cloud import EXPORTER_LOGGER, published_exporter

    client = TraceClient(PermissionDenied("caller lacks cloudtrace.traces.patch"))
    sink = CloudTraceSink("demo-p", exporter_factory=lambda p: published_exporter(p, client))
    tracer = OtelTracer("hookledger-ingress", "demo-p", 1.0, sink)
    with caplog.at_level(logging.DEBUG), tracing.installed(tracer):
        with tracing.span("ingress.request"):
            pass
        tracing.flush()
    assert [r for r in caplog.records if r.name == EXPORTER_LOGGER] == []
    [warning] = [r for r in caplog.records if r.name == "hookledger.tracing"]
    assert warning.levelno == logging.WARNING
    assert "PermissionDenied" in warning.hookledger_fields["reason"]
    assert "cloudtrace.traces.patch" in warning.hookledger_fields["reason"]


def test_prune_removes_only_span_files_older_than_the_cutoff(tmp_path: Path) -> None:
    old, fresh = tmp_path / "hookledger-worker-1.jsonl", tmp_path / "hookledger-worker-2.jsonl"
    other = tmp_path / "another-tool.jsonl"  # TRACE_DIR may point somewhere shared
    for path in (old, fresh, other):
        path.write_text("{}\n")
    os.utime(old, (1_000, 1_000))
    os.utime(other, (1_000, 1_000))
    os.utime(fresh, (9_000, 9_000))
    assert prune(tmp_path, older_than_s=5_000, now=10_000) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "another-tool.jsonl",
        "hookledger-worker-2.jsonl",
    ]
    assert prune(tmp_path / "missing", older_than_s=1, now=10_000) == 0


def test_a_sink_made_before_the_server_forks_exports_from_the_forked_worker(
    tmp_path: Path,
) -> None:
    """functions-framework imports main.py (configuring tracing) in gunicorn's master, then
    forks the worker: the export thread must be the worker's own."""
    from opentelemetry.sdk.trace.export import SpanExportResult

    written = tmp_path / "exported"

    class Recording:
        def export(self, spans):
            written.write_text(f"{len(spans)} from {os.getpid()}")
            return SpanExportResult.SUCCESS

    sink = CloudTraceSink("demo-p", exporter_factory=lambda project: Recording())
    child = os.fork()
    if child == 0:  # the worker: exports, waits for the write, reports by exit status
        try:
            sink.export(["a", "b"])
            os._exit(0 if sink.flush() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert written.read_text() == f"2 from {child}"


def test_two_roots_of_one_trace_in_one_process_keep_their_own_spans(tmp_path: Path) -> None:
    """A retry running beside the attempt it overlaps (both children of the hand-off):
    the retry ending must not take the first attempt's finished spans with it."""
    import threading

    tracer = _file_tracer(tmp_path, ratio=0.0)
    first_child_done, retry_done = threading.Event(), threading.Event()

    def first_attempt() -> None:
        with tracing.span("attempt.first", parent=PARENT, kind="server") as span:
            with tracing.span("first.child"):
                pass
            first_child_done.set()
            retry_done.wait(5)
            span.fail("GitHub answered 502")

    with tracing.installed(tracer):
        worker = threading.Thread(target=tracing.carry(first_attempt))
        worker.start()
        first_child_done.wait(5)
        with tracing.span("attempt.busy", parent=PARENT, kind="server"):
            pass  # sampled out and no error: dropped, alone
        retry_done.set()
        worker.join(5)
    assert sorted(s.name for s in read_spans(tmp_path)) == ["attempt.first", "first.child"]


def test_a_span_ending_after_its_root_is_decided_alone(tmp_path: Path) -> None:
    """A check its reconcile run abandoned (on a pool thread) ends after the run: kept if
    it failed, though its root has gone."""
    import threading

    run_over = threading.Event()

    def check() -> None:
        with tracing.span("reconcile.check") as span:
            run_over.wait(5)
            span.fail("Gemini answered 500")

    with tracing.installed(_file_tracer(tmp_path, ratio=0.0)):
        with tracing.span("reconcile.run", kind="server"):
            pool_thread = threading.Thread(target=tracing.carry(check))
            pool_thread.start()
        run_over.set()
        pool_thread.join(5)
    [late] = read_spans(tmp_path)
    assert (late.name, late.status) == ("reconcile.check", "error")


def test_a_request_span_never_inherits_what_its_thread_held(tmp_path: Path) -> None:
    with (
        tracing.installed(_file_tracer(tmp_path)),
        tracing.span("leaked"),
        tracing.span("worker.attempt", kind="server"),
    ):
        pass
    spans = {span.name: span for span in read_spans(tmp_path)}
    assert spans["worker.attempt"].parent_id is None
    assert spans["worker.attempt"].trace_id != spans["leaked"].trace_id


def test_an_exception_marks_its_span_by_type_never_by_message(tmp_path: Path) -> None:
    with (
        tracing.installed(_file_tracer(tmp_path)),
        pytest.raises(ValueError),
        tracing.span("github.request"),
    ):
        raise ValueError("Invalid header value b'Bearer ghp_secret\\n'")
    [span] = read_spans(tmp_path)
    assert (span.status, span.error) == ("error", "ValueError")
    assert "ghp_secret" not in (tmp_path / next(iter(os.listdir(tmp_path)))).read_text()
