"""The three HTTP functions' shared answers, the reconcile endpoint, and `functions/main.py`.

Pure logic: no emulator. `functions/main.py` is loaded by functions-framework's real
loader; its reconcile endpoint is swapped for one over a fake reconciler.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import flask
import functions_framework
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.config import LOCAL_GEMINI_SECRET, LOCAL_GITHUB_SECRET, Config
from shared.entrypoints import ingress as ingress_module
from shared.entrypoints import runtime
from shared.entrypoints.http import Endpoint, Limit, Reply
from shared.entrypoints.ingress import Ingress
from shared.entrypoints.reconcile import ReconcileEndpoint
from shared.errors import PermanentError, TransientError
from shared.handlers.context import ClientFactories, HandlerContext
from shared.handoff.tasks import EnqueueResult
from shared.recovery import SweepReport
from shared.signatures import github_headers, sign_standard_webhook

REPO = Path(__file__).resolve().parents[2]


class Echo(Endpoint):
    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        return Reply(200, {"route": route, "body": body.decode()})


class Routed(Echo):
    routes = frozenset({"github"})


# (name, endpoint, method, path, expected status, expected body)
CASES = [
    ("healthz GET", Echo(), "GET", "/healthz", 200, {"status": "ok"}),
    ("healthz HEAD", Echo(), "HEAD", "/healthz/", 200, {"status": "ok"}),
    ("GET elsewhere", Echo(), "GET", "/", 405, {"error": "GET is not allowed; use POST"}),
    ("POST anywhere", Echo(), "POST", "/x/", 200, {"route": "x", "body": "hi"}),
    ("routed POST", Routed(), "POST", "/github", 200, {"route": "github", "body": "hi"}),
    ("routed unknown", Routed(), "GET", "/nope", 404, {"error": "unknown route '/nope'"}),
    (
        "routed wrong method",
        Routed(),
        "PUT",
        "/github",
        405,
        {"error": "PUT is not allowed on /github; use POST"},
    ),
    ("routed healthz", Routed(), "GET", "/healthz", 200, {"status": "ok"}),
]


@pytest.mark.parametrize(
    ("name", "endpoint", "method", "path", "status", "body"),
    [pytest.param(*c, id=c[0]) for c in CASES],
)
def test_every_endpoint_answers_healthz_404_and_405_alike(
    name, endpoint, method, path, status, body
):
    assert endpoint.handle(method, path, {}, b"hi") == Reply(status, body), name


class Report:
    def to_dict(self) -> dict[str, object]:
        return {"examined": 2, "settled": 1}


class FakeReconciler:
    def __init__(self, error: Exception | None = None) -> None:
        self.runs, self.error = 0, error

    def run(self) -> Report:
        self.runs += 1
        if self.error is not None:
            raise self.error
        return Report()


def test_reconcile_runs_once_per_post_and_answers_its_report():
    reconciler = FakeReconciler()
    endpoint = ReconcileEndpoint(lambda: reconciler)

    assert endpoint.handle("GET", "/healthz", {}, b"") == Reply(200, {"status": "ok"})
    assert reconciler.runs == 0
    assert endpoint.handle("POST", "/", {}, b"") == Reply(200, {"examined": 2, "settled": 1})
    assert reconciler.runs == 1


@pytest.mark.parametrize(
    ("error", "status"),
    [
        pytest.param(TransientError("firestore unavailable"), 503, id="transient"),
        pytest.param(PermanentError("bad setting"), 500, id="permanent"),
        pytest.param(KeyError("bug"), 503, id="outside-the-tree"),
    ],
)
def test_a_failed_reconcile_run_answers_by_the_error_tree(error, status):
    reply = ReconcileEndpoint(lambda: FakeReconciler(error)).handle("POST", "/", {}, b"")
    assert reply.status == status
    assert reply.body == {"error": f"reconcile pass failed: {type(error).__name__}"}


class FakeSweep:
    """A GitHub delivery sweep that counts its runs (or fails with `error`)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.runs = 0
        self.error = error

    def run(self) -> SweepReport:
        self.runs += 1
        if self.error is not None:
            raise self.error
        return SweepReport(run_id="sweep-1", listed=3)


def test_the_github_deliveries_route_runs_the_sweep_not_reconcile():
    reconciler, sweep = FakeReconciler(), FakeSweep()
    endpoint = ReconcileEndpoint(lambda: reconciler, sweep=lambda: sweep)  # type: ignore[arg-type,return-value]

    reply = endpoint.handle("POST", "/github-deliveries", {}, b"")

    assert (reply.status, reply.body["run_id"], reply.body["listed"]) == (200, "sweep-1", 3)
    assert (sweep.runs, reconciler.runs) == (1, 0)
    assert endpoint.handle("POST", "/", {}, b"").status == 200 and reconciler.runs == 1


def test_without_a_github_app_the_sweep_route_says_so_and_a_failed_sweep_is_answered():
    no_app = ReconcileEndpoint(FakeReconciler, sweep=lambda: None)
    reply = no_app.handle("POST", "/github-deliveries", {}, b"")
    assert reply == Reply(200, {"skipped": "no GitHub App is configured (GITHUB_APP_ID)"})
    failing = ReconcileEndpoint(FakeReconciler, sweep=lambda: FakeSweep(TransientError("down")))  # type: ignore[arg-type,return-value]
    failed = failing.handle("POST", "/github-deliveries", {}, b"")
    assert failed == Reply(503, {"error": "github delivery sweep failed: TransientError"})


def test_the_handler_context_builds_each_client_once_and_only_when_used():
    built: list[str] = []

    def lookup(name: str) -> str:
        built.append(name)
        return f"{name}-client"

    ctx = HandlerContext(Config(), ClientFactories.from_lookup("the-ledger", lookup))  # type: ignore[arg-type]

    assert (ctx.github, ctx.github, ctx.ledger) == ("github-client", "github-client", "the-ledger")
    assert built == ["github"]


@pytest.fixture
def reconcile_app(monkeypatch) -> Iterator[tuple[object, FakeReconciler]]:
    reconciler = FakeReconciler()
    endpoint = ReconcileEndpoint(lambda: reconciler)
    monkeypatch.setattr(runtime, "reconcile_endpoint", lambda: endpoint)
    app = functions_framework.create_app(target="reconcile", source=str(REPO / "functions/main.py"))
    yield app.test_client(), reconciler


def test_the_reconcile_function_is_as_thin_as_the_others(reconcile_app):
    client, reconciler = reconcile_app
    cases = [
        ("healthz", "GET", "/healthz", b"", 200),
        ("wrong method", "GET", "/", b"", 405),
        ("oversized body", "POST", "/", b"x" * 70_000, 413),
        ("a run", "POST", "/", b"", 200),
    ]
    for name, method, path, body, status in cases:
        assert client.open(path, method=method, data=body).status_code == status, name
    assert reconciler.runs == 1
    assert client.post("/").get_json() == {"examined": 2, "settled": 1}


def test_a_ceiling_lowers_any_endpoint_limit_and_content_length_is_checked_first():
    headers = {"Content-Length": "11"}
    assert Echo().preflight("POST", "/x", headers, 10) == Reply(
        413, {"error": "body over the 10-byte limit"}
    )
    assert Echo().preflight("POST", "/x", {"Content-Length": "10"}, 10) == Limit("x", 10)
    assert Echo().preflight("POST", "/x", {"Content-Length": "1e3"}, 10).status == 400  # type: ignore[union-attr]
    assert Echo().handle("POST", "/x", {}, b"x" * 11, 10).status == 413


GITHUB_LIMIT, GEMINI_LIMIT = 1000, 100
SIGNATURE = "sha256=" + "ab" * 32
GITHUB = {"X-Hub-Signature-256": SIGNATURE, "X-GitHub-Event": "push", "X-GitHub-Delivery": "d1"}


FRESH = "fresh"  # signed when the test runs: the table is built at collection, minutes earlier


def gemini(msg_id: str = "msg_1", timestamp: int | None = None) -> dict[str, str]:
    if timestamp is None:
        return {"webhook-id": msg_id, "webhook-timestamp": FRESH, "webhook-signature": FRESH}
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign_standard_webhook(LOCAL_GEMINI_SECRET, msg_id, timestamp, b"{}"),
    }


def signed_now(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with a FRESH Gemini signature made for the current time."""
    if headers.get("webhook-timestamp") != FRESH:
        return dict(headers)
    stamp, msg_id = int(time.time()), headers["webhook-id"]
    # An id the signer cannot encode is refused on the id itself: any signature will do.
    signable = msg_id.isascii()
    signature = (
        sign_standard_webhook(LOCAL_GEMINI_SECRET, msg_id, stamp, b"{}") if signable else "v1,x"
    )
    return {**headers, "webhook-timestamp": str(stamp), "webhook-signature": signature}


def length(headers: Mapping[str, str], n: int) -> dict[str, str]:
    return {**headers, "Content-Length": str(n)}


# (name, path, headers, Limit or refusal status): judged on headers alone, before any body.
PREFLIGHT = [
    (
        "github within its limit",
        "/github",
        length(GITHUB, GITHUB_LIMIT),
        Limit("github", GITHUB_LIMIT),
    ),
    ("github over its limit", "/github", length(GITHUB, GITHUB_LIMIT + 1), 413),
    ("github, chunked: read up to the limit", "/github", GITHUB, Limit("github", GITHUB_LIMIT)),
    (
        "gemini within its limit",
        "/gemini",
        length(gemini(), GEMINI_LIMIT),
        Limit("gemini", GEMINI_LIMIT),
    ),
    ("gemini over its own limit", "/gemini", length(gemini(), GEMINI_LIMIT + 1), 413),
    ("unknown route", "/bitbucket", length({}, 10**9), 404),
    (
        "github without a signature",
        "/github",
        length({**GITHUB, "X-Hub-Signature-256": ""}, 10),
        401,
    ),
    ("github with a sha1 signature", "/github", {**GITHUB, "X-Hub-Signature-256": "sha1=ab"}, 401),
    (
        "github without an event",
        "/github",
        {k: v for k, v in GITHUB.items() if "Event" not in k},
        400,
    ),
    ("github with a non-ASCII id", "/github", {**GITHUB, "X-GitHub-Delivery": "\u00e9" * 200}, 400),
    ("github with a 201-char id", "/github", {**GITHUB, "X-GitHub-Delivery": "d" * 201}, 400),
    (
        "github with a 200-char id",
        "/github",
        {**GITHUB, "X-GitHub-Delivery": "d" * 200},
        Limit("github", GITHUB_LIMIT),
    ),
    ("gemini without a signature", "/gemini", {"webhook-id": "m", "webhook-timestamp": "1"}, 401),
    ("gemini stale", "/gemini", gemini(timestamp=int(time.time()) - 3600), 401),
    ("gemini with a non-ASCII id", "/gemini", gemini(msg_id="\u00e9" * 20), 400),
    ("malformed Content-Length", "/github", length(GITHUB, -1), 400),
]


@pytest.fixture
def ingress_endpoint(monkeypatch) -> Iterator[Ingress]:
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-hookledger")
    monkeypatch.setenv("MAX_BODY_BYTES", str(GITHUB_LIMIT))
    monkeypatch.setenv("MAX_GEMINI_BODY_BYTES", str(GEMINI_LIMIT))
    runtime.reset()
    yield runtime.ingress()
    runtime.reset()


@pytest.mark.parametrize(
    ("name", "path", "headers", "expected"), [pytest.param(*c, id=c[0]) for c in PREFLIGHT]
)
def test_the_ingress_refuses_on_headers_before_reading_the_body(
    ingress_endpoint, name, path, headers, expected
):
    decision = ingress_endpoint.preflight("POST", path, signed_now(headers))
    if isinstance(expected, Limit):
        assert decision == expected, name
    else:
        assert isinstance(decision, Reply) and decision.status == expected, (name, decision)


class RecordingQueue:
    """Stands in for the ingress's TaskQueue: keeps each task it is asked to create."""

    def __init__(self) -> None:
        self.created: list[tuple[str, bytes]] = []

    def enqueue(self, url: str, body: bytes, headers=None, **options) -> EnqueueResult:
        self.created.append((options["task_id"], body))
        return EnqueueResult(status="created", task_name=options["task_id"])


@pytest.fixture
def recording_ingress(monkeypatch) -> Iterator[tuple[Ingress, RecordingQueue]]:
    """The production ingress with its tasks kept in a list instead of created."""
    queue = RecordingQueue()
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-hookledger")
    monkeypatch.setattr(runtime, "task_queue", lambda: queue)
    runtime.reset()
    yield runtime.ingress(), queue
    runtime.reset()


# (name, body, status): orjson reads the bodies; what it refuses, json decides, as it always did.
JSON_BODIES = [
    ("a JSON object", b'{"ref": "refs/heads/main"}', 202),
    ("with a UTF-8 BOM", b'\xef\xbb\xbf{"ref": "refs/heads/main"}', 202),
    ("in UTF-16", '{"ref": "refs/heads/main"}'.encode("utf-16"), 202),
    ("with NaN", b'{"ref": "refs/heads/main", "n": NaN}', 202),
    ("with a lone surrogate", b'{"ref": "\\ud800"}', 202),
    ("with an integer past 64 bits", b'{"ref": "r", "n": 123456789012345678901234567890}', 202),
    ("not JSON", b"hello", 400),
    ("a JSON array", b"[1, 2]", 400),
    ("invalid UTF-8", b'{"ref": "\xff"}', 400),
    ("nested past any parser's depth", b"[" * 5_000 + b"]" * 5_000, 400),
    # The one body json refused and orjson reads: nested 1,000 to 1,024 levels (json stops
    # at the interpreter's recursion limit, orjson at 1,024).
    ("nested 1,000 deep", b'{"a": ' + b"[" * 999 + b"]" * 999 + b"}", 202),
]


@pytest.mark.parametrize(
    ("name", "body", "status"), [pytest.param(*c, id=c[0]) for c in JSON_BODIES]
)
def test_the_ingress_takes_the_json_bodies_it_always_took(recording_ingress, name, body, status):
    ingress, queue = recording_ingress
    headers = github_headers("push", body, LOCAL_GITHUB_SECRET, "d-json-1")

    reply = ingress.handle("POST", "/github", headers, body)

    assert reply.status == status, (name, reply)
    assert len(queue.created) == (1 if status == 202 else 0), name


# (name, reply body): each answered as Flask's jsonify writes it, byte for byte.
ANSWERS = {
    "plain": {"status": "accepted", "delivery_id": "d-1", "event": "push"},
    "numbers and nulls": {"examined": 2, "settled": 1, "ratio": 0.5, "none": None, "ok": True},
    "nested": {"report": {"b": [1, 2, {"c": "d"}], "a": []}},
    "non-ASCII": {"error": "unknown route '/é'"},
    "a quote and a backslash": {"error": 'a "quoted" \\ path'},
    "a control character": {"error": "line\nbreak\x7f"},
    "a datetime": {"at": datetime(2026, 12, 7, 9, 0, tzinfo=UTC)},
    "a str subclass": {"status": StrEnum("Status", ["accepted"]).accepted},
}


class Answers(Endpoint):
    def post(self, route: str, headers: Mapping[str, str], body: bytes) -> Reply:
        return Reply(202, ANSWERS[body.decode()])


@pytest.mark.parametrize("name", list(ANSWERS))
def test_every_answer_is_written_as_jsonify_writes_it(monkeypatch, name):
    monkeypatch.setattr(runtime, "reconcile_endpoint", lambda: Answers())
    app = functions_framework.create_app(target="reconcile", source=str(REPO / "functions/main.py"))
    with app.app_context():
        expected = flask.jsonify(ANSWERS[name]).get_data()

    response = app.test_client().post("/", data=name.encode())

    assert (response.status_code, response.data) == (202, expected), name
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Content-Length"] == str(len(expected))


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def json_ish(draw: st.DrawFn) -> bytes:
    """JSON text (an object most often), sometimes with a few bytes changed, cut or added."""
    value = draw(st.dictionaries(st.text(max_size=6), _JSON_VALUES, max_size=4) | _JSON_VALUES)
    text = json.dumps(value, ensure_ascii=draw(st.booleans())).encode()
    edit = draw(st.sampled_from(["none", "replace", "insert", "cut"]))
    if edit == "none" or not text:
        return text
    at = draw(st.integers(0, len(text) - 1))
    if edit == "cut":
        return text[:at]
    patch = draw(st.binary(min_size=1, max_size=3))
    return text[:at] + patch + text[at + (edit == "replace") :]


# The fixture's queue only grows across examples: nothing here counts it.
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=json_ish())
def test_a_body_is_taken_exactly_when_json_reads_an_object_from_it(recording_ingress, body):
    """simdjson checks most bodies and orjson reads the rest: json is the reference."""
    ingress, _ = recording_ingress
    try:
        expected = 202 if isinstance(json.loads(body), dict) else 400
    except (ValueError, RecursionError):
        expected = 400
    headers = github_headers("push", body, LOCAL_GITHUB_SECRET, "d-json-2")

    assert ingress.handle("POST", "/github", headers, body).status == expected


def test_a_push_no_app_refuses_is_checked_not_parsed(recording_ingress, monkeypatch):
    ingress, queue = recording_ingress
    body = (REPO / "tests/fixtures/github/push-with-new-branch.payload.json").read_bytes()

    def no_parse(*args: object) -> None:
        raise AssertionError("the push was parsed")

    headers = github_headers("push", body, LOCAL_GITHUB_SECRET, "d-3")
    with monkeypatch.context() as parsers:  # only while the push is handled
        parsers.setattr(ingress_module.orjson, "loads", no_parse)
        parsers.setattr(ingress_module.json, "loads", no_parse)
        reply = ingress.handle("POST", "/github", headers, body)

    assert (reply.status, len(queue.created)) == (202, 1)
