"""Issue 12's acceptance: the emulator restarted with a new signing key, the worker heals.

A real worker (functions-framework, OIDC on, certs from the emulator's JWKS) accepts a task
from the emulator, so it has cached the emulator's key. The emulator restarts on the same
ports and so signs with a new key. Without persistence the emulator cannot keep a task
over its restart, so the task is enqueued right after it; the worker must accept that
task's very first attempt (it used to refuse every token for the 300 s of its key cache).
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from local.functions_server import start_function
from local.processes import Service, start_on_free_ports
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_TASKS_SERVICE_ACCOUNT
from shared.envelope import Envelope, EnvelopeSealer
from shared.ledger import Ledger
from shared.tasks import TaskQueue, make_client
from tests.integration.restartable_emulator import Blip, start_blip
from tests.waiting import wait_until

PROJECT = "demo-hookledger"


@pytest.fixture
def emulator() -> Iterator[Blip]:
    handle = start_blip(f"projects/{PROJECT}/locations/us-central1/queues/k-{uuid.uuid4().hex[:8]}")
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def worker_url(emulator: Blip, firestore_emulator: str) -> Iterator[str]:
    def start_worker(port: int) -> Service:
        url = f"http://127.0.0.1:{port}/"
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "FIRESTORE_EMULATOR_HOST": firestore_emulator,
            "CLOUD_TASKS_EMULATOR_HOST": emulator.host,
            "TASKS_SERVICE_ACCOUNT": LOCAL_TASKS_SERVICE_ACCOUNT,
            "OIDC_AUDIENCE": url,
            "OIDC_CERTS_URL": emulator.jwks_url,
            "WORKER_URL": url,
            "GEMINI_API_KEY": "unused",
        }
        return start_function("worker", port, env)

    service, (port,) = start_on_free_ports(start_worker)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        service.stop()


def _enqueue(emulator: Blip, worker_url: str, delivery_id: str) -> None:
    """A sealed delivery of an event no handler takes (so the worker records it `ignored`)."""
    envelope = Envelope("github", "star", delivery_id, datetime.now(UTC), {}, b'{"ok": true}')
    TaskQueue(make_client(emulator.host), emulator.queue_path).enqueue(
        worker_url,
        EnvelopeSealer([LOCAL_ENVELOPE_KEY]).seal(envelope),
        task_id=delivery_id,
        oidc_service_account=LOCAL_TASKS_SERVICE_ACCOUNT,
        oidc_audience=worker_url,
    )


def _answers(emulator: Blip, task_id: str) -> list[str]:
    """What the worker answered each attempt at `task_id`, from the emulator's dispatch log."""
    pattern = re.compile(rf"task={re.escape(task_id)} attempt=\d+ POST \S+ -> (\S+)")
    return pattern.findall(emulator.output())


@pytest.mark.slow
def test_after_an_emulator_restart_with_a_new_key_the_worker_accepts_the_first_attempt(
    emulator: Blip, worker_url: str, firestore_emulator: str
) -> None:
    from google.cloud import firestore

    # Unique delivery ids: no need to empty the database (firestore_client) first.
    ledger = Ledger(firestore.Client(project=PROJECT))
    before, after = f"before-{uuid.uuid4().hex[:8]}", f"after-{uuid.uuid4().hex[:8]}"
    old_key = wait_until(lambda: _jwks_kid(emulator), what="the emulator's JWKS")
    _enqueue(emulator, worker_url, before)
    wait_until(lambda: _answers(emulator, before), timeout=30, what="the first delivery")
    assert _answers(emulator, before)[0] == "200", emulator.output()

    emulator.restart()
    assert _jwks_kid(emulator) != old_key, "a restarted emulator signs with a new key"
    _enqueue(emulator, worker_url, after)

    wait_until(lambda: _answers(emulator, after), timeout=30, what="the delivery after restart")
    assert _answers(emulator, after)[0] == "200", emulator.output()
    delivery = ledger.get_delivery("github", after)
    assert delivery is not None and delivery.status == "ignored"


def _jwks_kid(emulator: Blip) -> str:
    with urllib.request.urlopen(emulator.jwks_url, timeout=5) as response:
        return str(json.loads(response.read())["keys"][0]["kid"])
