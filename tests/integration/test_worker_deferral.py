"""A handler's `Deferred`: "not yet, and not a failure" (docs/architecture.md, "Worker").

The worker hands the same sealed envelope back to the queue as a NEW task `after_s` later
and answers 202, so the waiting spends none of the delivery's retries. These tests run the
worker in this process behind a loopback URL, fed by the Cloud Tasks emulator on its
manual clock: a deferred task becomes due only when the test advances that clock, and the
worker reads the same clock, so nothing here waits on wall time.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud.tasks_v2 import CloudTasksClient, types
from requests.structures import CaseInsensitiveDict

from local.fakes import FakeClock
from local.loopback import QuietHandler
from shared import handlers
from shared.clock import Clock
from shared.config import LOCAL_ENVELOPE_KEY, LOCAL_TASKS_SERVICE_ACCOUNT, Config
from shared.entrypoints.http import Reply
from shared.entrypoints.worker import DEFER_MAX_S, DEFER_MIN_S, DEFERRALS_HEADER, Worker
from shared.errors import Deferred as TreeDeferred
from shared.errors import HookledgerError, PermanentError, TransientError, retryable
from shared.handlers import Deferred, Done, handler
from shared.handoff.envelope import DEFAULT_MAX_AGE_S, Envelope, EnvelopeSealer
from shared.handoff.tasks import TaskQueue, ensure_queue, make_client
from shared.ledger import Ledger
from shared.signatures.oidc import OidcVerifier
from tests.integration.cloudtasks_calls import LOCATION, answered_or_gone, new_queue
from tests.plugins.cloudtasks import EmulatorHandle
from tests.plugins.loopback import Serve
from tests.waiting import wait_until

WAITING = "the previous run's check run is still being written"
# The worker's schedule time is its clock plus `after_s`, rounded to microseconds on the way
# to the queue: advancing just past it makes the deferred task due, whatever the rounding.
JUST_PAST = 0.001


@dataclass(frozen=True)
class Call:
    """One request the emulator made to the worker, and the worker's answer."""

    headers: CaseInsensitiveDict[str]
    reply: Reply

    @property
    def status(self) -> str:
        return str(self.reply.body.get("status"))

    @property
    def retry_count(self) -> str:
        return self.headers["X-CloudTasks-TaskRetryCount"]

    @property
    def task(self) -> str:
        return self.headers["X-CloudTasks-TaskName"]

    @property
    def eta(self) -> float:
        return float(self.headers["X-CloudTasks-TaskETA"])


class Served:
    """A `Worker` in this process at `url`, recording every call; `worker` is set later
    (its config names its own URL, known only once the server listens)."""

    def __init__(self, serve: Serve) -> None:
        self.worker: Worker | None = None
        self.calls: list[Call] = []
        self._cond = threading.Condition()
        served = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = CaseInsensitiveDict(dict(self.headers.items()))
                assert served.worker is not None
                reply = served.worker.handle("POST", self.path, headers, body)
                with served._cond:  # recorded before the answer: any deferred task exists now
                    served.calls.append(Call(headers, reply))
                    served._cond.notify_all()
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.url = f"{serve(Handler).url}/"

    def wait_for(self, count: int) -> Call:
        """The `count`-th call, once the worker has decided it; fails the test if it never comes."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.calls) >= count, timeout=15):
                statuses = [c.status for c in self.calls]
                pytest.fail(f"the worker got {statuses}, not {count} calls", pytrace=False)
            return self.calls[count - 1]


@pytest.fixture
def registry() -> Iterator[None]:
    saved = handlers.snapshot()
    yield
    handlers.restore(saved)


@pytest.fixture
def tasks_client(cloudtasks_emulator_manual: EmulatorHandle) -> Iterator[CloudTasksClient]:
    client = make_client(cloudtasks_emulator_manual.host)
    yield client
    client.transport.close()


@pytest.fixture
def queues(tasks_client: CloudTasksClient) -> Iterator[list[str]]:
    """Queues this test made; deleted at its end, so no task of theirs outlives the test
    (another test advancing the shared manual clock would make it due)."""
    made: list[str] = []
    yield made
    for name in made:
        tasks_client.delete_queue(name=name, timeout=5)


def emulator_clock(emulator: EmulatorHandle) -> Clock:
    """The emulator's manual clock as the worker's: a deferral is due when the test says."""
    return lambda: datetime.fromtimestamp(emulator.now(), UTC)


@dataclass
class Stack:
    served: Served
    queue: str
    tasks: TaskQueue
    ledger: Ledger
    sealer: EnvelopeSealer
    client: CloudTasksClient

    def answered(self, count: int) -> Call:
        """The `count`-th call, once the emulator has taken its answer (a retry it
        schedules is then at its place on the clock the test advances next)."""
        call = self.served.wait_for(count)
        queue = f"{LOCATION}/queues/{call.headers['X-CloudTasks-QueueName']}"
        task = f"{queue}/tasks/{call.task}"
        wait_until(answered_or_gone(self.client, task, int(call.retry_count) + 1), what=task)
        return call

    def hand_off(self, event: str, delivery_id: str) -> None:
        """Create the delivery's first task, as the ingress does."""
        envelope = Envelope("github", event, delivery_id, datetime.now(UTC), {}, b'{"ok": true}')
        self.tasks.enqueue(
            self.served.url,
            self.sealer.seal(envelope),
            {"Content-Type": "application/json"},
            task_id=f"first-{delivery_id}",
            oidc_service_account=LOCAL_TASKS_SERVICE_ACCOUNT,
            oidc_audience=self.served.url,
        )


@pytest.fixture
def stack(
    serve: Serve,
    firestore_client: Any,
    cloudtasks_emulator_manual: EmulatorHandle,
    tasks_client: CloudTasksClient,
    queues: list[str],
    registry: None,
) -> Callable[..., Stack]:
    """`stack(deferral_queue=None)`: a worker that checks the emulator's OIDC token and
    defers into `deferral_queue` (default: the queue feeding it)."""

    def build(deferral_queue: str | None = None) -> Stack:
        served = Served(serve)
        queue = new_queue(tasks_client)
        queues.append(queue)
        feeding = TaskQueue(tasks_client, queue)
        deferring = TaskQueue(tasks_client, deferral_queue or queue)
        config = Config(
            worker_url=served.url,
            worker_max_retries=2,
            tasks_service_account=LOCAL_TASKS_SERVICE_ACCOUNT,
        )
        ledger = Ledger(firestore_client)
        sealer = EnvelopeSealer([LOCAL_ENVELOPE_KEY])
        oidc = OidcVerifier(
            served.url, cloudtasks_emulator_manual.jwks_url, LOCAL_TASKS_SERVICE_ACCOUNT
        )
        served.worker = Worker(
            config,
            sealer=sealer,
            ledger=ledger,
            services={"tasks": deferring}.__getitem__,
            oidc=oidc,
            clock=emulator_clock(cloudtasks_emulator_manual),
        )
        return Stack(served, queue, feeding, ledger, sealer, tasks_client)

    return build


def dead_alerts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    return [f for f in fields if f.get("alert") == "delivery_dead"]


def test_deferred_is_in_the_error_tree_and_re_exported_for_handlers() -> None:
    assert Deferred is TreeDeferred
    assert issubclass(Deferred, HookledgerError)
    assert not issubclass(Deferred, TransientError | PermanentError)
    waiting = Deferred(WAITING, after_s=30)
    assert (str(waiting), waiting.after_s) == (WAITING, 30)
    assert retryable(waiting)  # outside the worker: "later", never "give up"
    with pytest.raises(ValueError, match="after_s"):
        Deferred(WAITING, after_s=float("nan"))


def test_a_handler_deferring_more_often_than_the_retry_limit_ends_done_never_dead(
    stack: Callable[..., Stack],
    cloudtasks_emulator_manual: EmulatorHandle,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hookledger")
    world = stack()
    waits = 4  # more than WORKER_MAX_RETRIES (2): spent as retries, the 3rd would be dead
    calls: list[str] = []

    @handler("github", "issues")
    def rerun(event, ctx):
        calls.append(event.run.id)
        if len(calls) <= waits:
            raise Deferred(WAITING, after_s=30)
        return Done("re-ran")

    world.hand_off("issues", "wait-1")
    for n in range(1, waits + 2):
        call = world.answered(n)
        if call.status in ("done", "dead"):
            break
        if call.status == "deferred":
            assert call.reply.status == 202, call.reply.body
            stored = world.ledger.deliveries.get("github", "wait-1")
            assert stored.status == "queued" and WAITING in (stored.last_error or "")
            assert stored.lease is not None and stored.lease.until <= datetime.now(UTC)
        cloudtasks_emulator_manual.advance(30 + JUST_PAST)  # the deferred task is due now

    seen = world.served.calls
    assert [c.status for c in seen] == ["deferred"] * waits + ["done"]
    assert [c.retry_count for c in seen] == ["0"] * (waits + 1)  # no retry was spent
    assert len({c.task for c in seen}) == waits + 1  # each deferral is a new task
    assert [c.headers.get(DEFERRALS_HEADER) for c in seen] == [None, "1", "2", "3", "4"]
    for before, after in itertools.pairwise(seen):
        assert after.eta == pytest.approx(before.eta + 30, abs=0.01)
    assert world.ledger.deliveries.get("github", "wait-1").status == "done"
    assert dead_alerts(caplog) == []
    fields = [getattr(r, "hookledger_fields", {}) for r in caplog.records]
    deferred_logs = [f for f in fields if "deferrals" in f]
    assert [f["delivery_id"] for f in deferred_logs] == ["wait-1"] * waits
    assert [f["deferrals"] for f in deferred_logs] == [1, 2, 3, 4]


def test_a_failed_re_enqueue_answers_503_and_the_same_task_is_retried_nothing_lost(
    stack: Callable[..., Stack],
    cloudtasks_emulator_manual: EmulatorHandle,
    tasks_client: CloudTasksClient,
    queues: list[str],
) -> None:
    missing = f"{LOCATION}/queues/q-later-{uuid.uuid4().hex[:10]}"
    world = stack(deferral_queue=missing)  # CreateTask fails: NOT_FOUND
    calls: list[str] = []

    @handler("github", "issues")
    def rerun(event, ctx):
        calls.append(event.run.id)
        if len(calls) <= 2:
            raise Deferred(WAITING, after_s=60)
        return Done("re-ran")

    world.hand_off("issues", "wait-2")
    failed = world.answered(1)
    assert (failed.reply.status, failed.status) == (503, "retry"), failed.reply.body
    assert "deferring" in failed.reply.body["reason"]
    stored = world.ledger.deliveries.get("github", "wait-2")
    assert stored.status == "queued" and "deferring" in (stored.last_error or "")

    ensure_queue(tasks_client, missing)  # the queue is back
    queues.append(missing)
    cloudtasks_emulator_manual.advance(5)  # past the 503's backoff: the same task again
    retried = world.answered(2)
    assert (retried.status, retried.retry_count, retried.task) == ("deferred", "1", failed.task)
    cloudtasks_emulator_manual.advance(60 + JUST_PAST)
    done = world.served.wait_for(3)

    assert (done.status, done.retry_count) == ("done", "0")
    assert world.ledger.deliveries.get("github", "wait-2").status == "done"


def test_an_unleased_handler_defers_the_same_way(
    stack: Callable[..., Stack], cloudtasks_emulator_manual: EmulatorHandle
) -> None:
    world = stack()
    calls: list[str] = []

    @handler("github", "issues", leased=False)
    def settle(event, ctx):
        calls.append(event.run.id)
        if len(calls) == 1:
            raise Deferred(WAITING, after_s=10)
        return Done("settled")

    world.hand_off("issues", "wait-3")
    first = world.answered(1)
    assert (first.reply.status, first.status) == (202, "deferred"), first.reply.body
    stored = world.ledger.deliveries.get("github", "wait-3")
    assert stored.status == "queued" and WAITING in (stored.last_error or "")
    cloudtasks_emulator_manual.advance(10 + JUST_PAST)
    second = world.served.wait_for(2)

    assert (second.status, second.retry_count) == ("done", "0")
    assert second.task != first.task
    assert world.ledger.deliveries.get("github", "wait-3").status == "done"


# ------------------------------------------------------------------ direct calls
# The worker called as Cloud Tasks would, its deferred tasks read back from the queue
# (they stay in the future of the frozen clock: nothing dispatches them).


@dataclass
class Direct:
    worker: Worker
    config: Config
    ledger: Ledger
    queue: str
    clock: FakeClock  # the worker's, and its envelopes': the emulator's frozen time


@pytest.fixture
def direct(
    firestore_client: Any,
    tasks_client: CloudTasksClient,
    queues: list[str],
    cloudtasks_emulator_manual: EmulatorHandle,
    registry: None,
) -> Direct:
    queue = new_queue(tasks_client)
    queues.append(queue)
    clock = FakeClock(datetime.fromtimestamp(cloudtasks_emulator_manual.now(), UTC))
    config = Config(
        worker_url="http://127.0.0.1:9/",
        worker_max_retries=2,
        tasks_service_account=LOCAL_TASKS_SERVICE_ACCOUNT,
        task_dispatch_deadline_s=300,
    )
    ledger = Ledger(firestore_client)
    worker = Worker(
        config,
        sealer=EnvelopeSealer([LOCAL_ENVELOPE_KEY], clock=clock),
        ledger=ledger,
        services={"tasks": TaskQueue(tasks_client, queue)}.__getitem__,
        clock=clock,
    )
    return Direct(worker, config, ledger, queue, clock)


def sealed(delivery_id: str, clock: Clock, age_s: float = 0) -> bytes:
    """The delivery's envelope, sealed `age_s` before `clock`'s now."""
    envelope = Envelope("github", "issues", delivery_id, clock(), {}, b"{}")
    sealing = FakeClock(clock() - timedelta(seconds=age_s))
    return EnvelopeSealer([LOCAL_ENVELOPE_KEY], clock=sealing).seal(envelope)


def post(worker: Worker, body: bytes, task: str = "task-1", retry_count: int = 0) -> Reply:
    headers = {"X-CloudTasks-TaskName": task, "X-CloudTasks-TaskRetryCount": str(retry_count)}
    return worker.handle("POST", "/", headers, body)


def listed(client: CloudTasksClient, queue: str) -> list[types.Task]:
    request = types.ListTasksRequest(parent=queue, response_view=types.Task.View.FULL)
    return list(client.list_tasks(request=request, timeout=5))


# (name, the handler's after_s, the delay the task is scheduled with)
CLAMPS = [
    ("below the floor", 0.0, DEFER_MIN_S),
    ("negative", -5.0, DEFER_MIN_S),
    ("as asked", 90.0, 90.0),
    ("above the ceiling", 10.0**6, DEFER_MAX_S),
]


@pytest.mark.parametrize(("name", "after_s", "delay_s"), CLAMPS, ids=[c[0] for c in CLAMPS])
def test_the_delay_is_clamped_to_a_second_and_an_hour(direct, tasks_client, name, after_s, delay_s):
    @handler("github", "issues")
    def waiting(event, ctx):
        raise Deferred(WAITING, after_s=after_s)

    reply = post(direct.worker, sealed(f"clamp-{uuid.uuid4().hex[:8]}", direct.clock))

    assert (reply.status, reply.body["status"], reply.body["after_s"]) == (202, "deferred", delay_s)
    [task] = listed(tasks_client, direct.queue)
    scheduled = task.schedule_time.timestamp() - direct.clock().timestamp()
    assert scheduled == pytest.approx(delay_s, abs=0.01), name


def test_the_deferred_task_carries_the_same_envelope_and_the_hand_off_settings(
    direct, tasks_client
):
    @handler("github", "issues")
    def waiting(event, ctx):
        raise Deferred(WAITING, after_s=30)

    body = sealed("settings-1", direct.clock)
    assert post(direct.worker, body).body["status"] == "deferred"

    [task] = listed(tasks_client, direct.queue)
    request, url = task.http_request, direct.config.worker_url
    assert (request.url, request.body) == (url, body)  # the same sealed bytes
    assert (request.oidc_token.service_account_email, request.oidc_token.audience) == (
        LOCAL_TASKS_SERVICE_ACCOUNT,
        url,
    )
    assert task.dispatch_deadline.total_seconds() == 300
    assert request.headers[DEFERRALS_HEADER] == "1"


def test_a_lost_answer_retried_by_the_same_task_makes_no_second_deferred_task(direct, tasks_client):
    @handler("github", "issues")
    def waiting(event, ctx):
        raise Deferred(WAITING, after_s=30)

    body = sealed("lost-1", direct.clock)
    first = post(direct.worker, body, task="task-7")
    again = post(direct.worker, body, task="task-7", retry_count=1)  # the 202 was lost
    other = post(direct.worker, body, task="task-8")  # another task of the delivery (a replay)

    assert [r.body["status"] for r in (first, again, other)] == ["deferred"] * 3
    assert first.body["task"] == again.body["task"] != other.body["task"]
    assert len(listed(tasks_client, direct.queue)) == 2
    assert direct.ledger.deliveries.get("github", "lost-1").status == "queued"


def test_a_deferral_past_the_envelope_lifetime_is_dead_with_an_alert(direct, tasks_client, caplog):
    caplog.set_level(logging.ERROR, logger="hookledger")

    @handler("github", "issues")
    def waiting(event, ctx):
        raise Deferred(WAITING, after_s=60)

    # Sealed 7 days less 30 min ago: a task an hour from now could not open it any more.
    body = sealed("old-1", direct.clock, age_s=DEFAULT_MAX_AGE_S - 1800)
    reply = post(direct.worker, body)

    assert (reply.status, reply.body["status"]) == (200, "dead"), reply.body
    assert "envelope" in reply.body["reason"] and WAITING in reply.body["reason"]
    assert direct.ledger.deliveries.get("github", "old-1").status == "dead"
    assert [a["delivery_id"] for a in dead_alerts(caplog)] == ["old-1"]
    assert listed(tasks_client, direct.queue) == []
