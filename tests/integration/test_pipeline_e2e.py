"""End to end, every part real: a signed push → ingress → Cloud Tasks emulator → worker →
simulator batch → the simulator's signed webhook → ingress → worker → settled, reviews written.

The ingress and worker run under functions-framework as separate processes; the worker
requires the OIDC token the Cloud Tasks emulator mints, verified against its JWKS.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from local.fakes import FakeClock
from local.processes import ServiceError
from shared.clock import system_clock
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_TASKS_SERVICE_ACCOUNT
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.handoff.tasks import ensure_queue, make_client
from tests.plugins.pipeline import (
    FILES,
    OWNER_REPO,
    PROJECT,
    SHA,
    PipelineStack,
    pipeline_stack,
    push_payload,
)
from tests.waiting import wait_until

# Every test here drives three processes end to end; the module's stack alone takes ~6 s.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "github"


Stack = PipelineStack


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[Stack]:
    try:
        with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast) as running:
            yield running
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def fresh(stack: Stack, firestore_client) -> Stack:
    stack.sim.reset()
    for path, data in FILES.items():
        stack.sim.put_file(*OWNER_REPO.split("/"), path, SHA, data)
    return stack


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    return wait_until(check, timeout, what, every=0.1)


def operations(client) -> list[dict[str, Any]]:
    return [doc.to_dict() for doc in client.collection("operations").stream()]


def delivery_status(client, doc_id: str) -> str | None:
    """The delivery's status once it is finished (done/ignored/dead/unresolved), else None."""
    status = (client.collection("deliveries").document(doc_id).get().to_dict() or {}).get("status")
    return status if status in ("done", "ignored", "dead", "unresolved") else None


def reviews(client) -> dict[str, dict[str, Any]]:
    return {d["path"]: d for d in (doc.to_dict() for doc in client.collection("reviews").stream())}


def test_a_push_is_reviewed_end_to_end(fresh: Stack, firestore_client):
    assert fresh.push(push_payload(), delivery="e2e-push-1").status_code == 202
    [op] = wait_for("the batch to be registered", lambda: operations(firestore_client))
    assert (op["kind"], op["status"], sorted(op["context"]["paths"])) == (
        "github-review",
        "pending",
        sorted(FILES),
    )

    fresh.sim.complete(op["name"], state="succeeded", webhook="send")

    done = wait_for(
        "the settlement",
        lambda: [o for o in operations(firestore_client) if o["status"] == "succeeded"],
    )
    assert done[0]["settled_by"] == "webhook"
    written = wait_for(
        "two reviews", lambda: len(reviews(firestore_client)) == 2 and reviews(firestore_client)
    )
    assert set(written) == set(FILES)
    for path, doc in written.items():
        assert (doc["repo"], doc["sha"], doc["operation"]) == (OWNER_REPO, SHA, op["name"])
        assert doc["text"] and "error" not in doc, path
    delivery = firestore_client.collection("deliveries").document("github:e2e-push-1").get()
    assert delivery.get("status") == "done"


def test_duplicate_webhooks_and_a_repeated_push_settle_once(fresh: Stack, firestore_client):
    assert fresh.push(push_payload(), delivery="dup-push-1").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client))
    # The same push again, as a new delivery (a re-sent hook): no second batch.
    assert fresh.push(push_payload(), delivery="dup-push-2").status_code == 202
    assert (
        wait_for(
            "the second push to finish",
            lambda: delivery_status(firestore_client, "github:dup-push-2"),
        )
        == "done"
    )

    fresh.sim.complete(op["name"], state="succeeded", webhook="duplicate")
    fresh.sim.complete(op["name"], state="succeeded", webhook="send")  # a third delivery
    wait_for(
        "three webhook deliveries",
        lambda: len([d for d in fresh.sim.deliveries(op["name"]) if d.get("ok")]) >= 3,
    )
    wait_for(
        "the gemini deliveries to finish",
        lambda: (
            all(
                d.get("status") in ("done", "ignored")
                for d in (
                    doc.to_dict() for doc in firestore_client.collection("deliveries").stream()
                )
                if d["source"] == "gemini"
            )
            and any(
                doc.to_dict()["source"] == "gemini"
                for doc in firestore_client.collection("deliveries").stream()
            )
        ),
    )

    assert len(fresh.sim.batches()) == 1
    [settled] = operations(firestore_client)
    assert (settled["status"], settled["settled_by"]) == ("succeeded", "webhook")
    assert len(reviews(firestore_client)) == len(FILES)


def test_a_contents_api_502_is_retried_and_the_error_names_the_file(fresh: Stack, firestore_client):
    fresh.sim.github_fault("docs/intro.md", status=502, count=3)  # the client retries 3 times
    assert fresh.push(push_payload(), delivery="flaky-push").status_code == 202

    [op] = wait_for("the batch after a retry", lambda: operations(firestore_client), timeout=60)
    assert len(fresh.sim.batches()) == 1
    assert sorted(op["context"]["paths"]) == sorted(FILES)
    logs = fresh.worker.output()
    assert '"severity": "ERROR"' in logs and "docs/intro.md" in logs
    assert (
        wait_for(
            "the push delivery to finish",
            lambda: delivery_status(firestore_client, "github:flaky-push"),
        )
        == "done"
    )


def test_a_failed_batch_settles_failed_with_its_error(fresh: Stack, firestore_client):
    assert fresh.push(push_payload(), delivery="fail-push").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client))

    fresh.sim.complete(
        op["name"],
        state="failed",
        webhook="send",
        error={"code": 13, "message": "model overloaded"},
    )

    failed = wait_for(
        "the failed settlement",
        lambda: [o for o in operations(firestore_client) if o["status"] == "failed"],
    )
    assert failed[0]["error"]["message"] == "model overloaded"
    written = wait_for(
        "the reviews", lambda: len(reviews(firestore_client)) == 2 and reviews(firestore_client)
    )
    assert {doc["error"] for doc in written.values()} == {"model overloaded"}


def test_a_succeeded_batch_whose_rows_all_failed_records_each_row_error(
    fresh: Stack, firestore_client
):
    assert fresh.push(push_payload(), delivery="rows-push").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client))

    fresh.sim.complete(
        op["name"],
        state="succeeded",
        webhook="send",
        rows=[
            {"index": 0, "error": {"code": 3, "message": "row zero refused"}},
            {"index": 1, "error": {"code": 3, "message": "row one refused"}},
        ],
    )

    written = wait_for(
        "the reviews", lambda: len(reviews(firestore_client)) == 2 and reviews(firestore_client)
    )
    assert {doc["error"] for doc in written.values()} == {"row zero refused", "row one refused"}
    [settled] = operations(firestore_client)
    assert settled["status"] == "succeeded"
    assert "every row failed" in fresh.worker.output()  # logged as a warning


BLOCKED_FILE = "docs/blocked.md"


def gemini_deliveries_finished(client) -> bool:
    docs = [doc.to_dict() for doc in client.collection("deliveries").stream()]
    gemini = [d for d in docs if d["source"] == "gemini"]
    return bool(gemini) and all(d.get("status") in ("done", "ignored") for d in gemini)


def test_a_blocked_a_truncated_and_a_good_file_settle_once_as_what_they_are(
    fresh: Stack, firestore_client
):
    fresh.put_files(files={BLOCKED_FILE: b"# Blocked\n\nSomething Gemini refuses.\n"})
    paths = [*FILES, BLOCKED_FILE]
    assert fresh.push(push_payload(files=paths), delivery="outcomes-push").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client))

    fresh.sim.complete(
        op["name"],
        state="succeeded",
        webhook="duplicate",
        rows={BLOCKED_FILE: "blocked", "docs/intro.md": "truncated"},
    )

    written = wait_for(
        "three reviews", lambda: len(reviews(firestore_client)) == 3 and reviews(firestore_client)
    )
    blocked, truncated, good = (
        written[BLOCKED_FILE],
        written["docs/intro.md"],
        written["docs/howto.markdown"],
    )
    assert (blocked["status"], blocked["blocked"], blocked["block_reason"]) == (
        "error",
        True,
        "SAFETY",
    )
    assert blocked["error"].startswith("prompt blocked: SAFETY; safety ratings: ")
    assert "text" not in blocked
    assert (truncated["status"], truncated["truncated"], truncated["finish_reason"]) == (
        "ok",
        True,
        "MAX_TOKENS",
    )
    assert truncated["text"] and "key=docs/intro.md" in truncated["text"]
    assert good["status"] == "ok" and "truncated" not in good and "error" not in good
    [settled] = operations(firestore_client)
    assert (settled["status"], settled["settled_by"]) == ("succeeded", "webhook")
    assert settled["result_counts"] == {"succeeded": 1, "failed": 0, "blocked": 1, "truncated": 1}
    wait_for("every webhook copy handled", lambda: gemini_deliveries_finished(firestore_client))
    settled_lines = [
        line
        for line in fresh.worker.output().splitlines()
        if "operation settled" in line and op["name"] in line
    ]
    assert len(settled_lines) == 1, settled_lines  # two webhooks, one settlement


def test_a_webhook_for_an_operation_not_in_the_ledger_is_recorded_unresolved(
    fresh: Stack, firestore_client
):
    from shared.gemini import GeminiGateway, make_client

    gateway = GeminiGateway(make_client("sim-key", fresh.sim.url, timeout_s=5))
    stranger = gateway.create_batch("models/m", [("k", "p")], "not-ours")
    fresh.sim.complete(stranger, state="succeeded", webhook="send")

    def gemini_delivery():
        docs = [d.to_dict() for d in firestore_client.collection("deliveries").stream()]
        return [
            d
            for d in docs
            if d["source"] == "gemini" and d["status"] in ("done", "ignored", "dead", "unresolved")
        ]

    [delivery] = wait_for("the gemini delivery", gemini_delivery)
    assert delivery["status"] == "unresolved"
    assert stranger in delivery["last_error"]
    assert operations(firestore_client) == []
    wait_for("the worker's warning", lambda: "unresolved" in fresh.worker.output())


def set_webhook_mode(stack: Stack, **mode: Any) -> None:
    answer = requests.post(f"{stack.sim_url}/_sim/webhook-mode", json=mode, timeout=5)
    answer.raise_for_status()


def post_gemini_event(
    stack: Stack, event: str, data_id: str, user_metadata: dict[str, Any] | None = None
) -> requests.Response:
    """A Gemini event signed with the local static secret, straight to the ingress."""
    import time

    from shared.config import LOCAL_GEMINI_SECRET
    from shared.signatures import sign_standard_webhook

    body = json.dumps(
        {
            "type": event,
            "version": "v1",
            "timestamp": "2026-01-01T00:00:00Z",
            "data": {"id": data_id, **({"user_metadata": user_metadata} if user_metadata else {})},
        }
    ).encode()
    msg_id, now = f"msg_{uuid.uuid4().hex}", int(time.time())
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(now),
        "webhook-signature": sign_standard_webhook(LOCAL_GEMINI_SECRET, msg_id, now, body),
        "Content-Type": "application/json",
    }
    return requests.post(f"{stack.ingress_url}/gemini", data=body, headers=headers, timeout=10)


def settled(client, name: str) -> dict[str, Any] | None:
    found = [o for o in operations(client) if o["name"] == name and o["status"] != "pending"]
    return found[0] if found else None


# Each documented event type, and each form of `data.id` Gemini may send, with its outcome.
SIMULATED_EVENTS = [
    # (case, kind of operation, control state, data.id form, settled status)
    ("batch.succeeded, full name", "batch", "succeeded", "name", "succeeded"),
    ("batch.succeeded, bare id", "batch", "succeeded", "bare", "succeeded"),
    ("batch.failed, bare id", "batch", "failed", "bare", "failed"),
    ("batch.expired, full name", "batch", "expired", "name", "expired"),
    ("video.generated, bare id", "video", "succeeded", "bare", "succeeded"),
    ("interaction.completed, bare id", "interaction", "succeeded", "bare", "succeeded"),
    ("interaction.failed, full name", "interaction", "failed", "name", "failed"),
]


@pytest.mark.parametrize(
    ("case", "kind", "state", "form", "expected"),
    SIMULATED_EVENTS,
    ids=[c[0] for c in SIMULATED_EVENTS],
)
def test_each_documented_event_and_id_form_settles_by_webhook(
    fresh: Stack, firestore_client, case, kind, state, form, expected
):
    from shared.gemini import GeminiGateway, make_client
    from shared.ledger import Ledger

    set_webhook_mode(fresh, data_id=form)
    ledger = Ledger(firestore_client)
    suffix = uuid.uuid4().hex[:10]
    if kind == "batch":
        gateway = GeminiGateway(make_client("sim-key", fresh.sim.url, timeout_s=5))
        name = gateway.create_batch("models/m", [("k.md", "p")], f"ev-{suffix}")
        ledger.operations.register(
            name, "interaction"
        )  # a kind with no write-back: the event is the point
    else:
        name = (
            f"models/veo-3.0-generate-001/operations/v{suffix}"
            if kind == "video"
            else f"interactions/i{suffix}"
        )
        fresh.sim.create_operation(name)
        ledger.operations.register(name, kind)

    fresh.sim.complete(name, state=state, webhook="send")

    done = wait_for(f"{case}: settlement", lambda: settled(firestore_client, name))
    assert (done["status"], done["settled_by"]) == (expected, "webhook"), case
    # The event really named the operation in the form under test.
    expected_id = name if form == "name" else name.rsplit("/", 1)[-1]
    assert event_ids(firestore_client, name) == [expected_id], case


def event_ids(client, name: str) -> list[str]:
    """`data.id` of every Gemini delivery naming `name`, in either form."""
    forms = {name, name.rsplit("/", 1)[-1]}
    ids = []
    for doc in client.collection("deliveries").stream():
        delivery = doc.to_dict()
        if delivery["source"] == "gemini" and delivery.get("payload"):
            ids.append(json.loads(delivery["payload"])["data"]["id"])
    return [found for found in ids if found in forms]


def test_the_documented_batch_123456_id_form_resolves_to_its_batch(fresh: Stack, firestore_client):
    from shared.gemini import GeminiGateway, make_client
    from shared.ledger import Ledger

    gateway = GeminiGateway(make_client("sim-key", fresh.sim.url, timeout_s=5))
    name = gateway.create_batch("models/m", [("k.md", "p")], "documented-form")
    Ledger(firestore_client).operations.register(name, "interaction")
    fresh.sim.complete(name, state="succeeded", webhook="drop")

    answer = post_gemini_event(fresh, "batch.succeeded", "batch_" + name.removeprefix("batches/"))

    assert answer.status_code == 202, answer.text
    done = wait_for("the settlement", lambda: settled(firestore_client, name))
    assert (done["status"], done["settled_by"]) == ("succeeded", "webhook")


def test_a_push_settles_by_the_tag_its_batch_echoes_whatever_form_data_id_takes(
    fresh: Stack, firestore_client
):
    from apps.review.kind import review_tag
    from shared.gemini import HOOKLEDGER_ID

    assert fresh.push(push_payload(), delivery="echo-push").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client))
    [batch] = fresh.sim.batches()
    tag = review_tag(OWNER_REPO, SHA)
    assert batch["webhook_config"]["user_metadata"] == {HOOKLEDGER_ID: tag}
    fresh.sim.complete(op["name"], state="succeeded", webhook="drop")

    answer = post_gemini_event(
        fresh, "batch.succeeded", f"evt-{uuid.uuid4().hex}", {HOOKLEDGER_ID: tag}
    )

    assert answer.status_code == 202, answer.text
    done = wait_for("the settlement", lambda: settled(firestore_client, op["name"]))
    assert (done["status"], done["settled_by"]) == ("succeeded", "webhook")
    assert len(wait_for("the reviews", lambda: reviews(firestore_client))) == len(FILES)


def test_interaction_requires_action_is_ignored_and_never_settles(fresh: Stack, firestore_client):
    from shared.ledger import Ledger

    name = f"interactions/wait-{uuid.uuid4().hex[:8]}"
    fresh.sim.create_operation(name)
    Ledger(firestore_client).operations.register(name, "interaction")

    answer = post_gemini_event(fresh, "interaction.requires_action", name)

    assert (answer.status_code, answer.json()["status"]) == (200, "ignored")
    assert settled(firestore_client, name) is None


def test_a_video_generation_is_settled_by_its_video_generated_webhook(
    fresh: Stack, firestore_client
):
    from shared.ledger import Ledger

    name = "models/veo-3.0-generate-001/operations/vid-e2e-1"
    fresh.sim.create_operation(name)
    Ledger(firestore_client).operations.register(name, "video", {"prompt": "a lighthouse"})

    fresh.sim.complete(name, state="succeeded", webhook="send")

    done = wait_for(
        "the video settlement",
        lambda: [o for o in operations(firestore_client) if o["status"] == "succeeded"],
    )
    assert (done[0]["name"], done[0]["settled_by"]) == (name, "webhook")


def test_an_interaction_is_settled_by_its_interaction_completed_webhook(
    fresh: Stack, firestore_client
):
    from shared.ledger import Ledger

    name = "interactions/int-e2e-1"
    fresh.sim.create_operation(name)
    Ledger(firestore_client).operations.register(name, "interaction")

    fresh.sim.complete(name, state="succeeded", webhook="send")

    done = wait_for(
        "the interaction settlement",
        lambda: [o for o in operations(firestore_client) if o["status"] == "succeeded"],
    )
    assert (done[0]["name"], done[0]["settled_by"]) == (name, "webhook")

    def finished() -> list[dict]:
        # The worker marks the delivery done just after the settling commit: wait for it.
        found = [d.to_dict() for d in firestore_client.collection("deliveries").stream()]
        mine = [d for d in found if d.get("event") == "interaction.completed"]
        return mine if mine and all(d["status"] != "queued" for d in mine) else []

    [delivery] = wait_for("the webhook delivery to finish", finished)
    assert delivery["status"] == "done"


def test_a_push_with_no_reviewable_file_is_ignored(fresh: Stack, firestore_client):
    assert (
        fresh.push(push_payload(files=["README.txt"]), delivery="nothing-push").status_code == 202
    )
    status = wait_for(
        "the delivery", lambda: delivery_status(firestore_client, "github:nothing-push")
    )
    assert status == "ignored"
    assert fresh.sim.batches() == []


def _sealed(clock) -> bytes:
    """An envelope sealed with the real key, at the time `clock` gives."""
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY], clock=clock)
    envelope = Envelope(
        source="github",
        event="push",
        delivery_id="forged-1",
        received_at=clock(),
        headers={},
        body=push_payload(),
    )
    return sealer.seal(envelope)


@pytest.mark.parametrize(
    ("name", "body", "headers", "status"),
    [
        ("no token", lambda: _sealed(system_clock), {}, 401),
        ("not a bearer token", lambda: _sealed(system_clock), {"Authorization": "Basic abc"}, 401),
        (
            "a made-up token",
            lambda: _sealed(system_clock),
            {"Authorization": "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln"},
            401,
        ),
    ],
)
def test_a_worker_call_without_a_valid_token_is_refused(
    fresh: Stack, firestore_client, name, body, headers, status
):
    response = requests.post(fresh.worker_url, data=body(), headers=headers, timeout=10)

    assert response.status_code == status, name
    assert list(firestore_client.collection("deliveries").stream()) == [], name


def test_a_worker_call_with_a_bad_or_expired_envelope_is_refused(
    fresh: Stack, firestore_client, cloudtasks_emulator_fast
):
    """A real token (minted by the emulator for a task) but a forged or stale envelope."""
    token = _emulator_token(cloudtasks_emulator_fast, fresh)
    auth = {"Authorization": f"Bearer {token}"}
    forged = EnvelopeSealer(["an-attacker-key-0123456789"]).seal(
        Envelope("github", "push", "forged-2", system_clock(), {}, push_payload())
    )
    stale_clock = FakeClock(system_clock() - timedelta(days=8))
    expired = _sealed(stale_clock)

    for name, body in (("forged signature", forged), ("expired envelope", expired)):
        response = requests.post(fresh.worker_url, data=body, headers=auth, timeout=10)
        assert response.status_code == 401, name
    assert list(firestore_client.collection("deliveries").stream()) == []


def _emulator_token(emulator, stack: Stack) -> str:
    """Have the Cloud Tasks emulator deliver one OIDC task to a recorder; return its token."""
    from local.loopback import QuietHandler, serve

    seen: list[str] = []

    class Recorder(QuietHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.end_headers()

    server = serve(Recorder)
    try:
        client = make_client(emulator.host)
        queue = f"projects/{PROJECT}/locations/us-central1/queues/token-{uuid.uuid4().hex[:8]}"
        ensure_queue(client, queue)
        from shared.handoff.tasks import TaskQueue

        TaskQueue(client, queue).enqueue(
            f"{server.url}/",
            b"{}",
            oidc_service_account=LOCAL_TASKS_SERVICE_ACCOUNT,
            oidc_audience=f"{stack.worker_url}/",
        )
        header = wait_for("the OIDC task", lambda: seen and seen[0])
    finally:
        server.close()
    return header.split(" ", 1)[1]


def test_a_batch_deleted_at_gemini_settles_failed_gone_within_two_reconcile_runs(
    fresh: Stack, firestore_client
):
    from shared.gemini import GeminiGateway, make_client
    from shared.ledger import Ledger
    from shared.reconcile import Reconciler, ReconcileSettings

    assert fresh.push(push_payload(), delivery="gone-push").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client))
    fresh.sim.delete_batch(op["name"])  # the user deleted it at Gemini: no webhook comes
    clock = FakeClock(system_clock() + timedelta(minutes=5))  # past the grace period
    settings = ReconcileSettings(grace_s=0, adopt_orphans=False)
    gateway = GeminiGateway(make_client("sim-key", fresh.sim.url, timeout_s=5))
    reconciler = Reconciler(Ledger(firestore_client, clock=clock), gateway, clock, settings)
    interval = timedelta(seconds=settings.backoff.first_s)  # one check interval

    runs = [reconciler.run()]
    clock.advance(interval.total_seconds())
    runs.append(reconciler.run())

    assert [(r.not_found, r.settled) for r in runs] == [(1, 0), (0, 1)]
    [gone] = operations(firestore_client)
    assert (gone["status"], gone["settled_by"], gone["error"]["reason"]) == (
        "failed",
        "reconcile",
        "gone",
    )
    written = reviews(firestore_client)
    assert set(written) == set(FILES)
    assert all(doc["status"] == "error" and "gone" in doc["error"] for doc in written.values())


# GitHub's Contents API returns base64 content (what ContentsClient reads) only for files of
# at most 1 MB; larger ones need the raw media type. So the push carries many files each
# under that limit, together over the 20 MB inline limit: the worker must upload them.
BIG_FILE_BYTES = 990_000
BIG_FILES = [f"docs/big-{i:02}.md" for i in range(21)]


def big_markdown(index: int, body: bytes) -> bytes:
    """File `index`: its own heading, then the shared `body`, cut to BIG_FILE_BYTES."""
    head = f"# Big file {index}\n\n".encode()
    return head + body[: BIG_FILE_BYTES - len(head)]


def test_a_file_input_batch_with_one_malformed_results_line_settles_every_other_row(
    fresh: Stack, firestore_client
):
    from apps.review.pipeline import PROMPT
    from shared.gemini import MAX_INLINE_BYTES
    from shared.gemini.rows import inline_bytes

    line = b"Hookledger settles every operation exactly once, webhook or reconcile.\n"
    body = line * (BIG_FILE_BYTES // len(line) + 1)
    for i, path in enumerate(BIG_FILES):  # one file in memory at a time
        fresh.put_files(files={path: big_markdown(i, body)})
    # Precondition: inline, these prompts would exceed the create request's limit.
    prompts = (
        (p, PROMPT.format(path=p, text=big_markdown(i, body).decode()))
        for i, p in enumerate(BIG_FILES)
    )
    assert inline_bytes(prompts) > MAX_INLINE_BYTES

    assert fresh.push(push_payload(files=BIG_FILES), delivery="big-push").status_code == 202
    [op] = wait_for("the batch", lambda: operations(firestore_client), timeout=120)
    assert op["context"]["paths"] == BIG_FILES  # request order: line 2 is the second file

    # malformed_lines is refused (400) for an inline batch: this one was made from a file.
    done = fresh.sim.complete(
        op["name"], state="succeeded", webhook="duplicate", malformed_lines=[2]
    )
    results_file = done["metadata"]["output"]["responsesFile"]

    settled_op = wait_for(
        "the settlement", lambda: settled(firestore_client, op["name"]), timeout=60
    )
    assert (settled_op["status"], settled_op["settled_by"]) == ("succeeded", "webhook")
    assert settled_op["result_counts"] == {
        "succeeded": len(BIG_FILES) - 1,
        "failed": 1,
        "blocked": 0,
        "truncated": 0,
    }
    written = wait_for(
        "every review",
        lambda: len(reviews(firestore_client)) == len(BIG_FILES) and reviews(firestore_client),
    )
    bad = written.pop(BIG_FILES[1])
    assert (bad["status"], bad["error"]) == (
        "error",
        f"{results_file}: line 2 is not a JSON object",
    )
    assert "text" not in bad
    for path, doc in written.items():
        assert doc["status"] == "ok" and "error" not in doc, path
        assert f"key={path}" in doc["text"], path
    wait_for("every webhook copy handled", lambda: gemini_deliveries_finished(firestore_client))
    settled_lines = [
        entry
        for entry in fresh.worker.output().splitlines()
        if "operation settled" in entry and op["name"] in entry
    ]
    assert len(settled_lines) == 1, settled_lines  # two webhooks, one settlement
