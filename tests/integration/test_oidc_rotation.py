"""Issue 12's acceptance: the emulator restarted with a new signing key, the worker heals.

A real worker (functions-framework, OIDC on, certs from the emulator's JWKS) accepts a task
from the emulator, so it has cached the emulator's key. The emulator restarts on the same
ports and signs with a new key; the worker must accept the very next attempt (it used to
refuse every token for the 300 s of its key cache). Two ways:

- without a data dir the emulator keeps no task, so one is enqueued right after the restart;
- with a data dir and `--rotate-signing-key`, tasks queued (queue paused) before a SIGKILL
  are dispatched after the restart, each signed with the new key, the old one unpublished:

      worker caches kid A ─▶ pause, queue N ─▶ SIGKILL ─▶ restart, JWKS {B} ─▶ resume
      ─▶ attempt 1 names B ─▶ worker refetches the JWKS ─▶ 200 for every task
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from local.cloudtasks_emulator.emulator import Emulator
from local.functions_server import start_function
from local.processes import Service, start_on_free_ports
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_TASKS_SERVICE_ACCOUNT
from shared.handoff.envelope import Envelope, EnvelopeSealer
from shared.handoff.tasks import TaskQueue, make_client
from shared.ledger import Ledger
from tests.integration.cloudtasks_calls import new_queue
from tests.integration.restartable_emulator import Blip, start_blip
from tests.plugins.cloudtasks import EmulatorHandle, restart_emulator
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
    with running_worker(emulator.host, emulator.jwks_url, firestore_emulator) as url:
        yield url


@contextmanager
def running_worker(tasks_host: str, jwks_url: str, firestore_emulator: str) -> Iterator[str]:
    """The real worker on a free port, verifying tokens against `jwks_url`; yields its URL."""

    def start_worker(port: int) -> Service:
        url = f"http://127.0.0.1:{port}/"
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "FIRESTORE_EMULATOR_HOST": firestore_emulator,
            "CLOUD_TASKS_EMULATOR_HOST": tasks_host,
            "TASKS_SERVICE_ACCOUNT": LOCAL_TASKS_SERVICE_ACCOUNT,
            "OIDC_AUDIENCE": url,
            "OIDC_CERTS_URL": jwks_url,
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
    _enqueue_on(emulator.host, emulator.queue_path, worker_url, delivery_id)


def _enqueue_on(host: str, queue_path: str, worker_url: str, delivery_id: str) -> None:
    """A sealed delivery of an event no handler takes (so the worker records it `ignored`)."""
    envelope = Envelope("github", "star", delivery_id, datetime.now(UTC), {}, b'{"ok": true}')
    TaskQueue(make_client(host), queue_path).enqueue(
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
    delivery = ledger.deliveries.get("github", after)
    assert delivery is not None and delivery.status == "ignored"


def _jwks_kid(emulator: Blip | EmulatorHandle) -> str:
    (kid,) = _jwks_kids(emulator.jwks_url)
    return kid


def _jwks_kids(jwks_url: str) -> list[str]:
    """Every kid published at `jwks_url` (fetched with urllib, unlike the worker)."""
    with urllib.request.urlopen(jwks_url, timeout=5) as response:
        return [str(key["kid"]) for key in json.loads(response.read())["keys"]]


def _attempts(output: str, task_id: str) -> list[tuple[str, str]]:
    """(attempt number, answer) of each dispatch of `task_id` in one emulator's output."""
    pattern = re.compile(rf"task={re.escape(task_id)} attempt=(\d+) POST \S+ -> (\S+)")
    return pattern.findall(output)


def _attempts_of(emulator: EmulatorHandle, task_id: str) -> list[tuple[str, str]]:
    return _attempts(emulator.output(), task_id)


def _worker_fetched(output: str, kid: str) -> bool:
    """The worker (requests' user agent; this test fetches with urllib) got the JWKS of `kid`."""
    return f"keys GET /jwks.json kid={kid} agent=python-requests/" in output


@pytest.mark.slow
def test_tasks_queued_before_a_restart_with_a_rotated_key_are_accepted_on_their_next_attempt(
    cloudtasks_emulator_factory: Callable[..., EmulatorHandle],
    firestore_emulator: str,
    tmp_path: Path,
) -> None:
    from google.cloud import firestore

    ledger = Ledger(firestore.Client(project=PROJECT))
    first = cloudtasks_emulator_factory(data_dir=tmp_path / "cloudtasks")
    old_kid = _jwks_kid(first)
    client = make_client(first.host)
    queue = new_queue(client)
    with running_worker(first.host, first.jwks_url, firestore_emulator) as worker:
        warm = f"warm-{uuid.uuid4().hex[:8]}"
        _enqueue_on(first.host, queue, worker, warm)
        wait_until(lambda: _attempts(first.output(), warm), timeout=30, what="the warm-up")
        assert _attempts(first.output(), warm)[0] == ("1", "200"), first.output()
        assert _worker_fetched(first.output(), old_kid), "the worker caches the old key"

        client.pause_queue(name=queue, timeout=5)
        queued = [f"queued-{i}-{uuid.uuid4().hex[:8]}" for i in range(3)]
        for delivery_id in queued:
            _enqueue_on(first.host, queue, worker, delivery_id)
        listed = {task.name.rsplit("/", 1)[-1] for task in client.list_tasks(parent=queue)}
        assert listed == set(queued)
        client.transport.close()

        first.kill()
        restarted = restart_emulator(first, rotate_signing_key=True)
        try:
            new_kids = _jwks_kids(restarted.jwks_url)
            assert len(new_kids) == 1 and new_kids[0] != old_kid, "only a new key is published"
            assert not any(_attempts(restarted.output(), d) for d in queued), "queue is paused"
            client = make_client(restarted.host)
            client.resume_queue(name=queue, timeout=5)
            client.transport.close()

            for delivery_id in queued:
                first_attempt = wait_until(
                    partial(_attempts_of, restarted, delivery_id),
                    timeout=30,
                    what=f"the first attempt at {delivery_id} after the restart",
                )[0]
                assert first_attempt == ("1", "200"), restarted.output()
                delivery = ledger.deliveries.get("github", delivery_id)
                assert delivery is not None and delivery.status == "ignored"
            assert _worker_fetched(restarted.output(), new_kids[0]), restarted.output()
        finally:
            restarted.service.stop()


def test_a_rotated_key_replaces_the_stored_one_and_is_kept_by_the_next_start(
    tmp_path: Path,
) -> None:
    def kid_of(rotate: bool) -> str:
        emulator = Emulator("127.0.0.1", 0, 0, data_dir=tmp_path, rotate_signing_key=rotate)
        emulator.start()
        try:
            (kid,) = _jwks_kids(emulator.jwks_url)
            assert kid == emulator.minter.kid
            return kid
        finally:
            emulator.stop()

    original = kid_of(rotate=False)
    assert kid_of(rotate=False) == original, "a data dir keeps its key"
    rotated = kid_of(rotate=True)
    assert rotated != original
    assert kid_of(rotate=False) == rotated, "the rotated key is the one stored"
