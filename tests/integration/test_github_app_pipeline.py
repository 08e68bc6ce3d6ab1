"""The whole pipeline running as a GitHub App: a push carrying `installation.id` is
fetched and commented on with that installation's token, through the real ingress and
worker processes and the simulator as the App's GitHub. The token expires between the
fetch and the comment; the comment still lands exactly once, and neither the App's
private key nor any installation token reaches the worker's logs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from shared.ledger import Ledger, Operation
from tests.plugins.pipeline import (
    FILES,
    OWNER_REPO,
    SHA,
    PipelineStack,
    pipeline_stack,
    push_payload,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

CLIENT_ID = "Iv23liPIPELINE01"
INSTALLATION = 70001
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
PEM = KEY.private_bytes(
    serialization.Encoding.PEM,
    serialization.PrivateFormat.TraditionalOpenSSL,
    serialization.NoEncryption(),
).decode()
PUBLIC = (
    KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)


@pytest.fixture(scope="module")
def stack(firestore_emulator, cloudtasks_emulator_fast) -> Iterator[PipelineStack]:
    env = {"GITHUB_COMMENTS": "true", "GITHUB_APP_ID": CLIENT_ID, "GITHUB_APP_PRIVATE_KEY": PEM}
    with pipeline_stack(firestore_emulator, cloudtasks_emulator_fast, env) as started:
        yield started


@pytest.fixture
def fresh(stack: PipelineStack, firestore_client) -> PipelineStack:
    """The App registered with the worker's key and installed on the pushed repository."""
    stack.install_app(CLIENT_ID, PUBLIC, INSTALLATION)
    return stack


def app_push(delivery: str) -> bytes:
    payload = json.loads(push_payload())
    payload["installation"] = {
        "id": INSTALLATION,
        "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u",
    }
    payload["pusher"]["name"] = delivery  # a distinct body per delivery
    return json.dumps(payload).encode()


def registered(ledger: Ledger) -> Operation:
    def one() -> Operation | None:
        found = ledger.queries.list_operations(limit=2)
        return found[0] if len(found) == 1 else None

    return wait_until(one, 90, "the review batch to be registered", every=0.1)


def commit_comments(stack: PipelineStack) -> dict[str, Any]:
    seen = stack.sim.github_comments()
    [commit] = [c for c in seen["commits"] if (c["repo"], c["sha"]) == (OWNER_REPO, SHA)]
    return commit


def test_a_push_through_the_app_is_fetched_and_commented_once_across_a_token_expiry(
    fresh, firestore_client
):
    ledger = Ledger(firestore_client, grace=timedelta(0))
    assert fresh.push(app_push("app-push-1"), delivery="app-push-1").status_code == 202
    op = registered(ledger)
    assert op.context["installation_id"] == INSTALLATION
    assert sorted(op.context["paths"]) == sorted(FILES)  # fetched with the installation token
    minted_for_fetch = fresh.sim.github_apps()["tokens_issued"]

    expired = fresh.sim.github_tokens(expire=True)["expired"]  # mid-run: before the comment
    fresh.sim.complete(op.name, state="succeeded", webhook="send")
    wait_until(
        lambda: (r := ledger.operations.get(op.name)) is not None and r.writeback_done,
        60,
        "the settlement and its comment",
        every=0.1,
    )

    seen = commit_comments(fresh)
    assert (seen["posts"], seen["comments"], seen["deletes"]) == (1, 1, 0), seen
    assert (minted_for_fetch, expired) == (1, 1)
    assert fresh.sim.github_apps()["tokens_issued"] == 2  # renewed once, after the 401

    logs = fresh.worker.output() + "".join(fresh.ingress.lines)
    assert "review comment published" in logs  # the worker did log its work
    for secret in ("ghs_", "PRIVATE KEY", PEM.splitlines()[5], PEM.splitlines()[-2]):
        assert secret not in logs, secret


def test_a_push_the_installation_does_not_cover_is_refused_not_fetched_with_another_token(
    fresh, firestore_client
):
    fresh.sim.change_installation(INSTALLATION, repositories=["octo-org/elsewhere"])
    ledger = Ledger(firestore_client, grace=timedelta(0))
    assert fresh.push(app_push("app-push-2"), delivery="app-push-2").status_code == 202

    def dead() -> Any:
        found = ledger.deliveries.listing(source="github", limit=5)
        return found[0] if found and found[0].status == "dead" else None

    delivery = wait_until(dead, 60, "the push to be refused", every=0.1)
    assert "FORBIDDEN: Resource not accessible by integration" in (delivery.last_error or "")
    assert ledger.queries.list_operations(limit=1) == []
