"""GitHub App installations through the real path: a signed `installation` /
`installation_repositories` delivery → ingress → Cloud Tasks emulator → worker → the
ledger's `installations/{id}`, and a push from an installation that no longer wants it
answered `ignored` with nothing fetched (the simulator's request log shows no Contents GET).

Bodies are GitHub's published examples (tests/fixtures/github/, see its README) sent byte
for byte; to play one installation's history, `history()` sets `installation.id` (one per
test: the ingress dedupes a body it has seen), `account.login`, `updated_at` and the
repository names of an example, and nothing else.
The duplicate and replay tests run the worker in this process on the same emulator, so
they can send one sealed envelope twice, as Cloud Tasks may.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from local.processes import ServiceError
from shared import handlers
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_GITHUB_SECRET, Config
from shared.entrypoints.worker import Worker
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.ledger import Ledger
from shared.signatures import sign_github
from tests.plugins.pipeline import PipelineStack, pipeline_stack
from tests.waiting import wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
# The published `created` example's installation and its one repository.
INSTALLATION = 957387
ACCOUNT = "Codertocat"
REPO = "Codertocat/Hello-World"
SHA = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
FILES = {"docs/intro.md": b"# Intro\n\nHello.\n"}


def history(
    name: str, number: int, minute: int | None = None, repos: list[str] | None = None
) -> bytes:
    """The published example `name` as an event of installation `number` at 02:`minute`
    (RFC 3339, as GitHub's suspend example has it) naming `repos` (its removed or added
    repositories)."""
    payload = json.loads((FIXTURES / name).read_bytes())
    installation = payload["installation"]
    installation["id"] = number
    installation["account"]["login"] = ACCOUNT
    if minute is not None:
        installation["updated_at"] = f"2021-04-29T02:{minute:02d}:00Z"
    if "repository_selection" in payload:  # installation_repositories
        payload["repository_selection"] = installation["repository_selection"] = "selected"
        field = f"repositories_{payload['action']}"
        payload[field] = [{**payload[field][0], "full_name": r} for r in repos or [REPO]]
    elif installation.get("repository_selection"):
        installation["repository_selection"] = "selected"  # as the `created` example's
    return json.dumps(payload).encode()


def push_body(installation: int | None, repo: str = REPO) -> bytes:
    """A push to `repo`'s default branch adding FILES, as sent to an App (with its
    `installation`, as in GitHub's push-with-installation example), or without one."""
    payload: dict[str, Any] = {
        "ref": "refs/heads/master",
        "before": "0" * 40,
        "after": SHA,
        "deleted": False,
        "repository": {"full_name": repo, "default_branch": "master"},
        "pusher": {"name": f"pusher-{uuid.uuid4().hex[:8]}"},  # a distinct body each time
        "commits": [{"id": SHA, "added": list(FILES), "modified": [], "removed": []}],
    }
    if installation is not None:
        payload["installation"] = {"id": installation, "node_id": "MDIzOkludGVncmF0aW9u"}
    return json.dumps(payload).encode()


# ------------------------------------------------------------- through ingress and worker


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[PipelineStack]:
    try:
        with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast) as running:
            yield running
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def number() -> int:
    """This test's own installation id."""
    return 1_000_000 + uuid.uuid4().int % 1_000_000_000


@pytest.fixture
def fresh(stack: PipelineStack, firestore_client) -> PipelineStack:
    stack.sim.reset()
    for path, data in FILES.items():
        stack.sim.put_file(*REPO.split("/"), path, SHA, data)
    return stack


def send(stack: PipelineStack, event: str, body: bytes, delivery: str) -> requests.Response:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
        "Content-Type": "application/json",
    }
    return requests.post(f"{stack.ingress_url}/github", data=body, headers=headers, timeout=10)


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    return wait_until(check, 30.0, what, every=0.1)


def stored(client: Any, number: int = INSTALLATION) -> dict[str, Any]:
    return client.collection("installations").document(str(number)).get().to_dict() or {}


def finished(client: Any, delivery: str) -> str | None:
    """The delivery's status once finished, else None."""
    doc = client.collection("deliveries").document(f"github:{delivery}").get().to_dict() or {}
    return doc.get("status") if doc.get("status") in ("done", "ignored", "dead") else None


def record(stack: PipelineStack, client: Any, event: str, body: bytes, delivery: str) -> str:
    assert send(stack, event, body, delivery).status_code == 202
    return str(wait_for(f"delivery {delivery} to finish", lambda: finished(client, delivery)))


def file_reads(stack: PipelineStack) -> list[str]:
    """The files the review asked the simulator's GitHub for, in order: each file a GraphQL
    query named, or a Contents GET's path."""
    reads: list[str] = []
    for entry in stack.sim.github_reads():
        if entry["path"] == "/graphql":
            reads += [expression.partition(":")[2] for expression in entry.get("files", [])]
        else:
            reads.append(entry["path"].partition("/contents/")[2])
    return reads


def operations(client: Any) -> list[dict[str, Any]]:
    return [doc.to_dict() for doc in client.collection("operations").stream()]


@pytest.mark.slow
def test_created_is_recorded_active_with_its_repositories(fresh, firestore_client):
    body = (FIXTURES / "installation-created.payload.json").read_bytes()  # as published

    assert record(fresh, firestore_client, "installation", body, "d-created") == "done"
    doc = stored(firestore_client)
    assert (doc["status"], doc["account"], doc["repository_selection"]) == (
        "active",
        ACCOUNT,
        "selected",
    )
    assert [(r["full_name"], r["covered"]) for r in doc["repositories"]] == [(REPO, True)]
    assert doc["delivery_id"] == "d-created"
    # The same delivery again: the ingress's dedupe answers before anything is enqueued.
    again = send(fresh, "installation", body, "d-created")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    assert stored(firestore_client) == doc


@pytest.mark.slow
def test_a_suspended_installations_push_is_ignored_unfetched_and_proceeds_once_unsuspended(
    fresh, firestore_client, number
):
    def event(name: str, minute: int, delivery: str) -> None:
        record(fresh, firestore_client, "installation", history(name, number, minute), delivery)

    event("installation-created.payload.json", 0, "d-c")
    event("installation-suspend.payload.json", 5, "d-s")
    assert stored(firestore_client, number)["status"] == "suspended"

    assert record(fresh, firestore_client, "push", push_body(number), "d-push-1") == "ignored"
    assert file_reads(fresh) == [] and operations(firestore_client) == []

    event("installation-unsuspend.payload.json", 9, "d-u")
    assert stored(firestore_client, number)["status"] == "active"
    assert record(fresh, firestore_client, "push", push_body(number), "d-push-2") == "done"
    [op] = operations(firestore_client)
    assert (op["context"]["repo"], op["context"]["paths"]) == (REPO, list(FILES))
    assert file_reads(fresh) == ["docs/intro.md"]


@pytest.mark.slow
def test_a_push_from_a_repository_removed_from_the_installation_is_ignored_unfetched(
    fresh, firestore_client, number
):
    created = history("installation-created.payload.json", number, 0)
    record(fresh, firestore_client, "installation", created, "d-c")
    removed = history("installation_repositories-removed.payload.json", number, 7)
    record(fresh, firestore_client, "installation_repositories", removed, "d-r")

    doc = stored(firestore_client, number)
    assert [(r["full_name"], r["covered"]) for r in doc["repositories"]] == [(REPO, False)]
    assert record(fresh, firestore_client, "push", push_body(number), "d-push") == "ignored"
    assert file_reads(fresh) == [] and operations(firestore_client) == []


@pytest.mark.slow
def test_an_older_event_delivered_after_a_newer_one_changes_nothing(
    fresh, firestore_client, number
):
    created = history("installation-created.payload.json", number, 0)
    record(fresh, firestore_client, "installation", created, "d-c")
    unsuspend = history("installation-unsuspend.payload.json", number, 9)
    record(fresh, firestore_client, "installation", unsuspend, "d-u")
    newer = stored(firestore_client, number)

    late = history("installation-suspend.payload.json", number, 5)  # 02:05, before 02:09
    assert record(fresh, firestore_client, "installation", late, "d-s-late") == "done"

    assert stored(firestore_client, number) == newer  # status, orders, updated_at, delivery
    assert (newer["status"], newer["delivery_id"]) == ("active", "d-u")


@pytest.mark.slow
def test_pushes_from_an_unknown_installation_or_without_one_proceed(
    fresh, firestore_client, number
):
    assert record(fresh, firestore_client, "push", push_body(number), "d-p1") == "done"
    assert record(fresh, firestore_client, "push", push_body(None), "d-p2") == "done"
    # One commit pushed twice, one batch: both went past the installation check.
    assert len(operations(firestore_client)) == 1
    assert file_reads(fresh)


# ------------------------------------------------------------- one delivery run twice


@pytest.fixture
def worker(firestore_client) -> Iterator[tuple[Worker, Ledger]]:
    import shared.handlers.builtin  # noqa: F401  (registers the installation handler)

    saved = handlers.snapshot()
    ledger = Ledger(firestore_client)
    sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
    yield Worker(Config(), sealer=sealer, ledger=ledger, services=lambda name: None), ledger
    handlers.restore(saved)


def sealed(event: str, body: bytes, delivery: str, received_at: datetime) -> bytes:
    envelope = Envelope("github", event, delivery, received_at, {}, body)
    return EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope)


def run(worker: Worker, envelope: bytes) -> dict[str, Any]:
    reply = worker.handle("POST", "/", {"X-CloudTasks-TaskRetryCount": "0"}, envelope)
    assert reply.status == 200, reply.body
    return dict(reply.body)


def test_one_envelope_run_twice_and_a_replay_of_it_change_nothing(worker, number):
    worker, ledger = worker
    t0 = datetime.now(UTC)
    created = history("installation-created.payload.json", number, 0)
    # GitHub's `added` example carries the `created` example's updated_at: a tie.
    added = history("installation_repositories-added.payload.json", number, 0, ["o/space"])
    assert run(worker, sealed("installation", created, "d-c", t0))["status"] == "done"
    later = t0 + timedelta(seconds=1)
    assert run(worker, sealed("installation_repositories", added, "d-a", later))["status"] == "done"
    recorded = ledger.installations.get(number)
    assert recorded.covered == (REPO, "o/space")

    # Cloud Tasks delivers the same task again: the delivery is finished.
    assert run(worker, sealed("installation", created, "d-c", t0))["status"] == "duplicate"
    # An operator's replay: reopened and re-sealed with a new received_at; the handler runs.
    ledger.deliveries.reopen("github", "d-c")
    replayed = sealed("installation", created, "d-c", t0 + timedelta(minutes=5))
    assert run(worker, replayed)["status"] == "done"

    assert ledger.installations.get(number) == recorded  # o/space still covered
