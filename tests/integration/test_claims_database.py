"""The claim store in its own Firestore database, through the production wiring.

The ingress and the worker are loaded by functions-framework's real loader, on the
emulators, with the two databases laid out as deployed: a body over 512 KiB is
claim-checked into `CLAIMS_DATABASE` by the ingress, which touches nothing of the
ledger's `(default)` database; the worker reads it back from there and records the
delivery in the ledger.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import functions_framework
import pytest

from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GITHUB_SECRET
from shared.entrypoints import runtime
from shared.handoff.payloads import COLLECTION, payload_key
from shared.handoff.tasks import ensure_queue, make_client
from shared.signatures import sign_github

REPO = Path(__file__).resolve().parents[2]
MAIN_PY = str(REPO / "functions" / "main.py")
# A tag push: the worker's push handler ignores it without calling GitHub or Gemini.
TAG_PUSH = REPO / "tests" / "fixtures" / "github" / "push-payload.json"


def collections(client: Any) -> set[str]:
    return {c.id for c in client.collections()}


def big_push() -> bytes:
    """The tag push padded past the 512 KiB claim threshold, still a valid push body."""
    payload = json.loads(TAG_PUSH.read_bytes())
    payload["padding"] = "x" * (600 * 1024)
    return json.dumps(payload).encode()


@pytest.fixture
def apps(cloudtasks_emulator, firestore_client, monkeypatch):  # type: ignore[no-untyped-def]
    """(ingress, worker) test clients on a paused queue of their own, so the task stays listable."""
    tasks_client = make_client(cloudtasks_emulator.host)
    queue_id = f"claims-{uuid.uuid4().hex[:12]}"
    queue = f"projects/demo-hookledger/locations/us-central1/queues/{queue_id}"
    ensure_queue(tasks_client, queue)
    tasks_client.pause_queue(name=queue)
    for name, value in {
        "GOOGLE_CLOUD_PROJECT": "demo-hookledger",
        "CLOUD_TASKS_EMULATOR_HOST": cloudtasks_emulator.host,
        "TASKS_QUEUE": queue_id,
        "WORKER_URL": "http://127.0.0.1:9/worker",
        "GITHUB_WEBHOOK_SECRETS": LOCAL_GITHUB_SECRET,
        "ENVELOPE_KEYS": LOCAL_ENVELOPE_KEY,
        # Never called (the tag push is ignored), but the push handler builds its clients.
        "GEMINI_API_KEY": "unused-key",
        "GEMINI_BASE_URL": "http://127.0.0.1:9",
        "GITHUB_API_URL": "http://127.0.0.1:9",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("CLAIMS_DATABASE", raising=False)
    runtime.reset()
    ingress = functions_framework.create_app(target="ingress", source=MAIN_PY).test_client()
    worker = functions_framework.create_app(target="worker", source=MAIN_PY).test_client()
    yield ingress, worker, tasks_client, queue
    runtime.reset()
    tasks_client.delete_queue(name=queue)


@pytest.mark.slow
def test_a_claim_checked_push_lands_in_the_claims_database_and_only_there(
    apps, firestore_client, claims_firestore_client
):
    ingress, worker, tasks_client, queue = apps
    body, delivery = big_push(), str(uuid.uuid4())
    headers = {
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
        "Content-Type": "application/json",
    }

    accepted = ingress.post("/github", data=body, headers=headers)

    assert accepted.status_code == 202, accepted.get_data(as_text=True)
    key = payload_key("github", delivery)
    parent = claims_firestore_client.collection(COLLECTION).document(key).get()
    assert parent.exists and parent.get("size") == len(body)
    # The ingress wrote nothing of, and nothing into, the ledger's database.
    assert collections(firestore_client) == set()

    (task,) = tasks_client.list_tasks(request={"parent": queue, "response_view": "FULL"})
    done = worker.post(
        "/", data=task.http_request.body, headers={"Content-Type": "application/json"}
    )

    assert done.status_code == 200, done.get_data(as_text=True)
    assert done.get_json()["status"] == "ignored"
    record = runtime.ledger().deliveries.get("github", delivery)
    assert record is not None and record.status == "ignored"
    assert record.payload_ref == key
    assert COLLECTION not in collections(firestore_client)
    assert collections(claims_firestore_client) == {COLLECTION}


def test_the_claims_database_is_named_by_claims_database(
    apps, claims_firestore_client, monkeypatch
):
    from google.cloud import firestore

    monkeypatch.setenv("CLAIMS_DATABASE", "other-claims")
    runtime.reset()
    store = runtime.payload_store()

    ref = store.put(payload_key("github", "named"), b"payload")

    other = firestore.Client(project="demo-hookledger", database="other-claims")
    try:
        assert other.collection(COLLECTION).document(ref).get().exists
        assert store.get(ref) == b"payload"
        assert not claims_firestore_client.collection(COLLECTION).document(ref).get().exists
    finally:
        other.collection(COLLECTION).document(ref).delete()
        other.close()
