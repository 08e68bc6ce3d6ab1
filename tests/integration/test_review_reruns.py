""" "Re-run" from GitHub (docs/architecture.md, "Re-run"): the push's check run is reset to
`in_progress` and completed again by a second review that supersedes the first, on the
SAME run; a re-run of a re-run works; one `rerequested` delivery makes one batch however
often it arrives; a run of another name starts nothing.

The real ingress and worker processes run against the simulator as the App's GitHub, set
up like tests/integration/test_review_check_runs.py; "Re-run" is the simulator's control
call, which sends the signed `check_run` `rerequested` webhook GitHub would send.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from apps.review.checks import CHECK_NAME
from apps.review.kind import review_tag
from shared.config import LOCAL_GITHUB_SECRET
from shared.ledger import Ledger, Operation
from shared.ledger.ids import submission_id
from shared.signatures import sign_github
from tests.integration.test_github_app_pipeline import CLIENT_ID, INSTALLATION, PEM, PUBLIC
from tests.plugins.pipeline import FILES, OWNER_REPO, SHA, PipelineStack, pipeline_stack
from tests.plugins.pipeline import push_payload as plain_push
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

PUSH_TAG = review_tag(OWNER_REPO, SHA)
FIXTURES_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "github"


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[PipelineStack]:
    env = {"GITHUB_APP_ID": CLIENT_ID, "GITHUB_APP_PRIVATE_KEY": PEM}
    with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast, env) as started:
        yield started


@pytest.fixture
def fresh(stack: PipelineStack, firestore_client) -> PipelineStack:
    stack.install_app(CLIENT_ID, PUBLIC, INSTALLATION)
    return stack


@pytest.fixture
def ledger(firestore_client) -> Ledger:
    return Ledger(firestore_client, grace=timedelta(0))


def app_push() -> bytes:
    payload = json.loads(plain_push(files=list(FILES)))
    payload["installation"] = {"id": INSTALLATION}
    return json.dumps(payload).encode()


def runs(sim: Any) -> list[dict[str, Any]]:
    return [r for r in sim.check_runs(repo=OWNER_REPO, sha=SHA) if r["name"] == CHECK_NAME]


def operations(ledger: Ledger) -> list[Operation]:
    return ledger.queries.list_operations(limit=20)


def new_operation(ledger: Ledger, known: set[str]) -> Operation:
    def one() -> Operation | None:
        found = [op for op in operations(ledger) if op.name not in known]
        return found[0] if len(found) == 1 else None

    return wait_until(one, 90, "one new review batch to be registered", every=0.1)


def finished(ledger: Ledger, name: str) -> bool:
    record = ledger.operations.get(name)
    return record is not None and not record.pending and record.writeback_done


def settle(stack: PipelineStack, ledger: Ledger, op: Operation) -> None:
    # Its check run item delivered first: the completion then follows the in_progress.
    wait_until(lambda: not any(i.open for i in ledger.operations.get(op.name).outbox), 60, "start")
    stack.sim.complete(op.name, state="succeeded", webhook="send")
    wait_until(lambda: finished(ledger, op.name), 60, f"{op.name} settled, its check run done")


def completed_by(stack: PipelineStack, run_id: int, writes: int) -> dict[str, Any]:
    """The run once it has at least `writes` writes and shows `completed` again."""

    def done() -> dict[str, Any] | None:
        [run] = runs(stack.sim)
        ok = run["id"] == run_id and len(run["writes"]) >= writes and run["status"] == "completed"
        return run if ok else None

    return wait_until(done, 60, "the check run completed again", every=0.1)


def rerun(stack: PipelineStack, run_id: int, sender: str = "octocat") -> dict[str, Any]:
    """Press "Re-run" on the run: the simulator sends the signed webhook to our ingress."""
    delivery = stack.sim.rerequest_check_run(
        run_id, url=f"{stack.ingress_url}/github", installation_id=INSTALLATION, sender=sender
    )
    assert delivery["status"] == 202, delivery
    return delivery


def reviewed_once(stack: PipelineStack, ledger: Ledger) -> tuple[Operation, dict[str, Any]]:
    assert stack.push(app_push()).status_code == 202
    first = new_operation(ledger, set())
    settle(stack, ledger, first)
    [run] = runs(stack.sim)
    assert run["status"] == "completed"
    return first, run


def test_rerun_makes_a_second_review_that_supersedes_the_first_on_the_same_run(fresh, ledger):
    first, run = reviewed_once(fresh, ledger)
    before = len(run["writes"])

    rerun(fresh, run["id"])
    second = new_operation(ledger, {first.name})
    assert second.context["check_submission"] == PUSH_TAG
    assert second.context["rerun_of"] == first.name
    assert sorted(second.context["paths"]) == sorted(first.context["paths"])
    wait_until(
        lambda: runs(fresh.sim)[0]["status"] == "in_progress", 60, "the run reset", every=0.1
    )
    settle(fresh, ledger, second)

    final = completed_by(fresh, run["id"], before + 2)
    [only] = runs(fresh.sim)
    assert only["id"] == run["id"]  # the SAME run, never a second one
    assert only["external_id"] == submission_id(PUSH_TAG)
    later = [(w["method"], w["status"]) for w in final["writes"][before:]]
    assert later[0] == ("PATCH", "in_progress") and later[-1] == ("PATCH", "completed")
    assert final["details_url"].endswith(second.name)
    assert ledger.submissions.get(PUSH_TAG).current_operation == second.name
    history = ledger.operations.get(first.name)
    assert history.status == "succeeded"  # settled before the re-run: stays, in history
    assert ledger.submissions.get(PUSH_TAG).generation == 1


def test_a_rerun_of_a_rerun_supersedes_a_pending_one(fresh, ledger):
    first, run = reviewed_once(fresh, ledger)
    rerun(fresh, run["id"])
    second = new_operation(ledger, {first.name})
    wait_until(
        lambda: not any(i.open for i in ledger.operations.get(second.name).outbox), 60, "reset"
    )

    rerun(fresh, run["id"])  # pressed again while the second review runs
    third = new_operation(ledger, {first.name, second.name})
    superseded = ledger.operations.get(second.name)
    assert (superseded.status, superseded.superseded_by) == ("superseded", third.name)
    wait_until(
        lambda: not any(i.open for i in ledger.operations.get(second.name).outbox),
        60,
        "the superseded batch cancelled",
    )
    settle(fresh, ledger, third)

    [only] = runs(fresh.sim)
    assert (only["id"], only["status"]) == (run["id"], "completed")
    assert only["details_url"].endswith(third.name)
    stored = ledger.submissions.get(PUSH_TAG)
    assert (stored.current_operation, stored.generation) == (third.name, 2)


def test_one_rerequested_delivery_makes_one_batch_however_often_it_arrives(fresh, ledger):
    first, run = reviewed_once(fresh, ledger)
    payload = {
        "action": "rerequested",
        "check_run": {
            "id": run["id"],
            "name": CHECK_NAME,
            "head_sha": SHA,
            "external_id": submission_id(PUSH_TAG),
        },
        "repository": {"full_name": OWNER_REPO},
        "installation": {"id": INSTALLATION},
    }

    def send(sender: str) -> int:
        body = json.dumps({**payload, "sender": {"login": sender}}).encode()
        headers = {
            "X-GitHub-Event": "check_run",
            "X-GitHub-Delivery": "rerun-once-1",
            "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
            "Content-Type": "application/json",
        }
        url = f"{fresh.ingress_url}/github"
        return requests.post(url, data=body, headers=headers, timeout=10).status_code

    # GitHub's redelivery (same id, same body: the ingress's duplicate), then the same id
    # with another body (a new task: the worker's exactly-once decides).
    assert [send("octocat"), send("octocat"), send("hubot")] == [202, 200, 202]

    def both_done() -> bool:
        found = [
            d
            for d in ledger.deliveries.listing(source="github", limit=20)
            if d.delivery_id == "rerun-once-1"
        ]
        return bool(found) and all(d.status == "done" for d in found)

    wait_until(both_done, 90, "the re-run delivery done", every=0.1)
    second = new_operation(ledger, {first.name})
    assert [op.name for op in operations(ledger)].count(second.name) == 1
    assert len(operations(ledger)) == 2
    settle(fresh, ledger, second)
    assert len(runs(fresh.sim)) == 1


def test_a_rerequested_run_of_another_name_starts_nothing(fresh, ledger):
    first, _ = reviewed_once(fresh, ledger)
    body = json.dumps(
        {
            "action": "rerequested",
            "check_run": {"id": 1, "name": "someone else's check", "head_sha": SHA},
            "repository": {"full_name": OWNER_REPO},
            "installation": {"id": INSTALLATION},
        }
    ).encode()
    headers = {
        "X-GitHub-Event": "check_run",
        "X-GitHub-Delivery": "rerun-other-name",
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
    }
    answer = requests.post(f"{fresh.ingress_url}/github", data=body, headers=headers, timeout=10)
    assert (answer.status_code, answer.json()["status"]) == (200, "ignored")
    assert [op.name for op in operations(ledger)] == [first.name]
    assert runs(fresh.sim)[0]["status"] == "completed"


MANY = "docs/many.md"  # the simulated Gemini finds 120 problems in it
MANY_BODY = b"# Many\n\n<!-- sim:findings=120 level=warning -->\n" + b"A line.\n" * 130


def test_a_rerun_counts_only_its_own_annotations_on_the_run(fresh, ledger):
    fresh.put_files(files={MANY: MANY_BODY})
    payload = json.loads(plain_push(files=[MANY]))
    payload["installation"] = {"id": INSTALLATION}
    assert fresh.push(json.dumps(payload).encode()).status_code == 202
    first = new_operation(ledger, set())
    settle(fresh, ledger, first)
    [run] = runs(fresh.sim)
    assert run["output"]["annotations_count"] == 120
    before = len(run["writes"])

    rerun(fresh, run["id"])
    second = new_operation(ledger, {first.name})
    settle(fresh, ledger, second)

    final = completed_by(fresh, run["id"], before + 4)
    # GitHub keeps the old 120; the re-run appended its own 120 as 50 + 50 + 20, once.
    assert final["output"]["annotations_count"] == 240
    assert [(w["annotations"], w["status"]) for w in final["writes"][before:]] == [
        (0, "in_progress"),
        (50, "in_progress"),
        (50, "in_progress"),
        (20, "completed"),
    ]


def signed(stack: PipelineStack, event: str, body: bytes, delivery: str) -> requests.Response:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(LOCAL_GITHUB_SECRET, body),
        "Content-Type": "application/json",
    }
    return requests.post(f"{stack.ingress_url}/github", data=body, headers=headers, timeout=10)


def delivery_status(ledger: Ledger, delivery: str) -> str | None:
    found = [
        d for d in ledger.deliveries.listing(source="github", limit=20) if d.delivery_id == delivery
    ]
    return found[0].status if found and found[0].status != "queued" else None


def test_rerun_all_checks_on_the_suite_reruns_our_review(fresh, ledger):
    first, run = reviewed_once(fresh, ledger)
    suite = json.loads((FIXTURES_DIR / "check_suite-rerequested.payload.json").read_bytes())
    suite["check_suite"]["head_sha"] = SHA
    suite["repository"]["full_name"] = OWNER_REPO
    suite["installation"]["id"] = INSTALLATION
    assert signed(fresh, "check_suite", json.dumps(suite).encode(), "suite-1").status_code == 202

    second = new_operation(ledger, {first.name})
    settle(fresh, ledger, second)
    [only] = runs(fresh.sim)
    assert (only["id"], only["status"]) == (run["id"], "completed")
    assert only["details_url"].endswith(second.name)


def test_a_rerun_from_a_suspended_installation_is_ignored(fresh, ledger):
    first, run = reviewed_once(fresh, ledger)
    suspend = json.loads((FIXTURES_DIR / "installation-suspend.payload.json").read_bytes())
    suspend["installation"]["id"] = INSTALLATION
    assert signed(fresh, "installation", json.dumps(suspend).encode(), "susp-1").status_code == 202
    wait_until(lambda: delivery_status(ledger, "susp-1"), 60, "the suspension recorded")

    delivery = rerun(fresh, run["id"])
    status = wait_until(
        lambda: delivery_status(ledger, delivery["delivery_id"]), 60, "the re-run decided"
    )
    assert status == "ignored"
    assert [op.name for op in operations(ledger)] == [first.name]
    assert runs(fresh.sim)[0]["status"] == "completed"


def test_two_reruns_pressed_at_once_leave_one_current_and_the_other_superseded(fresh, ledger):
    first, run = reviewed_once(fresh, ledger)
    answers: list[dict[str, Any]] = []
    # Two people: two bodies (byte-identical presses are one delivery to the ingress).
    pressers = [
        threading.Thread(target=lambda s=s: answers.append(rerun(fresh, run["id"], s)))
        for s in ("alice", "bob")
    ]
    for presser in pressers:
        presser.start()
    for presser in pressers:
        presser.join()
    assert len(answers) == 2

    def two_new() -> list[Operation] | None:
        found = [op for op in operations(ledger) if op.name != first.name]
        return found if len(found) == 2 else None

    wait_until(two_new, 120, "a batch for each of the two re-runs", every=0.1)

    def decided() -> tuple[str, Operation] | None:
        # Ordered by press: the later press is current, whichever registered first (the
        # earlier one, registered second, is superseded without becoming current).
        stored = ledger.submissions.get(PUSH_TAG)
        if stored is None or stored.generation not in (1, 2):
            return None
        loser = [
            op
            for op in two_new() or []
            if op.name != stored.current_operation and op.status == "superseded"
        ]
        return (stored.current_operation, loser[0]) if loser else None

    current, loser = wait_until(decided, 60, "both re-runs registered")
    assert (loser.status, loser.superseded_by) == ("superseded", current)
    settle(fresh, ledger, ledger.operations.get(current))
    [only] = runs(fresh.sim)
    assert (only["id"], only["status"]) == (run["id"], "completed")
    assert only["details_url"].endswith(current)


def test_an_orphan_rerun_batch_adopted_by_reconcile_takes_over_the_run(fresh, ledger):
    from apps.review.reruns import rerun_tag
    from shared.gemini import GeminiGateway, make_client
    from shared.reconcile.adoption import register_orphan

    first, run = reviewed_once(fresh, ledger)
    # A re-run's worker claimed and created, then died before registering (its lease over).
    tag = rerun_tag(OWNER_REPO, SHA, "orphan-delivery")
    now = datetime.now(UTC)
    context = {
        **{k: first.context[k] for k in ("repo", "sha", "paths", "installation_id")},
        "check_submission": PUSH_TAG,
        "annotations_before": 0,
    }
    ledger.submissions.claim(
        tag, delivery_id="orphan-delivery", attempt="a-1", lease_until=now, now=now, context=context
    )
    gateway = GeminiGateway(make_client("sim-key", fresh.sim.url, timeout_s=5))
    name = gateway.create_batch("models/m", [(p, "review") for p in context["paths"]], tag)
    [orphan] = [b for b in gateway.list_batches() if b.display_name == tag]

    adopted = register_orphan(ledger, gateway, orphan)
    assert adopted is not None and adopted.name == name
    stored = ledger.submissions.get(PUSH_TAG)
    assert (stored.current_operation, stored.generation) == (name, 1)

    fresh.sim.complete(name, state="succeeded", webhook="send")
    wait_until(lambda: finished(ledger, name), 60, "the adopted re-run settled")

    def shown() -> dict[str, Any] | None:
        [found] = runs(fresh.sim)
        return found if found["details_url"].endswith(name) else None

    final = wait_until(shown, 60, "the run completed by the adopted re-run")
    assert (final["id"], final["status"]) == (run["id"], "completed")
