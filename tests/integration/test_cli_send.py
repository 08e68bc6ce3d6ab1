"""`hookledger send github push <GitHub's example>` reaches an app's handler through the real
ingress, Cloud Tasks emulator and worker, byte for byte; a wrong secret is refused (401,
exit 1). The refusals that send nothing: tests/unit/test_cli_send.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from hookledger.cli import main
from hookledger.testing import github_example_path
from local.processes import ServiceError
from shared.documents import doc_id
from tests.plugins.pipeline import PipelineStack, pipeline_stack
from tests.waiting import wait_until

pytestmark = pytest.mark.slow  # three processes started for the module

PROBE = "tests.integration.send_probe_app"
PUSH = github_example_path("push")  # GitHub's published example: deletes a tag


@pytest.fixture(scope="module")
def stack(firestore_emulator: str, cloudtasks_emulator_fast: Any) -> Iterator[PipelineStack]:
    try:
        with pipeline_stack(
            firestore_emulator, cloudtasks_emulator_fast, {"HOOKLEDGER_APPS": PROBE}
        ) as running:
            yield running
    except ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)


def send(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(["send", *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def test_githubs_example_push_reaches_the_apps_handler_byte_for_byte(
    stack: PipelineStack, firestore_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ["GOOGLE_CLOUD_PROJECT"] = "demo-hookledger"
    code, sent, err = send(capsys, "github", "push", str(PUSH), "--ingress", stack.ingress_url)
    assert (code, err) == (0, "")
    assert sent["status"] == 202 and sent["delivery_id"]

    delivery = firestore_client.collection("deliveries").document(f"github:{sent['delivery_id']}")
    record = wait_until(
        lambda: (
            (delivery.get().to_dict() or {}).get("status") in ("done", "dead")
            and delivery.get().to_dict()
        ),
        30,
        "the worker to finish the delivery",
        every=0.1,
    )
    assert record["status"] == "done", record
    seen = firestore_client.collection("sent_pushes").document(doc_id(sent["delivery_id"])).get()
    payload = json.loads(PUSH.read_bytes())
    assert seen.to_dict() == {
        "sha256": hashlib.sha256(PUSH.read_bytes()).hexdigest(),
        "ref": payload["ref"],
        "deleted": payload["deleted"],
    }


def test_a_wrong_secret_is_refused_by_the_ingress_and_exits_1(
    stack: PipelineStack, capsys: pytest.CaptureFixture[str]
) -> None:
    os.environ["GOOGLE_CLOUD_PROJECT"] = "demo-hookledger"
    os.environ["GITHUB_WEBHOOK_SECRETS"] = "not-the-ingress-secret"
    code, sent, err = send(capsys, "github", "push", str(PUSH), "--ingress", stack.ingress_url)
    assert code == 1 and sent["status"] == 401
    assert err == f"hookledger: error: the ingress at {stack.ingress_url}/github answered 401\n"
